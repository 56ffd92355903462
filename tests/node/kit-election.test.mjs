// Watch and leader election on the test kit (`lock-wasm/testing`): the kit's simulated
// service serves L8 (the long poll), L9 and L4's value, on its manual clock, so every wait
// here is the kit's time. Needs the simulation's service model with the event feed
// (lock-wasm/src/sim/service/feed.rs): without it a watch gets no events and these fail.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createTestKit } from "lock-wasm/testing";
import { LockLostError, ValidationError } from "lock-wasm";

/** Runs `promise` while moving the kit's time in steps, until it settles (at most `boundMs`). */
async function within(kit, promise, boundMs = 120_000) {
  let settled = false;
  const done = promise.then(
    (value) => ((settled = true), { value }),
    (error) => ((settled = true), { error }),
  );
  const until = kit.now() + boundMs;
  while (!settled && kit.now() < until) await kit.advance(50);
  await kit.settle();
  if (!settled) throw new Error(`not settled within ${boundMs} kit ms`);
  const outcome = await done;
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}

test("kit, election: campaigns are elected in the order they queued, with rising terms", async () => {
  const kit = await createTestKit({ seed: 3 });
  const sessions = [];
  for (let i = 0; i < 3; i += 1) sessions.push(await kit.client.openSession());
  const won = [];
  const campaigns = sessions.map((s, i) =>
    s.campaign("election", { value: `node-${i}` }).then((l) => (won.push(i), l)),
  );
  // Let each take its ticket in turn (they were started in order; the kit runs them so).
  await kit.advance(200);
  const a = await within(kit, campaigns[0]);
  assert.deepEqual(won, [0]);
  assert.equal(a.value, "node-0");
  // Long past any campaign round: the others still wait, in order.
  await kit.advance(90_000);
  assert.deepEqual(won, [0]);
  await a.resign();
  const b = await within(kit, campaigns[1]);
  assert.deepEqual(won, [0, 1]);
  assert.ok(b.term > a.term, `${b.term} > ${a.term}`);
  await b.resign();
  const c = await within(kit, campaigns[2]);
  assert.deepEqual(won, [0, 1, 2]);
  assert.ok(c.term > b.term);
  assert.deepEqual(await kit.client.leader("election"), { value: "node-2", term: c.term, holderId: kit.holder("election").holderId });
  await c.resign();
  assert.equal(await kit.client.leader("election"), null);
});

test("kit, election: observe follows the leader and its value; break ends it", async () => {
  const kit = await createTestKit({ seed: 4 });
  const seen = [];
  const observing = (async () => {
    for await (const leader of kit.client.observe("svc")) {
      seen.push(leader === null ? null : `${leader.term}:${leader.value}`);
      if (seen.length === 4) break;
    }
  })();
  await kit.advance(100);
  const session = await kit.client.openSession();
  const leadership = await within(kit, session.campaign("svc", { value: "a" }));
  await kit.advance(100);
  await within(kit, leadership.proclaim("a"));
  await within(kit, leadership.proclaim("b"));
  await kit.advance(100);
  await leadership.resign();
  await within(kit, observing);
  const t = leadership.term;
  assert.deepEqual(seen, [null, `${t}:a`, `${t}:b`, null]);
});

test("kit, election: a lost session ends the leadership, aborts its signal and refuses proclaim", async () => {
  const kit = await createTestKit({ seed: 5 });
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const leadership = await within(kit, session.campaign("lead", { value: "x", ttlMs: 3000 }));
  const signal = leadership.signal;
  assert.equal(signal.aborted, false);
  kit.partition(session, true);
  const reason = await within(kit, leadership.lost());
  assert.equal(typeof reason, "string");
  assert.equal(signal.aborted, true);
  assert.ok(signal.reason instanceof LockLostError);
  assert.equal(leadership.isLost, true);
  kit.partition(session, false);
  await assert.rejects(leadership.proclaim("y"), LockLostError);
  assert.equal(leadership.value, "x");
});

test("kit, watch: events in order with rising tokens; the signal ends the iterator", async () => {
  const kit = await createTestKit({ seed: 6 });
  const controller = new AbortController();
  const events = [];
  const watching = (async () => {
    for await (const event of kit.client.watch("w", { signal: controller.signal })) {
      events.push(event);
    }
    return "ended";
  })();
  await kit.advance(100);
  const one = await kit.client.openSession();
  const two = await kit.client.openSession();
  const first = await within(kit, one.acquire("w"));
  const queued = two.acquire("w", { policy: { waitMs: 5000 } });
  await kit.advance(100);
  await one.release(first);
  const second = await within(kit, queued);
  await two.release(second);
  await kit.advance(100);
  controller.abort();
  assert.equal(await within(kit, watching), "ended");
  const kinds = events.map((e) => e.kind).filter((k) => k !== "waiters");
  assert.deepEqual(kinds, ["snapshot", "granted", "released", "handedOff", "released"]);
  const tokens = events.filter((e) => e.kind === "granted" || e.kind === "handedOff").map((e) => e.fencingToken);
  assert.deepEqual(tokens, [first.fencingToken, second.fencingToken]);
  assert.ok(second.fencingToken > first.fencingToken);
  assert.throws(() => kit.client.watch(""), ValidationError);
});
