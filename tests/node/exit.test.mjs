// A Node process with an open session must exit by itself once the session is closed:
// heartbeat timers are unref'd and cleared, so nothing keeps the event loop alive.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

test("the process exits after close() without waiting for the next heartbeat", async () => {
  const script = fileURLToPath(new URL("./smoke.mjs", import.meta.url));
  // A 60 s session heartbeats every 20 s; the child must be gone long before that. The bound
  // is generous (a slow machine still passes) but far below one heartbeat period.
  const child = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, SMOKE_SESSION_TTL_MS: "60000" } });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve("still running after 15 s");
    }, 15_000);
    child.on("exit", (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  assert.equal(code, 0, out);
  assert.match(out, /smoke ok/);
});

// The other direction: a `using` callback is work its caller awaits, so the process stays
// alive for it even when nothing else holds the event loop (here: an unref'd timer). Without
// that, Node ends the process mid-callback with exit code 13 (unsettled top-level await).
test("an active session.using callback keeps the process alive", async () => {
  const script = `
    import { createTestKit } from "lock-wasm/testing";
    const kit = await createTestKit();
    const session = await kit.client.openSession();
    const result = await session.using("k", async () => {
      await new Promise((resolve) => setTimeout(resolve, 300).unref());
      return "callback finished";
    });
    console.log(result);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: fileURLToPath(new URL(".", import.meta.url)),
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, out);
  assert.match(out, /callback finished/);
});
