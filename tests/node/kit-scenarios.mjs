// The test kit's scenarios, written once against an environment: the kit
// (`lock-wasm/testing`, kit-env.mjs) or a real lock-server (real-env.mjs). Both must hold the
// same invariants — one winner at a time, tokens rising, the loser told — though not in the
// same order or at the same instants. Runtime-neutral (Node, Deno, Bun): node:assert only.
//
// An environment:
//   openSession(sessionOptions, clientDefaults) → Session (each on its own network path)
//   until(predicate, boundMs, what)  lets time pass (kit: advances; real: waits) until
//                                    predicate() holds, failing after boundMs of its time
//   partition(session, cut)          cuts or restores that session's network path
//   revoke(key) → token | undefined  an operator's revoke
//   holder(key) → { fencingToken } | null
//   key(prefix)                      a key no other scenario uses
import assert from "node:assert/strict";
import { LockLostError, SessionLostError } from "lock-wasm";

const LOCK_TTL = 1200;
const SESSION_TTL = 1500;
const FAST = { baseBackoffMs: 20, maxBackoffMs: 100 };

/** A promise's state without waiting for it. */
function track(promise) {
  const state = { done: false, value: undefined, error: undefined };
  state.promise = promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error) => Object.assign(state, { done: true, error }),
  );
  return state;
}

function recorder(session) {
  const events = [];
  session.onEvent((event) => events.push(event));
  return events;
}

/** A value the test hands out when it chooses: the job's unit of work waits on one. */
function gate() {
  let open;
  const promise = new Promise((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * The job under test: processes items under a lock and must stop as soon as the lock is
 * lost. Each item's work is `work(item, fencingToken)`.
 */
async function jobUnderLock(handle, items, work) {
  const done = [];
  for (const item of items) {
    handle.signal.throwIfAborted();
    await work(item, handle.fencingToken);
    done.push(item);
  }
  return done;
}

export const scenarios = {
  /** The lock is lost mid-job (its session cut off): the job stops, the loser is told, and
   * the next holder gets a higher token. */
  async lostLockMidJob(env) {
    const key = env.key("job");
    const session = await env.openSession({ ttlMs: SESSION_TTL });
    const events = recorder(session);
    const handle = await session.acquire(key, { ttlMs: LOCK_TTL });
    assert.ok(handle, "granted");
    const gates = [gate(), gate(), gate()];
    const processed = [];
    const job = track(
      jobUnderLock(handle, [0, 1, 2], async (item) => {
        await gates[item].promise;
        processed.push(item);
      }),
    );
    gates[0].open();
    await env.until(() => processed.length === 1, 2000, "the first item is processed");
    env.partition(session, true);
    // What the job checks is the signal: it aborts when the loss is reported (a timer at the
    // deadline), which on a loaded machine can come after `isLost` reads true.
    await env.until(() => handle.signal.aborted, 10_000, "the handle's signal aborts");
    gates[1].open();
    gates[2].open();
    await env.until(() => job.done, 2000, "the job ends");
    assert.ok(job.error instanceof LockLostError, `the job stopped with LockLostError, got ${job.error}`);
    assert.equal(job.error.reason, "deadlinePassed");
    assert.deepEqual(processed, [0, 1], "no item started after the loss");
    assert.ok(
      events.some((e) => e.type === "lost" && e.key === key && e.reason === "deadlinePassed"),
      "a lost event told the loser",
    );
    const next = await env.openSession({ ttlMs: SESSION_TTL });
    const patient = { ...FAST, totalBudgetMs: 10_000, maxAttempts: 1000 };
    const successor = track(next.acquire(key, { ttlMs: LOCK_TTL, policy: patient }));
    await env.until(() => successor.done, 15_000, "another session takes the key once the server lets it go");
    assert.ok(successor.value, `granted: ${successor.error}`);
    assert.ok(successor.value.fencingToken > handle.fencingToken, "tokens rise");
    env.partition(session, false);
    await next.close();
    await session.close().catch(() => {});
  },

  /** The budget runs out while another session holds the key: `undefined`, after
   * contention events and a notGranted event; with no answer at all, TRANSPORT. */
  async budgetExhaustion(env) {
    const key = env.key("budget");
    const holder = await env.openSession({ ttlMs: SESSION_TTL });
    const held = await holder.acquire(key, { ttlMs: LOCK_TTL });
    assert.ok(held);
    // A session that outlives the cut-off acquire's budget by far: what runs out below is the
    // budget, not the session (a 1.5 s session cut off from its server is lost within it).
    const loser = await env.openSession({ ttlMs: 6000 }, { requestTimeoutMs: 300 });
    const events = recorder(loser);
    const policy = { ...FAST, totalBudgetMs: 1000 };
    const attempt = track(loser.acquire(key, { ttlMs: LOCK_TTL, policy }));
    await env.until(() => attempt.done, 5000, "the acquire gives up");
    assert.equal(attempt.error, undefined, `resolved, not rejected: ${attempt.error}`);
    assert.equal(attempt.value, undefined, "not granted");
    assert.ok(events.some((e) => e.type === "contention" && e.reason === "LOCK_CONTENDED"), "told why");
    assert.ok(events.some((e) => e.type === "notGranted" && e.key === key), "told it gave up");
    assert.equal((await env.holder(key))?.fencingToken, held.fencingToken, "the holder kept it");

    env.partition(loser, true);
    const unanswered = track(loser.acquire(key, { ttlMs: LOCK_TTL, policy }));
    await env.until(() => unanswered.done, 5000, "the unanswered acquire gives up");
    assert.equal(unanswered.error?.code, "TRANSPORT", `no answer is TRANSPORT, got ${unanswered.error}`);
    assert.equal(events.filter((e) => e.type === "notGranted").length, 2, "notGranted came first");
    env.partition(loser, false);
    await loser.close().catch(() => {});
    await holder.close();
  },

  /** A hold nested through the handle shares it; the lock goes with the outermost release;
   * another caller of the same session waits for it and gets a token of its own. */
  async reentrancy(env) {
    const key = env.key("nested");
    const session = await env.openSession({ ttlMs: SESSION_TTL });
    const outer = await session.acquire(key, { ttlMs: LOCK_TTL });
    const inner = outer.nest();
    assert.equal(inner, outer, "the same handle");
    assert.equal((await env.holder(key))?.fencingToken, outer.fencingToken);
    await session.release(inner);
    assert.equal(outer.isLost, false, "still held after the inner release");
    assert.equal((await env.holder(key))?.fencingToken, outer.fencingToken);
    const next = session.acquire(key, { ttlMs: LOCK_TTL });
    await session.release(outer);
    const again = await next;
    assert.ok(again.fencingToken > outer.fencingToken, "the next caller's grant has a higher token");
    await session.release(again);
    assert.equal(await env.holder(key), null, "free after the last release");
    await session.close();
  },


  /** An operator revokes the lock: the holder learns at its next heartbeat; the next
   * holder's token is higher; releasing the revoked handle is quiet. */
  async revoke(env) {
    const key = env.key("revoke");
    const session = await env.openSession({ ttlMs: SESSION_TTL });
    const events = recorder(session);
    const handle = await session.acquire(key, { ttlMs: LOCK_TTL });
    assert.equal(await env.revoke(key), handle.fencingToken, "revoke names the token it ended");
    assert.equal(await env.holder(key), null);
    await env.until(() => handle.isLost, 5000, "the holder learns");
    assert.equal(handle.lostReason, "notInHeartbeat");
    assert.ok(events.some((e) => e.type === "lost" && e.reason === "notInHeartbeat"), "a lost event");
    await session.release(handle);
    const other = await env.openSession({ ttlMs: SESSION_TTL });
    const next = await other.acquire(key, { ttlMs: LOCK_TTL });
    assert.ok(next.fencingToken > handle.fencingToken, "tokens rise");
    assert.equal(await env.revoke(env.key("free")), undefined, "a free key has nothing to revoke");
    await other.close();
    await session.close();
  },

  /** A partitioned session loses its lock at the deadline, then the session itself; after
   * the partition heals it stays lost, and the server has let the key go. */
  async partition(env) {
    const key = env.key("partition");
    const session = await env.openSession({ ttlMs: SESSION_TTL });
    const events = recorder(session);
    const handle = await session.acquire(key, { ttlMs: LOCK_TTL });
    env.partition(session, true);
    await env.until(() => handle.isLost, 10_000, "the lock is reported lost");
    assert.equal(handle.lostReason, "deadlinePassed");
    await env.until(() => events.some((e) => e.type === "sessionLost"), 10_000, "the session is reported lost");
    env.partition(session, false);
    assert.equal(session.isClosed, true);
    await assert.rejects(session.acquire(env.key("after")), SessionLostError);
    await env.until(async () => (await env.holder(key)) === null, 10_000, "the server lets the key go");
  },

  /** Two sessions race for one key, round after round: one winner at a time (a fenced
   * ledger sees begin/end pairs that never interleave), tokens rising, the loser told. */
  async twoSessionsRacing(env) {
    const key = env.key("race");
    const ledger = [];
    const rounds = 4;
    const sessions = [
      await env.openSession({ ttlMs: SESSION_TTL }),
      await env.openSession({ ttlMs: SESSION_TTL }),
    ];
    const contention = sessions.map(recorder);
    const worker = async (session, id) => {
      for (let round = 0; round < rounds; round += 1) {
        let handle;
        while (handle === undefined) {
          handle = await session.acquire(key, { ttlMs: LOCK_TTL, policy: { ...FAST, totalBudgetMs: 2000 } });
        }
        ledger.push({ entry: `begin:${id}:${round}`, token: handle.fencingToken });
        await Promise.resolve(); // the other worker runs meanwhile, if it can
        ledger.push({ entry: `end:${id}:${round}`, token: handle.fencingToken });
        await session.release(handle);
      }
    };
    const race = track(Promise.all(sessions.map((s, i) => worker(s, i))));
    await env.until(() => race.done, 60_000, "both workers finish");
    assert.equal(race.error, undefined, `${race.error}`);
    assert.equal(ledger.length, rounds * 2 * 2);
    let last = 0;
    for (let i = 0; i < ledger.length; i += 2) {
      const [begin, end] = [ledger[i], ledger[i + 1]];
      assert.equal(end.entry, begin.entry.replace("begin:", "end:"), "sections never interleave");
      assert.ok(begin.token > last, `tokens rise (${begin.token} after ${last})`);
      last = begin.token;
    }
    const told = contention.flat().filter((e) => e.type === "contention" || e.type === "notGranted");
    assert.ok(told.length > 0, "the loser of some round was told");
    await Promise.all(sessions.map((s) => s.close()));
  },

  /** Twenty concurrent callers of ONE session (a service's request handlers) on one key: each
   * runs alone, in arrival order, under a token of its own, and none is refused. */
  async oneSessionManyCallers(env) {
    const key = env.key("callers");
    const session = await env.openSession({ ttlMs: SESSION_TTL });
    const ledger = [];
    const call = (id) =>
      session.using(key, { ttlMs: LOCK_TTL }, async (handle) => {
        ledger.push({ entry: `begin:${id}`, token: handle.fencingToken });
        await Promise.resolve(); // every other caller runs meanwhile, if it can
        ledger.push({ entry: `end:${id}`, token: handle.fencingToken });
      });
    const all = track(Promise.all(Array.from({ length: 20 }, (_, id) => call(id))));
    await env.until(() => all.done, 30_000, "every caller finishes");
    assert.equal(all.error, undefined, `${all.error}`);
    assert.equal(ledger.length, 40);
    let last = 0;
    for (let i = 0; i < ledger.length; i += 2) {
      const [begin, end] = [ledger[i], ledger[i + 1]];
      assert.equal(end.entry, begin.entry.replace("begin:", "end:"), "callers never overlap");
      assert.equal(end.token, begin.token);
      assert.ok(begin.token > last, `each caller has a token of its own (${begin.token} after ${last})`);
      last = begin.token;
    }
    assert.deepEqual(
      ledger.filter((_, i) => i % 2 === 0).map((e) => e.entry),
      Array.from({ length: 20 }, (_, id) => `begin:${id}`),
      "in arrival order",
    );
    await session.close();
  },
};
