// The shared-hold surface of the npm API that needs no service with shared holds: what is
// refused before anything is sent (permits, `mode`, `limit`, the helpers' own options, a
// nest's options), an exclusive handle's mode and its shared nest, and the new error classes.
// Runs on the test kit; the scenarios of shared holds are in shared-scenarios.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as api from "lock-wasm";
import { ErrorCode, LimitMismatchError, LockError, UpgradeNotAllowedError, ValidationError, isLockError } from "lock-wasm";
import { createTestKit } from "lock-wasm/testing";

/** Asserts that `fn` throws (or rejects with) a ValidationError naming `field`. */
async function refused(fn, field) {
  await assert.rejects(async () => fn(), (err) => {
    assert.ok(err instanceof ValidationError, `${err}`);
    assert.equal(err.field, field, err.message);
    return true;
  });
}

test("shared holds: a bad permits, mode or limit is refused before anything is sent", async () => {
  const kit = await createTestKit({ seed: 1 });
  const session = await kit.client.openSession();
  for (const permits of [0, 10_001, 1.5, "2", undefined]) {
    await refused(() => session.semaphore("k", permits), "permits");
    await refused(() => kit.client.semaphore("k", permits), "permits");
  }
  await refused(() => session.acquire("k", { limit: 3 }), "limit"); // a limit is for shared holds
  await refused(() => session.acquire("k", { mode: "exclusive", limit: 3 }), "limit");
  await refused(() => session.acquire("k", { mode: "shared", limit: 0 }), "limit");
  await refused(() => session.acquire("k", { mode: "shared", limit: 10_001 }), "limit");
  await refused(() => session.acquire("k", { mode: "shared", limit: -1 }), "limit");
  await refused(() => session.acquire("k", { mode: "both" }), "mode");
  await refused(() => session.acquire("k", { mode: 1 }), "mode");
  await refused(() => session.using("k", { mode: "shared", limit: 0 }, () => {}), "limit");
  // The helpers set mode and limit themselves: a caller's own is a contradiction.
  await refused(() => session.read("k", { mode: "exclusive" }), "mode");
  await refused(() => session.read("k", { limit: 2 }), "limit");
  await refused(() => session.write("k", { mode: "shared" }), "mode");
  await refused(() => kit.client.write("k", { limit: 2 }), "limit");
  await refused(() => session.semaphore("k", 2).acquire({ limit: 3 }), "limit");
  await refused(() => session.semaphore("k", 2).using({ mode: "exclusive" }, () => {}), "mode");
  assert.deepEqual(kit.holders("k"), [], "nothing was granted");
  await session.close();
});

test("shared holds: an exclusive handle says so, and nests a shared hold as itself", async () => {
  const kit = await createTestKit({ seed: 2 });
  const session = await kit.client.openSession();
  const handle = await session.write("k");
  assert.equal(handle.mode, "exclusive");
  assert.equal(handle.limit, undefined);
  assert.equal(handle.nest({ mode: "shared" }), handle);
  assert.equal(handle.nest({ mode: "exclusive" }), handle);
  assert.equal(handle.nest(), handle);
  await refused(() => handle.nest({ mode: "both" }), "mode");
  await refused(() => handle.nest({ mdoe: "shared" }), "mdoe"); // a typo is not ignored
  await refused(() => handle.nest("shared"), "options");
  for (let i = 0; i < 3; i += 1) await session.release(handle);
  assert.equal(handle.isLost, false, "three nested holds given back, the outer one stands");
  await session.release(handle);
  assert.equal(handle.lostReason, "released");
  const semaphore = session.semaphore("s", 3);
  assert.ok(semaphore instanceof api.Semaphore);
  assert.deepEqual([semaphore.key, semaphore.permits], ["s", 3]);
  await session.close();
});

test("shared holds: the new error classes carry their codes, limit and verdicts", () => {
  const mismatch = new LimitMismatchError("limit mismatch", { limit: 4 });
  assert.ok(mismatch instanceof LockError && isLockError(mismatch));
  assert.equal(mismatch.code, ErrorCode.LIMIT_MISMATCH);
  assert.equal(mismatch.code, "LIMIT_MISMATCH");
  assert.equal(mismatch.limit, 4);
  assert.equal(mismatch.retryable, false);
  assert.equal(mismatch.name, "LimitMismatchError");
  assert.equal(new LimitMismatchError("no limit in force").limit, null);
  const upgrade = new UpgradeNotAllowedError("upgrade");
  assert.equal(upgrade.code, "UPGRADE_NOT_ALLOWED");
  assert.equal(upgrade.retryable, false);
  assert.equal(new LockError("m", { code: "UPGRADE_NOT_ALLOWED" }).retryable, false);
  for (const name of ["Semaphore", "LimitMismatchError", "UpgradeNotAllowedError"]) {
    assert.equal(typeof api[name], "function", `${name} is exported`);
  }
});
