// Shared holds (read-write locks, counting semaphores) through the npm API, written once
// against an environment: the test kit (kit-shared.test.mjs) or a real lock-server
// (shared-real.test.mjs). The environment is kit-scenarios.mjs's, plus
//   holders(key) → [{ fencingToken, mode }]   every live holder of the key, in token order
// Runtime-neutral: node:assert only.
import assert from "node:assert/strict";
import { LimitMismatchError, UpgradeNotAllowedError } from "lock-wasm";

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

/** `count` sessions of their own: holds at the same time need one each. */
function sessions(env, count) {
  return Promise.all(Array.from({ length: count }, () => env.openSession({ ttlMs: SESSION_TTL })));
}

/** Waits for `attempt` and returns what it resolved (failing on a rejection). */
async function settled(env, attempt, what) {
  await env.until(() => attempt.done, 10_000, what);
  assert.equal(attempt.error, undefined, `${what}: rejected with ${attempt.error}`);
  return attempt.value;
}

export const sharedScenarios = {
  /** A read-write lock: two readers hold at once, each with its own rising token; a writer
   * is not granted while they hold, and is granted after both left, with a greater token. */
  async readersShareAndAWriterWaits(env) {
    const key = env.key("rw");
    const [a, b, c] = await sessions(env, 3);
    const r1 = await a.read(key, { ttlMs: LOCK_TTL });
    const r2 = await b.read(key, { ttlMs: LOCK_TTL });
    assert.ok(r1 && r2, "both readers granted at once");
    assert.deepEqual([r1.mode, r2.mode], ["shared", "shared"]);
    assert.equal(r1.limit, undefined);
    assert.ok(r2.fencingToken > r1.fencingToken, "each reader has a token of its own");
    assert.deepEqual(
      (await env.holders(key)).map((h) => [h.fencingToken, h.mode]),
      [
        [r1.fencingToken, "shared"],
        [r2.fencingToken, "shared"],
      ],
    );

    const refused = track(c.write(key, { ttlMs: LOCK_TTL, policy: { ...FAST, totalBudgetMs: 500 } }));
    assert.equal(await settled(env, refused, "the writer gives up"), undefined, "no writer beside readers");

    const writing = track(c.write(key, { ttlMs: LOCK_TTL, policy: { ...FAST, totalBudgetMs: 8000 } }));
    await a.release(r1);
    assert.equal(writing.done, false, "one reader still holds");
    await b.release(r2);
    const w = await settled(env, writing, "the writer is granted");
    assert.ok(w, "granted once the readers left");
    assert.equal(w.mode, "exclusive");
    assert.ok(w.fencingToken > r2.fencingToken, "the writer's token is greater than every reader's");
    await c.release(w);
    await Promise.all([a, b, c].map((s) => s.close()));
  },

  /** A semaphore of 2 with 3 contenders: two hold at once while the third is refused; it is
   * granted when a permit comes back; every permit has its own token, never 3 at once. */
  async aSemaphoreOfTwoWithThreeContenders(env) {
    const key = env.key("sem");
    const contenders = await sessions(env, 3);
    const events = [];
    contenders.forEach((s) => s.onEvent((e) => events.push(e)));
    const held = [];
    const gates = [];
    let most = 0;
    const policy = { ...FAST, totalBudgetMs: 8000 };
    const attempts = contenders.map((session) =>
      track(
        session.semaphore(key, 2).using({ ttlMs: LOCK_TTL, policy }, async (permit) => {
          held.push(permit.fencingToken);
          most = Math.max(most, held.length);
          assert.equal(permit.mode, "shared");
          assert.equal(permit.limit, 2);
          await new Promise((open) => gates.push(open)); // held until the test opens its gate
          held.splice(held.indexOf(permit.fencingToken), 1);
          return permit.fencingToken;
        }),
      ),
    );
    const refused = () => events.some((e) => e.type === "contention" && e.reason === "LOCK_CONTENDED");
    await env.until(() => held.length === 2 && refused(), 5000, "two permits held, the third refused");
    assert.equal((await env.holders(key)).length, 2);
    gates.shift()(); // one permit comes back
    await env.until(() => gates.length === 2, 5000, "the third contender takes it");
    gates.splice(0).forEach((open) => open());
    await env.until(() => attempts.every((a) => a.done), 5000, "all three contenders ran");
    for (const attempt of attempts) assert.equal(attempt.error, undefined, `${attempt.error}`);
    const tokens = attempts.map((a) => a.value);
    assert.equal(new Set(tokens).size, 3, `a token per permit: ${tokens}`);
    assert.equal(most, 2, "two permits held at once, never three");
    await Promise.all(contenders.map((s) => s.close()));
  },

  /** A semaphore of another size than the key's holders use is refused at once with the
   * limit in force, and never retried. */
  async aLimitMismatchIsRefusedAtOnce(env) {
    const key = env.key("mismatch");
    const [a, b] = await sessions(env, 2);
    const permit = await a.semaphore(key, 2).acquire({ ttlMs: LOCK_TTL });
    assert.ok(permit);
    const events = [];
    b.onEvent((e) => events.push(e));
    const other = track(b.semaphore(key, 3).acquire({ ttlMs: LOCK_TTL, policy: FAST }));
    await env.until(() => other.done, 2000, "the mismatch is answered");
    assert.ok(other.error instanceof LimitMismatchError, `${other.error}`);
    assert.equal(other.error.code, "LIMIT_MISMATCH");
    assert.equal(other.error.limit, 2, "the limit in force");
    assert.equal(other.error.retryable, false);
    assert.ok(!events.some((e) => e.type === "contention"), "not retried");
    await a.release(permit);
    await Promise.all([a, b].map((s) => s.close()));
  },

  /** Nesting across modes: a reader inside a writer's hold is the same hold and token; an
   * upgrade of a shared hold is refused without a request, and the reader keeps its hold. */
  async nestingFollowsTheModes(env) {
    const key = env.key("nest");
    const [a, b] = await sessions(env, 2);
    const w = await a.write(key, { ttlMs: LOCK_TTL });
    assert.equal(w.nest({ mode: "shared" }), w, "a shared nest under an exclusive hold");
    await a.release(w);
    assert.equal(w.isLost, false, "the outer hold stands");
    await a.release(w);

    const r = await b.read(key, { ttlMs: LOCK_TTL });
    assert.throws(() => r.nest({ mode: "exclusive" }), (err) => {
      assert.ok(err instanceof UpgradeNotAllowedError, `${err}`);
      assert.equal(err.code, "UPGRADE_NOT_ALLOWED");
      assert.equal(err.retryable, false);
      return true;
    });
    assert.deepEqual(
      (await env.holders(key)).map((h) => h.fencingToken),
      [r.fencingToken],
      "the reader still holds, alone",
    );
    assert.equal(r.nest(), r, "a nest in the handle's own mode");
    await b.release(r);
    await b.release(r);
    assert.deepEqual(await env.holders(key), [], "released with the outermost hold");
    await Promise.all([a, b].map((s) => s.close()));
  },

  /** Readers of ONE session take turns on the key, as writers do, each with its own token. */
  async readersOfOneSessionTakeTurns(env) {
    const key = env.key("turns");
    const [session] = await sessions(env, 1);
    const ledger = [];
    const reader = (id) =>
      session.using(key, { ttlMs: LOCK_TTL, mode: "shared" }, async (handle) => {
        assert.equal(handle.mode, "shared");
        ledger.push({ entry: `begin:${id}`, token: handle.fencingToken });
        await Promise.resolve(); // every other reader runs meanwhile, if it can
        ledger.push({ entry: `end:${id}`, token: handle.fencingToken });
      });
    const all = track(Promise.all([0, 1, 2].map(reader)));
    await env.until(() => all.done, 10_000, "every reader finishes");
    assert.equal(all.error, undefined, `${all.error}`);
    let last = 0;
    for (let i = 0; i < ledger.length; i += 2) {
      assert.equal(ledger[i + 1].entry, ledger[i].entry.replace("begin:", "end:"), "one after another");
      assert.ok(ledger[i].token > last, "each with a token of its own");
      last = ledger[i].token;
    }
    await session.close();
  },
};
