// The package over https in Node: the smoke example runs against a TLS lock-server whose
// self-signed certificate Node trusts through NODE_EXTRA_CA_CERTS (read once at process
// start, hence a child process), and fails without it. The runner (scripts/test-wasm.sh)
// passes the server in LOCK_TLS_URL and its certificate in LOCK_TLS_CA.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const url = process.env.LOCK_TLS_URL;
const ca = process.env.LOCK_TLS_CA;
const script = fileURLToPath(new URL("./smoke.mjs", import.meta.url));

/** Runs the smoke example against the TLS server, trusting `extraCa` if given. */
function smoke(extraCa) {
  const env = { ...process.env, LOCK_URL: url };
  delete env.NODE_EXTRA_CA_CERTS;
  if (extraCa) env.NODE_EXTRA_CA_CERTS = extraCa;
  return spawnSync(process.execPath, [script], { env, encoding: "utf8", timeout: 60_000 });
}

test("https with NODE_EXTRA_CA_CERTS naming the server's certificate", () => {
  assert.ok(url?.startsWith("https://"), "LOCK_TLS_URL must be an https lock-server");
  assert.ok(ca, "LOCK_TLS_CA must name its certificate");
  const run = smoke(ca);
  assert.equal(run.status, 0, `smoke failed:\n${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /^smoke ok/m);
});

test("https without the CA: the certificate is refused", () => {
  const run = smoke(undefined);
  assert.notEqual(run.status, 0, "an unknown certificate must not be trusted");
  assert.match(run.stderr, /certificate/i);
});
