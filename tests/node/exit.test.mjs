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
