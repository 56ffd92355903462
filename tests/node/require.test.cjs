// The package through CommonJS `require`, and its identity with the ESM entry.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const lock = require("lock-wasm");

test("require() exposes the API and works against the server", async () => {
  assert.equal(typeof lock.LockClient, "function");
  const client = new lock.LockClient({ baseUrl: process.env.LOCK_URL });
  const session = await client.openSession();
  const handle = await session.acquire(`require/${process.pid}/${Date.now()}`);
  assert.ok(handle instanceof lock.LockHandle);
  assert.ok(handle.fencingToken > 0);
  await session.release(handle);
  await session.close();
});

test("import() of the same package yields the same classes", async () => {
  const esm = await import("lock-wasm");
  assert.equal(esm.LockClient, lock.LockClient);
  assert.equal(esm.LockError, lock.LockError);
});
