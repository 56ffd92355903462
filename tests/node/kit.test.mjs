// The test kit (`lock-wasm/testing`) in Node: the shared scenarios on the kit's simulated
// service and clock, and what only the kit promises (time moves only in advance(), requests
// take no time, a seed replays a run, the real API and error classes).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LockClient, SessionLostError, ValidationError } from "lock-wasm";
import { createTestKit } from "lock-wasm/testing";
import { scenarios } from "./kit-scenarios.mjs";
import { kitEnv } from "./kit-env.mjs";

for (const [name, scenario] of Object.entries(scenarios)) {
  test(`kit: ${name}`, async () => {
    await scenario(await kitEnv());
  });
}

test("kit: requests complete without the clock moving", async () => {
  const kit = await createTestKit({ seed: 3 });
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const handle = await session.acquire("jobs/1");
  await session.release(handle);
  await session.close();
  assert.equal(kit.now(), 0);
});

test("kit: ten simulated minutes of heartbeats keep the lock, in one advance", async () => {
  const kit = await createTestKit({ seed: 7 });
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const handle = await session.acquire("jobs/1", { ttlMs: 5000 });
  const deadline = handle.deadline;
  assert.ok(deadline > kit.now() && deadline <= kit.now() + 5000, `deadline ${deadline} in kit time`);
  await kit.advance(10 * 60_000);
  assert.equal(kit.now(), 600_000);
  assert.equal(handle.isLost, false);
  assert.ok(handle.deadline > 600_000, "renewed all along");
  const holder = kit.holder("jobs/1");
  assert.equal(holder.fencingToken, handle.fencingToken);
  assert.equal(holder.holderId, session.holderId);
  assert.ok(holder.remainingMs > 0 && holder.remainingMs <= 5000);
  await session.close();
  assert.equal(kit.holder("jobs/1"), null);
});

test("kit: an acquire started just before advance backs off on the kit's clock", async () => {
  const kit = await createTestKit({ seed: 11 });
  const owner = await kit.client.openSession();
  const held = await owner.acquire("k");
  const waiter = await kit.client.openSession();
  const events = [];
  waiter.onEvent((e) => events.push(e));
  const pending = waiter.acquire("k", { policy: { baseBackoffMs: 200, maxBackoffMs: 200 } });
  await kit.advance(0);
  const first = events.find((e) => e.type === "contention");
  assert.ok(first, "refused once and sleeping before time moved");
  assert.equal(first.attempt, 1);
  assert.equal(kit.now(), 0);
  await owner.release(held);
  await kit.advance(first.delayMs);
  const handle = await pending;
  assert.ok(handle.fencingToken > held.fencingToken);
  const granted = events.find((e) => e.type === "granted");
  assert.equal(granted?.attempts, 2);
  // Events reach logs: they name the session by its public holder id, never its session id.
  assert.equal(granted.holderId, waiter.holderId);
  assert.ok(!JSON.stringify(events).includes(waiter.id), "no event carries the session id");
});

test("kit: one seed replays the same run", async () => {
  const trace = async (seed) => {
    const kit = await createTestKit({ seed });
    const events = [];
    const sessions = await Promise.all([1, 2, 3].map(() => kit.client.openSession()));
    sessions.forEach((s, i) => s.onEvent((e) => events.push({ i, ...e, at: kit.now() })));
    const held = await sessions[0].acquire("k");
    const waits = sessions.slice(1).map((s) => s.acquire("k", { policy: { totalBudgetMs: 3000 } }));
    await kit.advance(1000);
    await sessions[0].release(held);
    await kit.advance(5000);
    await Promise.all(waits);
    return events;
  };
  const a = await trace(42);
  assert.ok(a.some((e) => e.type === "contention"));
  assert.deepEqual(await trace(42), a);
});

test("kit: its clients are the package's LockClient, its errors the package's classes", async () => {
  const kit = await createTestKit();
  assert.ok(kit.client instanceof LockClient);
  const session = await kit.client.openSession();
  await assert.rejects(session.acquire(""), (err) => err instanceof ValidationError && err.field === "key");
  await session.close();
  await assert.rejects(session.acquire("k"), SessionLostError);
  assert.throws(() => kit.createClient({ baseUrl: "http://x" }), (e) => e instanceof ValidationError && e.field === "baseUrl");
});

test("kit: bad arguments are ValidationErrors naming the argument", async () => {
  await assert.rejects(createTestKit({ seed: -1 }), (e) => e instanceof ValidationError && e.field === "seed");
  const kit = await createTestKit();
  assert.throws(() => kit.advance(-5), (e) => e instanceof ValidationError && e.field === "ms");
  assert.throws(() => kit.partition({ id: "s1" }, true), (e) => e.field === "session");
  assert.throws(() => kit.holder(7), (e) => e.field === "key");
});

// The README's "Keys and ranges" table, checked where it is cheapest: the kit's clients
// validate exactly as the package's other clients do, before any request.
test("kit: the README's key rules and ranges hold", async () => {
  const kit = await createTestKit();
  const refused = (field) => (e) => e instanceof ValidationError && e.field === field && !e.message.startsWith(`${field}: ${field}`);
  await assert.rejects(kit.client.openSession({ ttlMs: 99 }), refused("ttlMs"));
  await assert.rejects(kit.client.openSession({ ttlMs: 300_001 }), refused("ttlMs"));
  const session = await kit.client.openSession({ ttlMs: 100 });
  await session.close();
  const s = await kit.client.openSession();
  await assert.rejects(s.acquire("k", { ttlMs: 399 }), refused("ttlMs"));
  await assert.rejects(s.acquire("k", { ttlMs: 300_001 }), refused("ttlMs"));
  await assert.rejects(s.acquire("x".repeat(257)), refused("key"));
  await assert.rejects(s.acquire("a\u0001b"), refused("key"));
  await assert.rejects(s.acquire("a\u0085b"), refused("key"));
  await assert.rejects(s.acquire(""), (e) => e.field === "key" && e.message === "key must not be empty");
  for (const key of ["é".repeat(128), "a/b c?d#e%f"]) {
    const handle = await s.acquire(key, { ttlMs: 400 });
    assert.ok(handle, key);
    await s.release(handle);
  }
  await assert.rejects(s.acquire("k", { policy: { baseBackoffMs: 300, maxBackoffMs: 200 } }), refused("policy.baseBackoffMs"));
  await assert.rejects(s.acquire("k", { policy: { maxAttempts: 0 } }), refused("policy.maxAttempts"));
  await s.close();
});
