// The package's JS API through `import`, against a real lock-server.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  LockClient,
  LockError,
  ValidationError,
  LockLostError,
  ContentionError,
  ErrorCode,
} from "lock-wasm";
import { baseUrl, uniqueKey, lockState, deleteSession, waitFor } from "./helpers.mjs";

const client = new LockClient({ baseUrl });

test("acquire, read the grant, release", async () => {
  const session = await client.openSession({ ttlMs: 10_000 });
  const key = uniqueKey("api");
  const handle = await session.acquire(key, { ttlMs: 5000 });
  assert.ok(handle, "granted");
  assert.equal(handle.key, key);
  assert.equal(typeof handle.fencingToken, "number");
  assert.ok(Number.isSafeInteger(handle.fencingToken) && handle.fencingToken > 0);
  assert.equal(handle.isLost, false);
  assert.ok(handle.deadline > Date.now() && handle.deadline <= Date.now() + 5000);
  const state = await lockState(key);
  assert.equal(state.holder.fencingToken, handle.fencingToken);
  // L7 names the holder by the session's public holderId, never by its id.
  assert.equal(state.holder.holderId, session.holderId);
  assert.ok(!JSON.stringify(state).includes(session.id), "L7 never shows a session id");
  await session.release(handle);
  assert.equal((await lockState(key)).holder, null);
  await session.close();
});

test("a nested hold is the same handle; another acquire of the key is never one", async () => {
  const session = await client.openSession();
  const key = uniqueKey("nested");
  const outer = await session.acquire(key);
  const inner = outer.nest();
  assert.equal(inner, outer);
  await session.release(inner);
  assert.equal((await lockState(key)).holder?.fencingToken, outer.fencingToken, "still held at depth 1");
  // An independent caller of the same session waits for the hold, within its budget.
  assert.equal(await session.acquire(key, { policy: { totalBudgetMs: 300 } }), undefined);
  await session.release(outer);
  assert.equal((await lockState(key)).holder, null);
  assert.throws(() => outer.nest(), (err) => err.code === "LOCK_LOST");
  await session.close();
});

test("a contended key resolves undefined within the budget, with contention events", async () => {
  const holder = await client.openSession();
  const waiter = await client.openSession();
  const key = uniqueKey("contended");
  const held = await holder.acquire(key);
  const events = [];
  waiter.onEvent((e) => events.push(e));
  const policy = { baseBackoffMs: 5, maxBackoffMs: 40, totalBudgetMs: 400, maxAttempts: 6 };
  assert.equal(await waiter.acquire(key, { policy }), undefined);
  const contention = events.filter((e) => e.type === "contention" && e.key === key);
  assert.ok(contention.length >= 1, "at least one jittered retry was reported");
  assert.ok(contention.every((e) => e.delayMs >= 0 && e.delayMs <= 40), "delays stay within the cap");
  await holder.release(held);
  const granted = await waiter.acquire(key, { policy });
  assert.ok(granted && granted.fencingToken > held.fencingToken, "tokens strictly increase");
  await waiter.close();
  await holder.close();
});

test("await using releases the lock at scope exit", async () => {
  const session = await client.openSession();
  const key = uniqueKey("dispose");
  {
    const handle = await session.acquire(key);
    assert.equal(typeof handle[Symbol.asyncDispose], "function");
    // Node 20 has no `await using` syntax; this is exactly what it compiles to.
    await handle[Symbol.asyncDispose]();
  }
  assert.equal((await lockState(key)).holder, null);
  await session.close();
});

test("using() runs the callback under the lock and releases after", async () => {
  const session = await client.openSession();
  const key = uniqueKey("using");
  const result = await session.using(key, { ttlMs: 2000 }, async (handle, signal) => {
    assert.equal(signal.aborted, false);
    assert.equal((await lockState(key)).holder.fencingToken, handle.fencingToken);
    return 42;
  });
  assert.equal(result, 42);
  assert.equal((await lockState(key)).holder, null);
  await session.close();
});

test("using() aborts its signal when the session is lost server-side", async () => {
  const session = await client.openSession({ ttlMs: 600 });
  const key = uniqueKey("lost");
  const reason = await session.using(key, async (handle, signal) => {
    // The server forgets the session; the next heartbeat (a third of the TTL) finds out.
    assert.equal(await deleteSession(session), 204);
    await waitFor(() => signal.aborted, 10_000, "the lost signal");
    assert.equal(handle.isLost, true);
    return signal.reason;
  });
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.code, ErrorCode.LOCK_LOST);
  assert.equal(reason.retryable, false);
  await session.close();
});

test("an AbortSignal cancels a waiting acquire promptly", async () => {
  const holder = await client.openSession();
  const waiter = await client.openSession();
  const key = uniqueKey("abort");
  await holder.acquire(key);
  const controller = new AbortController();
  const pending = waiter.acquire(key, { signal: controller.signal, policy: { totalBudgetMs: 60_000, maxAttempts: 1000 } });
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(pending, (err) => err.name === "AbortError");
  // Cancelled well before its 60 s budget: the test would time out otherwise.
  assert.notEqual((await lockState(key)).holder?.sessionId, waiter.id);
  await waiter.close();
  await holder.close();
});

test("bad options reject with VALIDATION_FAILED naming the field", async () => {
  const session = await client.openSession();
  const cases = [
    [{ ttlMs: "soon" }, "ttlMs"],
    [{ ttlMs: 5 }, "ttlMs"],
    [{ ttlMs: -1 }, "ttlMs"],
    [{ policy: { waitMs: 30_001 } }, "policy.waitMs"],
    [{ policy: { maxAttempts: 0 } }, "policy.maxAttempts"],
    [{ policy: { maxAttempts: 1.5 } }, "policy.maxAttempts"],
    [{ signal: "nope" }, "options.signal"],
  ];
  for (const [opts, field] of cases) {
    await assert.rejects(session.acquire(uniqueKey("bad"), opts), (err) => {
      assert.ok(err instanceof ValidationError && err instanceof LockError && err instanceof Error);
      assert.equal(err.code, "VALIDATION_FAILED");
      assert.equal(err.retryable, false);
      assert.ok(err.field === field || err.message.includes(field), `${JSON.stringify(opts)} names ${field}: ${err.message}`);
      return true;
    });
  }
  await assert.rejects(session.acquire(""), (err) => err.code === "VALIDATION_FAILED");
  await assert.rejects(client.openSession({ ttlMs: "x" }), (err) => err.code === "VALIDATION_FAILED" && /ttlMs/.test(err.message));
  assert.throws(() => new LockClient({ baseUrl: 7 }), (err) => err.code === "VALIDATION_FAILED" && /baseUrl/.test(err.message));
  await session.close();
});

test("errors are Error subclasses with stable codes", async () => {
  assert.equal(new ContentionError("x", { code: "LOCK_CONTENDED" }).retryable, true);
  const session = await client.openSession();
  await deleteSession(session);
  await assert.rejects(session.acquire(uniqueKey("gone")), (err) => {
    assert.ok(err instanceof LockError);
    assert.equal(err.code, "SESSION_NOT_FOUND");
    assert.equal(err.retryable, false);
    return true;
  });
  await session.close();
});

test("LockOutcome appears nowhere in the package (acquire resolves a handle or undefined)", async () => {
  const { readdir, readFile } = await import("node:fs/promises");
  const { createRequire } = await import("node:module");
  const { dirname, join } = await import("node:path");
  const root = dirname(createRequire(import.meta.url).resolve("lock-wasm/package.json"));
  const files = (await readdir(root, { recursive: true })).filter((f) => /\.(js|cjs|mjs|ts)$/.test(f));
  assert.ok(files.length >= 8, `package files found: ${files}`);
  for (const file of files) {
    assert.doesNotMatch(await readFile(join(root, file), "utf8"), /LockOutcome/, file);
  }
});
