// Lock renewal through the npm package, against a real lock-server: a 500 ms lock stays held
// through 5 s of work on a 15 s session (heartbeats renew it every third of its TTL), and
// when its heartbeats stop reaching the server the handle's signal aborts and `lost` fires at
// its deadline, after which another session gets the key with a higher token.
//
// The one timing bound is a correctness bound: the loss must be reported at the deadline,
// not when someone next looks; it allows one scheduling slice of lateness (the behaviour it
// rules out misses the deadline by seconds).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LockClient, LockLostError } from "lock-wasm";
import { baseUrl, uniqueKey, lockState, sleep, startProxy } from "./helpers.mjs";

/** How late a timer may fire on a loaded two-core machine and still count as on time. */
const SCHEDULING_SLICE_MS = 250;

const client = new LockClient({ baseUrl });

test("a 500 ms lock on a 15 s session stays held through 5 s of work", async () => {
  const session = await client.openSession({ ttlMs: 15_000 });
  const key = uniqueKey("renewal");
  const { seen, token } = await session.using(key, { ttlMs: 500 }, async (handle, signal) => {
    const seen = new Set();
    for (const until = Date.now() + 5000; Date.now() < until; await sleep(100)) {
      seen.add((await lockState(key)).holder?.fencingToken);
      assert.equal(signal.aborted, false);
    }
    assert.equal(handle.isLost, false);
    return { seen: [...seen], token: handle.fencingToken };
  });
  assert.deepEqual(seen, [token], "L7 showed the same token throughout");
  await session.close();
});

test("with heartbeats blocked, the signal aborts and `lost` fires at the deadline; a later grant has a higher token", async () => {
  const proxy = await startProxy();
  const session = await new LockClient({ baseUrl: proxy.url }).openSession({ ttlMs: 15_000 });
  const lost = [];
  session.onEvent((event) => {
    if (event.type === "lost") lost.push({ at: Date.now(), event });
  });
  const key = uniqueKey("blocked");
  const held = await session.using(key, { ttlMs: 500 }, async (handle, signal) => {
    let abortedAt;
    signal.addEventListener("abort", () => (abortedAt = Date.now()));
    proxy.block();
    // The work goes on in small steps until the signal says stop.
    while (!signal.aborted) await sleep(20);
    proxy.unblock(); // so the release after this callback gets through
    return { abortedAt, deadline: handle.deadline, reason: signal.reason, token: handle.fencingToken };
  });
  assert.ok(held.reason instanceof LockLostError, String(held.reason));
  assert.equal(held.reason.reason, "deadlinePassed");
  const late = held.abortedAt - held.deadline;
  // Date.now() has whole milliseconds; the deadline is fractional.
  assert.ok(late >= -1 && late <= SCHEDULING_SLICE_MS, `aborted ${late} ms after the deadline`);
  assert.equal(lost.length, 1, JSON.stringify(lost));
  assert.equal(lost[0].event.reason, "deadlinePassed");
  assert.ok(lost[0].at - held.deadline <= SCHEDULING_SLICE_MS, `lost ${lost[0].at - held.deadline} ms late`);

  const other = await client.openSession();
  const taken = await other.acquire(key, { policy: { totalBudgetMs: 10_000, maxAttempts: 1000 } });
  assert.ok(taken && taken.fencingToken > held.token, `token ${taken?.fencingToken} after ${held.token}`);
  await other.close();
  await session.close();
  await proxy.close();
});

test("a lock TTL too short to renew is refused, naming the shortest that works", async () => {
  const session = await client.openSession();
  await assert.rejects(session.acquire(uniqueKey("short"), { ttlMs: 299 }), (err) => {
    assert.equal(err.code, "VALIDATION_FAILED");
    assert.equal(err.field, "ttlMs");
    assert.match(err.message, /at least 300 ms/);
    return true;
  });
  const handle = await session.acquire(uniqueKey("short"), { ttlMs: 300 });
  assert.ok(handle, "300 ms is accepted");
  await session.close();
});
