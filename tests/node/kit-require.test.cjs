// `lock-wasm/testing` from CommonJS: the same kit, the same LockClient class as `require("lock-wasm")`.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { LockClient } = require("lock-wasm");
const { createTestKit } = require("lock-wasm/testing");

test("require('lock-wasm/testing') gives a working kit over the package's LockClient", async () => {
  const kit = await createTestKit({ seed: 1 });
  assert.ok(kit.client instanceof LockClient);
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const handle = await session.acquire("jobs/1");
  kit.partition(session, true);
  await kit.advance(3000);
  assert.equal(handle.isLost, true);
  assert.equal(handle.lostReason, "deadlinePassed");
});
