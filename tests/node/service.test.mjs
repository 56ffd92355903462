// One long-lived session shared by the concurrent requests of a service, through the npm
// package, against real lock-server processes: concurrent callers of one session take turns
// on a key, each with a token of its own (and the fenced ledger accepts every write);
// nesting is explicit (`handle.nest()`); a release that fails (server killed, network cut)
// never wedges the key and never changes what `using` settles with; the client's own session
// is replaced once lost; an outage shorter than the session's validity loses nothing, and an
// acquire made during it rejects with TRANSPORT; memory stays flat per acquire; many watch
// iterators and a campaign share the one client.
//
// Time is real here: every bound is generous and none is on speed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { LockClient, LockLostError, NotGrantedError, isLockError } from "lock-wasm";
import {
  baseUrl,
  uniqueKey,
  lockState,
  ledgerAppend,
  ledgerEntries,
  deleteSession,
  waitFor,
  sleep,
  startProxy,
  startServer,
  startGateProxy,
} from "./helpers.mjs";

const client = new LockClient({ baseUrl });

/** L7 against another server than the main one (a test's own). */
async function stateAt(url, key) {
  const res = await fetch(`${url}/v1/locks/${encodeURIComponent(key)}`);
  return res.json();
}

/** Collects a session's events; `of(type, key)` lists those of one type (and key). */
function recordEvents(session) {
  const events = [];
  session.onEvent((event) => events.push(event));
  return {
    events,
    of: (type, key) => events.filter((e) => e.type === type && (key === undefined || e.key === key)),
  };
}

test("20 concurrent `using` calls of one session on one key take turns, each with a higher token, all fenced writes accepted", async () => {
  const session = await client.openSession({ ttlMs: 15_000 });
  const key = uniqueKey("payments");
  const ran = [];
  const statuses = [];
  // A generous budget: the last caller waits for the 19 sections before it.
  const opts = { ttlMs: 5000, policy: { totalBudgetMs: 60_000 } };
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      session.using(key, opts, async (handle, signal) => {
        ran.push({ at: "start", token: handle.fencingToken, caller: i });
        statuses.push(await ledgerAppend(key, handle.fencingToken, `caller:${i}`));
        await sleep(20);
        assert.equal(signal.aborted, false);
        ran.push({ at: "end", token: handle.fencingToken, caller: i });
        return handle.fencingToken;
      }),
    ),
  );
  assert.equal(ran.length, 40, "every callback ran once");
  const order = [];
  for (let i = 0; i < ran.length; i += 2) {
    const [start, end] = [ran[i], ran[i + 1]];
    assert.equal(start.at, "start", `entry ${i} starts a section: ${JSON.stringify(ran)}`);
    assert.equal(end.at, "end", `entry ${i + 1} ends it: ${JSON.stringify(ran)}`);
    assert.equal(end.caller, start.caller, `section ${i / 2} is one caller's`);
    assert.equal(end.token, start.token);
    order.push(start.token);
  }
  for (let i = 1; i < order.length; i += 1) {
    assert.ok(order[i] > order[i - 1], `tokens strictly increase in run order: ${order}`);
  }
  assert.equal(new Set(results).size, 20, "20 grants, 20 tokens");
  assert.deepEqual(statuses, Array(20).fill(204), "the fenced ledger accepted every write");
  const entries = await ledgerEntries(key);
  assert.deepEqual(
    entries.map((e) => e.fencingToken),
    order,
    "the ledger holds the 20 writes, in run order",
  );
  assert.equal((await lockState(key)).holder, null, "free after the last section");
  await session.close();
});

test("20 concurrent watch iterators and a campaign share one client: every watcher sees the grant, each ends on its signal", async () => {
  const key = uniqueKey("service/watch");
  const controller = new AbortController();
  const seen = Array.from({ length: 20 }, () => []);
  const watchers = seen.map(async (events) => {
    for await (const event of client.watch(key, { signal: controller.signal })) events.push(event);
  });
  const kinds = (events) => events.map((e) => e.kind).filter((k) => k !== "waiters");
  // Every watcher has its snapshot before the campaign: its next poll resumes after it.
  await waitFor(() => seen.every((events) => events.length > 0), 30_000, "every snapshot");
  const leadership = await client.campaign(key, { value: "svc-1" });
  const leader = await client.leader(key);
  assert.deepEqual([leader.term, leader.value], [leadership.term, "svc-1"]);
  await leadership.resign();
  await waitFor(() => seen.every((events) => kinds(events).includes("released")), 30_000, "every release seen");
  controller.abort();
  await Promise.all(watchers); // each ends cleanly on the signal
  for (const events of seen) {
    assert.deepEqual(kinds(events), ["snapshot", "granted", "released"]);
    const grant = events.find((e) => e.kind === "granted");
    assert.deepEqual([grant.fencingToken, grant.value], [leadership.term, "svc-1"]);
  }
});

test("nesting is explicit: handle.nest() is the same hold, an independent acquire waits its turn", async () => {
  const session = await client.openSession({ ttlMs: 15_000 });
  const key = uniqueKey("nest");
  let waiter;
  let waiterSettled = false;
  const held = await session.using(key, { ttlMs: 5000 }, async (handle) => {
    const inner = handle.nest();
    assert.equal(inner, handle, "nest() returns the very handle");
    assert.equal(inner.fencingToken, handle.fencingToken);
    // Another caller of the same session does not get into the held lock: with a short
    // budget it is not granted at all.
    const denied = await session.acquire(key, { policy: { totalBudgetMs: 300 } });
    assert.equal(denied, undefined, "an independent acquire of a held key is not granted within 300 ms");
    // With a longer budget it waits for the outer release.
    waiter = session.acquire(key, { ttlMs: 5000, policy: { totalBudgetMs: 30_000 } });
    waiter.then(
      () => (waiterSettled = true),
      () => (waiterSettled = true),
    );
    await session.release(inner);
    assert.equal(handle.isLost, false, "the inner release leaves the hold");
    assert.equal((await lockState(key)).holder?.fencingToken, handle.fencingToken, "still held after the inner release");
    await sleep(200);
    assert.equal(waiterSettled, false, "the waiter still waits after the inner release");
    return handle;
  });
  assert.equal(held.isLost, true, "the outer release ended the handle");
  assert.throws(() => held.nest(), (err) => err instanceof LockLostError && err.code === "LOCK_LOST");
  const next = await waiter;
  assert.ok(next, "the waiter got the key after the outer release");
  assert.notEqual(next, held, "a handle of its own");
  assert.ok(next.fencingToken > held.fencingToken, `token ${next.fencingToken} after ${held.fencingToken}`);
  await session.release(next);
  assert.equal((await lockState(key)).holder, null, "free after the waiter's release");
  await session.close();
});

test("a release that fails while the server is down never wedges the key", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const own = new LockClient({ baseUrl: server.url });
  const session = await own.openSession({ ttlMs: 15_000 });
  t.after(() => session.close().catch(() => {}));
  const seen = recordEvents(session);
  const key = uniqueKey("wedge");
  const first = await session.acquire(key, { ttlMs: 3000 });
  assert.ok(first, "granted");
  assert.equal((await stateAt(server.url, key)).holder?.fencingToken, first.fencingToken);

  await server.kill9();
  await assert.rejects(session.release(first), (err) => {
    assert.ok(isLockError(err), String(err));
    assert.equal(err.code, "TRANSPORT");
    return true;
  });
  assert.equal(first.isLost, true, "the handle ended at once");
  await waitFor(() => seen.of("releaseFailed", key).length > 0, 5000, "the releaseFailed event");
  const [failed] = seen.of("releaseFailed", key);
  assert.equal(failed.fencingToken, first.fencingToken);
  assert.equal(failed.code, "TRANSPORT");

  // The next caller does not wait for the failed release: it is trying already while the
  // server comes back on the same port and data dir.
  const next = session.using(key, { ttlMs: 3000, policy: { totalBudgetMs: 30_000, maxAttempts: 1000 } }, async (handle) => {
    assert.equal((await stateAt(server.url, key)).holder?.fencingToken, handle.fencingToken, "L7 shows this grant");
    return handle.fencingToken;
  });
  await sleep(300);
  await server.restart();
  const token = await next;
  assert.ok(token > first.fencingToken, `a new grant: token ${token} after ${first.fencingToken}`);
  assert.equal(session.isClosed, false, "the session survived the restart");
  assert.equal((await stateAt(server.url, key)).holder, null, "free after that using");

  const other = await new LockClient({ baseUrl: server.url }).openSession();
  const taken = await other.acquire(key, { policy: { totalBudgetMs: 10_000 } });
  assert.ok(taken && taken.fencingToken > token, `another session takes the key: ${taken?.fencingToken} after ${token}`);
  await other.release(taken);
  await other.close();
});

/** A 15 s session whose requests go through a proxy of its own (1 s request timeout), and its events. */
async function sessionBehindProxy(t) {
  const proxy = await startProxy();
  t.after(() => proxy.close());
  const client = new LockClient({ baseUrl: proxy.url, defaults: { requestTimeoutMs: 1000 } });
  const session = await client.openSession({ ttlMs: 15_000 });
  t.after(() => session.close().catch(() => {}));
  return { proxy, session, seen: recordEvents(session) };
}

test("using settles with the callback's value even when the release fails", async (t) => {
  const { proxy, session, seen } = await sessionBehindProxy(t);
  const key = uniqueKey("outcome-value");
  let token;
  const value = await session.using(key, { ttlMs: 20_000 }, async (handle) => {
    token = handle.fencingToken;
    proxy.block(); // the release's L6 gets no answer
    return "committed";
  });
  assert.equal(value, "committed");
  await waitFor(() => seen.of("releaseFailed", key).length > 0, 5000, "the releaseFailed event");
  assert.equal(seen.of("releaseFailed", key)[0].fencingToken, token);
  assert.equal(seen.of("releaseFailed", key)[0].code, "TRANSPORT");
  assert.equal((await lockState(key)).holder?.fencingToken, token, "the failed L6 left the lock held");
  proxy.unblock();
  // The L6 re-sent in the background frees it long before its 20 s TTL would.
  await waitFor(async () => (await lockState(key)).holder === null, 10_000, "the background L6");
  const next = await session.using(key, { ttlMs: 5000 }, (handle) => handle.fencingToken);
  assert.ok(next > token, `the next caller gets a new grant: ${next} after ${token}`);
});

test("using rejects with the callback's own error even when the release fails too", async (t) => {
  const { proxy, session, seen } = await sessionBehindProxy(t);
  const key = uniqueKey("outcome-error");
  const boom = new Error("the callback's failure");
  await assert.rejects(
    session.using(key, { ttlMs: 20_000 }, async () => {
      proxy.block();
      throw boom;
    }),
    (err) => {
      assert.equal(err, boom, `the very error, not ${err?.code ?? err}`);
      return true;
    },
  );
  await waitFor(() => seen.of("releaseFailed", key).length > 0, 5000, "the releaseFailed event");
  assert.equal(seen.of("releaseFailed", key)[0].code, "TRANSPORT");
  proxy.unblock();
  await waitFor(async () => (await lockState(key)).holder === null, 10_000, "the background L6");
});

test("an acquire not granted within its budget makes `using` reject with NotGrantedError", async () => {
  const holder = await client.openSession();
  const session = await client.openSession();
  const key = uniqueKey("not-granted");
  const held = await holder.acquire(key);
  let ran = false;
  await assert.rejects(
    session.using(key, { policy: { totalBudgetMs: 300 } }, () => (ran = true)),
    (err) => {
      assert.ok(err instanceof NotGrantedError, String(err));
      assert.equal(err.code, "NOT_GRANTED");
      assert.equal(err.retryable, true);
      return true;
    },
  );
  assert.equal(ran, false, "the callback did not run");
  await holder.release(held);
  await holder.close();
  await session.close();
});

test("the client's own session: shared, replaced after it was lost behind a cut network", async (t) => {
  const gate = await startGateProxy();
  t.after(() => gate.close());
  const own = new LockClient({ baseUrl: gate.url, session: { ttlMs: 2000 }, defaults: { requestTimeoutMs: 1000 } });
  t.after(() => own.close().catch(() => {}));
  const key = uniqueKey("managed");
  const first = await own.session();
  assert.equal(await own.session(), first, "one session for every caller");
  const seenHolder = await own.using(key, { ttlMs: 2000 }, async (handle) => (await lockState(key)).holder);
  assert.equal(seenHolder.holderId, first.holderId, "client.using runs on the client's session");

  gate.block(); // longer than the session's 2 s TTL: heartbeats cannot renew it
  await waitFor(() => first.isClosed, 15_000, "the client's session to be lost");
  gate.allow();
  const again = await own.using(key, { ttlMs: 2000 }, async (handle) => (await lockState(key)).holder);
  assert.notEqual(again.holderId, first.holderId, "a new session after the lost one");
  const second = await own.session();
  assert.notEqual(second, first);
  assert.equal(second.holderId, again.holderId);
});

test("the client's own session: replaced when the server forgot it, and closed by client.close()", async () => {
  const own = new LockClient({ baseUrl });
  const first = await own.session();
  const key = uniqueKey("managed-deleted");
  assert.equal(await own.using(key, (handle) => handle.key), key);
  assert.equal(await deleteSession(first), 204);
  // The next acquire meets SESSION_NOT_FOUND (or the heartbeat found out first): either way
  // it is made again on a new session.
  const holder = await own.using(key, async () => (await lockState(key)).holder);
  assert.notEqual(holder.holderId, first.holderId, "a new session");
  assert.equal(first.isClosed, true);
  const kept = await own.acquire(key, { ttlMs: 5000 });
  assert.ok(kept);
  assert.equal((await lockState(key)).holder?.fencingToken, kept.fencingToken);
  await own.close();
  assert.equal((await lockState(key)).holder, null, "client.close() closed its session and its locks");
});

test("an outage shorter than the session's validity loses nothing; an acquire during it rejects with TRANSPORT", async (t) => {
  const gate = await startGateProxy();
  t.after(() => gate.close());
  const session = await new LockClient({ baseUrl: gate.url }).openSession({ ttlMs: 15_000 });
  t.after(() => session.close().catch(() => {}));
  const seen = recordEvents(session);
  const key = uniqueKey("outage");
  // A 10 s lock is renewed every 3.3 s: at least one renewal falls in the 4 s outage.
  const ttlMs = 10_000;
  const handle = await session.acquire(key, { ttlMs });
  assert.ok(handle);
  const signal = handle.signal;

  const other = await client.openSession();
  t.after(() => other.close().catch(() => {}));
  const elsewhere = uniqueKey("outage-elsewhere");
  const otherHold = await other.acquire(elsewhere, { ttlMs: 10_000 });
  assert.ok(otherHold);

  const outageStart = Date.now();
  gate.refuse();
  await assert.rejects(session.acquire(elsewhere, { policy: { totalBudgetMs: 2000 } }), (err) => {
    assert.ok(isLockError(err), String(err));
    assert.equal(err.code, "TRANSPORT", `${err.code}: ${err.message}`);
    return true;
  });
  await sleep(Math.max(0, outageStart + 4000 - Date.now()));
  gate.allow();
  assert.ok(gate.refused > 0, "the proxy refused connections");
  assert.equal(session.isClosed, false, "the session is open after the outage");
  assert.equal(signal.aborted, false, "the lock's signal did not abort in the outage");
  assert.equal((await lockState(key)).holder?.fencingToken, handle.fencingToken, "L7 shows the lock after the outage");

  // A deadline past outageStart + TTL can only come from a renewal sent after the outage
  // began, i.e. a heartbeat re-sent through it and answered once the path was back. (Right
  // after the outage the session and its lock always look fine: without that renewal they
  // are lost only at their deadlines, seconds later.) The wait ends at the renewal, or when
  // the lock is reported lost, or after 10 s.
  const renewed = () => handle.deadline > outageStart + ttlMs;
  await waitFor(() => renewed() || handle.isLost, 10_000, "a renewal after the outage, or the loss");
  assert.ok(
    renewed() && !handle.isLost,
    `no renewal after the outage: the lock's deadline stayed ${Math.round(handle.deadline - outageStart)} ms ` +
      `after the outage began (TTL ${ttlMs} ms), isLost: ${handle.isLost}, events: ${JSON.stringify(seen.events)}`,
  );
  assert.equal(session.isClosed, false, "the session survived");
  assert.equal(handle.isLost, false, "the lock survived");
  assert.equal(signal.aborted, false, "its signal never aborted");
  assert.equal(seen.of("lost").length, 0, JSON.stringify(seen.events));
  assert.equal(seen.of("sessionLost").length, 0);
  assert.equal((await lockState(key)).holder?.fencingToken, handle.fencingToken, "L7 still shows the lock");
  await session.release(handle);
  await other.release(otherHold);
});

// The soak runs in a child `node --expose-gc`, so it can collect garbage (and run the
// wasm-bindgen finalizers that free the wasm side of dropped JS objects) before each reading.
// The package does not export its wasm instance: the child records it as the glue creates
// it (`new WebAssembly.Instance`, synchronously at import) and reads the size of its linear
// memory, which a leak in the wasm heap grows and nothing ever shrinks.
const SOAK_CHILD = String.raw`
import { setImmediate as tick } from "node:timers/promises";
const instances = [];
WebAssembly.Instance = new Proxy(WebAssembly.Instance, {
  construct(target, args, newTarget) {
    const instance = Reflect.construct(target, args, newTarget);
    instances.push(instance);
    return instance;
  },
});
const { LockClient } = await import(process.env.SOAK_ENTRY);
const memories = instances.map((i) => i.exports.memory).filter((m) => m instanceof WebAssembly.Memory);
if (memories.length !== 1) throw new Error("expected the one wasm memory of the package, found " + memories.length);
const [memory] = memories;
const settle = async () => { for (let i = 0; i < 3; i++) { globalThis.gc(); await tick(); } };
const session = await new LockClient({ baseUrl: process.env.LOCK_URL }).openSession({ ttlMs: 15000 });
const key = "soak/" + process.pid + "/" + Date.now();
// Each cycle from a fresh task, as a service's requests would come.
const cycle = () => new Promise((resolve) => setImmediate(resolve)).then(() => session.using(key, { ttlMs: 5000 }, (h) => h.fencingToken));
// n cycles, or fewer once past "until", but never fewer than "min".
const run = async (n, until, min = n) => { let i = 0; for (; i < n && (i < min || Date.now() < until); i++) { await cycle(); if (i % 1000 === 999) await settle(); } return i; };
const warm = await run(Number(process.env.SOAK_WARMUP), Infinity);
await settle();
const before = memory.buffer.byteLength;
const heapBefore = process.memoryUsage().heapUsed;
const started = Date.now();
const cycles = await run(Number(process.env.SOAK_CYCLES), started + Number(process.env.SOAK_MAX_MS), Number(process.env.SOAK_MIN));
const ms = Date.now() - started;
await settle();
const after = memory.buffer.byteLength;
const heapAfter = process.memoryUsage().heapUsed;
await session.close();
console.log(JSON.stringify({ warm, cycles, ms, before, after, heapBefore, heapAfter }));
`;

// Wasm memory grows by whole 64 KiB pages, out of whatever the warm-up left free in the
// heap: the run must be long enough for a per-acquire leak of the size once seen (50–70 bytes
// a cycle) to outgrow that slack by pages. 5,000 cycles leak 250 KB or more at that rate.
const MIN_CYCLES = 5000;

test("memory stays flat per acquire: a soak of acquire+release cycles on one session", async (t) => {
  const env = {
    ...process.env,
    SOAK_ENTRY: import.meta.resolve("lock-wasm"),
    SOAK_WARMUP: process.env.SOAK_WARMUP ?? "2000",
    SOAK_CYCLES: process.env.SOAK_CYCLES ?? "20000",
    // What fits in about a minute (but at least MIN_CYCLES, however long they take).
    SOAK_MAX_MS: process.env.SOAK_MAX_MS ?? "60000",
    SOAK_MIN: String(MIN_CYCLES),
  };
  const child = spawn(process.execPath, ["--expose-gc", "--input-type=module", "-e", SOAK_CHILD], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (err += c));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, `soak child failed:\n${err}`);
  const r = JSON.parse(out.trim().split("\n").pop());
  const growth = r.after - r.before;
  const perThousand = (growth * 1000) / r.cycles;
  const heapPerThousand = ((r.heapAfter - r.heapBefore) * 1000) / r.cycles;
  const summary =
    `soak: ${r.cycles} cycles in ${r.ms} ms after ${r.warm} warm-up; wasm memory ${r.before} -> ${r.after} bytes ` +
    `(${perThousand.toFixed(1)} bytes per 1,000 cycles); JS heap ${(heapPerThousand / 1024).toFixed(1)} KB per 1,000 cycles`;
  t.diagnostic(summary);
  assert.ok(r.cycles >= MIN_CYCLES, `only ${r.cycles} cycles ran in ${r.ms} ms (at least ${MIN_CYCLES} needed)`);
  assert.ok(perThousand <= 10 * 1024, `wasm memory grew ${perThousand.toFixed(1)} bytes per 1,000 cycles (bound 10 KB)`);
});
