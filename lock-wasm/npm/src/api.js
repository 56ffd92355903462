// The public JS API of the `lock-wasm` npm package, as a thin layer over the wasm-bindgen
// classes (`RawClient`, `RawSession`, `RawHandle`) exported by `lock-wasm/src/wasm/`, with
// the error classes of errors.js.
//
// Why a hand-written layer at all: wasm-bindgen cannot declare `Error` subclasses, a
// `Symbol.asyncDispose` method or a callback-taking `using`, and those are what users of
// node-redlock and etcd3 expect. Everything with lock semantics (retry loop, turns per key,
// nesting depth, deadlines, heartbeats) stays in Rust; this file only adapts shapes.
//
// This file is ESM; `scripts/build-npm.sh` derives the CommonJS copy (`api.cjs`) from it
// by rewriting its `import` and `export` statements, so there is one source for both
// module systems.

import { ErrorCode, lockError, adoptError, errorExports } from "./errors.js";

// `Symbol.asyncDispose` exists in Node ≥ 20.4, Deno and current browsers; older engines get
// the well-known registry symbol that TypeScript's downlevel helpers also look for.
const asyncDispose = Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose");

async function call(promise) {
  try {
    return await promise;
  } catch (err) {
    throw adoptError(err);
  }
}

function invalid(field, message) {
  return lockError(ErrorCode.VALIDATION_FAILED, `${field}: ${message}`, { field });
}

// Options must be plain objects (or absent); the Rust side validates each field by name.
function options(value, field) {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw invalid(field, "must be an object");
  }
  return value;
}

function isAbortSignal(value) {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof value.aborted === "boolean" &&
    typeof value.addEventListener === "function"
  );
}

function splitSignal(opts, field) {
  const { signal, ...rest } = options(opts, field);
  if (signal !== undefined && signal !== null && !isAbortSignal(signal)) {
    throw invalid(`${field}.signal`, "must be an AbortSignal");
  }
  return { signal: signal ?? undefined, rest };
}

// The options of a mode's helper (`read`, `write`, a semaphore's `acquire`): the caller's,
// with the helper's `mode` and `limit`. A caller's own `mode` or `limit` there is refused,
// not overridden: `read(key, { mode: "exclusive" })` says two things at once.
function holdOptions(opts, helper, hold) {
  const given = options(opts, "options");
  for (const name of ["mode", "limit"]) {
    if (given[name] !== undefined) throw invalid(name, `is set by ${helper}`);
  }
  return { ...given, ...hold };
}

const SHARED_LIMIT_MAX = 10_000;

// A semaphore's permits are the `limit` of its shared holds: checked when it is made, so a
// bad number fails where it was written rather than at the first acquire.
function checkedPermits(permits) {
  if (!Number.isInteger(permits) || permits < 1 || permits > SHARED_LIMIT_MAX) {
    throw invalid("permits", `must be an integer from 1 to ${SHARED_LIMIT_MAX}`);
  }
  return permits;
}

/**
 * A held lock. `fencingToken` goes with every side effect; `isLost` and `deadline` are the
 * SDK's conservative local view (deadline: epoch milliseconds, like `Date.now()`); `signal`
 * aborts the moment the lock is lost.
 */
class LockHandle {
  #raw;
  #session;
  // The handle's AbortController, made when `signal` is first read: most handles are
  // released without anyone reading it, and an unread signal need not follow the loss.
  #lost;
  // The raw handle's `lost()` promise (the reason, the moment the lock is lost or released),
  // asked for once, by the signal or the tracing.
  #reported;
  // `key` and `fencingToken` are the raw handle's, read once by the session (each read of
  // a raw getter is a call into wasm).
  constructor(raw, session, key, fencingToken) {
    this.#raw = raw;
    this.#session = session;
    Object.defineProperty(this, "key", { value: key, enumerable: true });
    Object.defineProperty(this, "fencingToken", { value: fencingToken, enumerable: true });
  }
  /** Aborts (reason: a LockLostError with `reason`) the moment the lock is lost or released. */
  get signal() {
    if (this.#lost === undefined) {
      const lost = (this.#lost = new AbortController());
      const raw = this.#raw;
      // The Rust side reports the loss (at the deadline by a timer, or when a heartbeat, the
      // session or the owner ends the handle); the signal follows in the same turn. A handle
      // reported lost already (a grant that arrived after its deadline, or released before
      // the first read) starts aborted.
      const abort = (reason) => {
        const err = lockError(ErrorCode.LOCK_LOST, `lock ${JSON.stringify(raw.key)} lost: ${reason}`);
        err.reason = reason;
        lost.abort(err);
      };
      if (raw.lostReason !== undefined) abort(raw.lostReason);
      else this.#whenLost().then(abort);
    }
    return this.#lost.signal;
  }
  #whenLost() {
    this.#reported ??= this.#raw.lostReason !== undefined ? Promise.resolve(this.#raw.lostReason) : this.#raw.lost();
    return this.#reported;
  }
  /** Why the lock was lost (`deadlinePassed`, `notInHeartbeat`, ...), until then `undefined`. */
  get lostReason() {
    return this.#raw.lostReason;
  }
  /** True once the lock is known or presumed gone; never turns false again. */
  get isLost() {
    return this.#raw.isLost;
  }
  /** Epoch milliseconds after which the handle counts as lost unless heartbeats renew it. */
  get deadline() {
    return this.#raw.deadline;
  }
  /** `"exclusive"` or `"shared"`, as granted (a shared acquire by the key's writer gets its exclusive grant). */
  get mode() {
    return this.#raw.mode;
  }
  /** A shared grant's limit (a semaphore's permits), else `undefined`. */
  get limit() {
    return this.#raw.limit;
  }
  /**
   * A nested hold of this lock for the holder's own inner section: returns this handle, with
   * its token, and sends nothing; release it once per `nest()` (or `await using inner =
   * handle.nest()`), and the lock goes with the outermost release. Only code that has the
   * handle can nest, so another caller is never let into a held lock. `{ mode }` nests in
   * another mode: `"shared"` under an exclusive hold is allowed (the same handle); an
   * `"exclusive"` nest under a shared hold throws an `UpgradeNotAllowedError` and sends
   * nothing. Throws a `LockLostError` once the lock is lost or released.
   */
  nest(opts) {
    adoptSync(() => this.#raw.nest(opts));
    return this;
  }
  /** Same as `session.release(handle)`. */
  release() {
    return this.#session.release(this);
  }
  /** `await using handle = await session.acquire(...)` releases at scope exit. */
  [asyncDispose]() {
    return this.#session.release(this);
  }
  /** @internal */
  static raw(handle) {
    return handle.#raw;
  }
  /** @internal Resolves with the reason the moment the lock is lost or released. */
  static whenLost(handle) {
    return handle.#whenLost();
  }
}

/**
 * A won election: the campaign's grant. `term` is its fencing token (pass it with every side
 * effect the leader makes); `signal` aborts and `lost()` resolves the moment the term ends
 * (lost, revoked, or resigned).
 */
class Leadership {
  #raw;
  #handle;
  #value;
  constructor(raw, handle, value) {
    this.#raw = raw;
    this.#handle = handle;
    this.#value = value;
    Object.defineProperty(this, "election", { value: handle.key, enumerable: true });
    Object.defineProperty(this, "term", { value: handle.fencingToken, enumerable: true });
  }
  /** The value last proclaimed (or campaigned with), else `undefined`. */
  get value() {
    return this.#value;
  }
  /** The grant's LockHandle. */
  get handle() {
    return this.#handle;
  }
  /** Aborts (reason: a LockLostError) the moment the term ends. */
  get signal() {
    return this.#handle.signal;
  }
  /** True once the term may be over; never turns false again. */
  get isLost() {
    return this.#handle.isLost;
  }
  /** Resolves with the reason (`sessionLost`, `released`, ...) the moment the term ends. */
  lost() {
    return LockHandle.whenLost(this.#handle);
  }
  /**
   * Replaces the leader's value (L9). Rejects with a LockLostError, sending nothing, once
   * the term is over.
   */
  async proclaim(value) {
    if (typeof value !== "string") throw invalid("value", "must be a string");
    await call(this.#raw.proclaim(value));
    this.#value = value;
  }
  /** Ends the term: releases the grant, and the next candidate in the queue is elected. */
  resign() {
    return this.#handle.release();
  }
  /** `await using leadership = await session.campaign(...)` resigns at scope exit. */
  [asyncDispose]() {
    return this.resign();
  }
}

// An async iterator over a raw stream (a watch's events, an observe's leaders): one
// `next()` at a time; ends cleanly (done) when `signal` aborts or the loop breaks (its
// `return()`), and frees the raw stream then, which abandons the poll in flight.
async function* iterate(raw, signal) {
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    while (!stop.signal.aborted && !signal?.aborted) {
      let item;
      try {
        item = await raw.next(stop.signal);
      } catch (err) {
        if (stop.signal.aborted) return;
        throw adoptError(err);
      }
      if (item === undefined) return;
      yield item;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    stop.abort();
    raw.free();
  }
}

/** A session: the lease that keeps every lock it holds alive through heartbeats. */
class Session {
  #raw;
  #listeners = new Set();
  #trace;
  constructor(raw, clientListener, trace) {
    this.#raw = raw;
    this.#trace = trace;
    if (clientListener) this.#listeners.add(clientListener);
    this.#listen();
  }
  // The Rust side builds an event object only while a listener is set: set one only while
  // someone listens (a listener added with `onEvent`, the client's, or the tracing). The
  // tracing alone reads `contention` events only, and asks for no others.
  #listen() {
    const all = this.#listeners.size > 0;
    this.#raw.setListener(
      all || this.#trace !== undefined
        ? (event) => {
            this.#trace?.event(event);
            this.#dispatch(event);
          }
        : undefined,
      !all,
    );
  }
  /** The server's session id: the session's credential; never log or show it. */
  get id() {
    return this.#raw.id;
  }
  /** The session's public name: what L7 shows as its locks' holder. Safe to log. */
  get holderId() {
    return this.#raw.holderId;
  }
  /** True once the session is closed or lost. */
  get isClosed() {
    return this.#raw.isClosed;
  }
  // Called from inside the Rust acquire loop or heartbeat task: listeners run in a microtask
  // so that one calling back into the session (release, close) never re-enters Rust midway.
  #dispatch(event) {
    if (this.#listeners.size === 0) return;
    queueMicrotask(() => {
      for (const listener of [...this.#listeners]) {
        try {
          listener(event);
        } catch (err) {
          // A listener's bug must not break the others; report it like an unhandled error.
          queueMicrotask(() => {
            throw err;
          });
        }
      }
    });
  }
  /** Adds an event listener; returns a function that removes it. */
  onEvent(listener) {
    if (typeof listener !== "function") throw invalid("listener", "must be a function");
    const first = this.#listeners.size === 0;
    this.#listeners.add(listener);
    if (first) this.#listen();
    return () => {
      const removed = this.#listeners.delete(listener);
      if (removed && this.#listeners.size === 0) this.#listen();
      return removed;
    };
  }
  // Every grant is a handle of its own: each acquire is an independent caller with a token
  // of its own (nesting goes through `handle.nest()`).
  #wrap(raw, trace) {
    const handle = new LockHandle(raw, this, raw.key, raw.fencingToken);
    trace?.hold(handle, LockHandle.whenLost(handle));
    return handle;
  }
  /**
   * Acquires `key` with the bounded full-jitter loop. Resolves a `LockHandle`, or
   * `undefined` when the budget ran out without a grant. When another caller of this
   * session has the key, this one waits its turn (within its budget) and gets a token of its
   * own. `signal` cancels the wait.
   */
  async acquire(key, opts) {
    const { signal, rest } = splitSignal(opts, "options");
    if (typeof key !== "string") throw invalid("key", "must be a string");
    signal?.throwIfAborted?.();
    const trace = this.#trace?.acquire(key);
    let handle;
    try {
      // Awaited directly rather than through `call()`: one promise less per acquire.
      const raw = await this.#raw.acquire(key, rest, signal, trace?.request);
      handle = raw === undefined ? undefined : this.#wrap(raw, trace);
    } catch (caught) {
      const err = adoptError(caught);
      trace?.failed(err, signal?.aborted === true && err === signal.reason);
      throw err;
    }
    trace?.done(handle);
    return handle;
  }
  /** A read lock: `acquire` with `mode: "shared"` and no limit, beside every other reader. */
  read(key, opts) {
    return this.acquire(key, holdOptions(opts, "read()", { mode: "shared" }));
  }
  /** A write lock: `acquire` in the default mode, exclusive; no reader or writer beside it. */
  write(key, opts) {
    return this.acquire(key, holdOptions(opts, "write()", { mode: "exclusive" }));
  }
  /** A counting semaphore of `permits` on `key`, its permits taken on this session. */
  semaphore(key, permits) {
    return new Semaphore(this, key, checkedPermits(permits));
  }
  /**
   * Campaigns in `election` (a key) until elected: an exclusive acquire that waits in the
   * key's queue with no budget, so candidates are elected in the order they asked. Resolves
   * a `Leadership`; `value` (a string of at most 1 KiB) is what readers see as the leader's;
   * `ttlMs` the grant's TTL. `signal` cancels the campaign.
   */
  async campaign(election, opts) {
    const { signal, rest } = splitSignal(opts, "options");
    if (typeof election !== "string") throw invalid("election", "must be a string");
    signal?.throwIfAborted?.();
    const raw = await call(this.#raw.campaign(election, rest, signal));
    const handle = this.#wrap(raw.handle);
    return new Leadership(raw, handle, rest.value);
  }
  /**
   * Releases one hold; the lock itself goes with the outermost. A lost lock releases quietly.
   * A failed release never wedges the key: the handle ends at once, the next caller gets the
   * key, and the L6 is re-sent in the background (a `releaseFailed` event).
   */
  async release(handle) {
    if (!(handle instanceof LockHandle)) throw invalid("handle", "must be a LockHandle");
    try {
      // Not through `call()`: one promise less per release.
      await this.#raw.release(LockHandle.raw(handle), this.#trace?.releasing(handle.key));
    } catch (err) {
      throw adoptError(err);
    }
  }
  /**
   * Acquire, run `fn(handle, signal)`, release. `signal` is the handle's: it aborts (reason:
   * a LockLostError) the moment the lock is lost — its deadline passed without a renewal, a
   * heartbeat no longer lists it, or the session is gone. Throws a NotGrantedError when the
   * acquire budget runs out without a grant. Settles with `fn`'s outcome: its value when it
   * returned, even if the release then failed (the failure is a `releaseFailed` event and the
   * lock ends by its TTL at worst), its error when it threw, never the release's. While `fn`
   * runs, the process stays alive (see `keepAlive`).
   */
  async using(key, opts, fn) {
    [opts, fn] = usingArgs(opts, fn);
    return runUnder(granted(await this.acquire(key, opts), key), fn);
  }
  /** Stops heartbeats and closes the session server-side (its locks go with it). */
  async close() {
    await call(this.#raw.close(this.#trace?.closing()));
  }
  /** `await using session = await client.openSession()` closes at scope exit. */
  [asyncDispose]() {
    return this.close();
  }
}

/**
 * A counting semaphore: `permits` shared holds of one key at most, each permit a grant with
 * a token of its own. Made by `session.semaphore(key, permits)` (permits taken on that
 * session) or `client.semaphore(key, permits)` (on the client's own session). The server
 * counts the holders; every holder of the key must use the same number of permits.
 */
class Semaphore {
  #on;
  constructor(on, key, permits) {
    this.#on = on;
    Object.defineProperty(this, "key", { value: key, enumerable: true });
    Object.defineProperty(this, "permits", { value: permits, enumerable: true });
  }
  /** Takes a permit: resolves its handle, or `undefined` when none was free within the budget. */
  acquire(opts) {
    return this.#on.acquire(this.key, this.#hold(opts));
  }
  /** Takes a permit, runs `fn(handle, signal)`, gives it back (see `session.using`). */
  async using(opts, fn) {
    [opts, fn] = usingArgs(opts, fn);
    return this.#on.using(this.key, this.#hold(opts), fn);
  }
  #hold(opts) {
    return holdOptions(opts, "semaphore()", { mode: "shared", limit: this.permits });
  }
}

// Heartbeat timers never keep a Node (or Bun, Deno) process alive, so that an open session
// does not stop a script from exiting. But a `using` callback is work its caller awaits: one
// that only waits on its signal would otherwise let the process end mid-section (Node exits
// with code 13, "unsettled top-level await"). A referenced timer holds the process for the
// callback's duration; it never fires in practice and is cleared when the callback ends.
function keepAlive() {
  const timer = setInterval(() => {}, 2 ** 30);
  return () => clearInterval(timer);
}

// `using`'s handle: not granted is an error there, as the callback cannot run.
function granted(handle, key) {
  if (handle === undefined) {
    throw lockError(ErrorCode.NOT_GRANTED, `lock ${JSON.stringify(key)} not granted within the acquire budget`);
  }
  return handle;
}

// Runs `fn` under `handle` and releases it; settles with `fn`'s outcome, never the
// release's: the work is done (or failed) either way, and a client that retried on a release
// failure would repeat committed work. The Rust side reports the failure as an event.
// The `finally` cannot throw (the release's failure is caught), so it keeps `fn`'s result or
// error.
async function runUnder(handle, fn) {
  const stop = keepAlive();
  try {
    return await fn(handle, handle.signal);
  } finally {
    stop();
    await handle.release().catch(() => {});
  }
}

// `using(key, fn)` or `using(key, opts, fn)`: the options and the callback, checked.
function usingArgs(opts, fn) {
  if (typeof opts === "function") [opts, fn] = [undefined, opts];
  if (typeof fn !== "function") throw invalid("fn", "must be a function");
  return [opts, fn];
}

/** Entry point: `new LockClient({ baseUrl, token, defaults })`. */
class LockClient {
  #raw;
  #listener;
  // The client's own session: `{ promise, session }` once asked for (see `session()`), and
  // the options it is opened with.
  #managed;
  #sessionOptions;
  constructor(opts) {
    const { onEvent, session, ...rest } = options(opts, "options");
    if (onEvent !== undefined && typeof onEvent !== "function") {
      throw invalid("onEvent", "must be a function");
    }
    this.#listener = onEvent;
    this.#sessionOptions = options(session, "session");
    const makeRaw = rawClientFactory ?? ((o) => new RawClient(o));
    this.#raw = adoptSync(() => makeRaw(rest));
  }
  /** Opens a session (L1) and starts its heartbeats. */
  async openSession(opts) {
    const trace = (await loadTracing())?.session();
    const raw = await call(this.#raw.openSession(options(opts, "options"), trace?.opened));
    return new Session(raw, this.#listener, trace);
  }
  /**
   * The client's own session, for a service that does not want to manage sessions: opened
   * on first use (concurrent first callers share one L1), shared by every caller, and
   * replaced by a new one on the first call after it was lost. Its locks' losses reach their
   * handles as always.
   */
  session() {
    const managed = this.#managed;
    if (managed && !managed.session?.isClosed) return managed.promise;
    const next = { session: undefined };
    next.promise = this.openSession(this.#sessionOptions).then(
      (session) => (next.session = session),
      (err) => {
        if (this.#managed === next) this.#managed = undefined;
        throw err;
      },
    );
    this.#managed = next;
    return next.promise;
  }
  /**
   * `session.acquire` on the client's own session. When that session turns out lost, the
   * acquire is made once more on a new one (with a new budget).
   */
  acquire(key, opts) {
    return this.#onOwnSession((session) => session.acquire(key, opts));
  }
  /** `session.using` on the client's own session (see `acquire` for a lost session). */
  async using(key, opts, fn) {
    [opts, fn] = usingArgs(opts, fn);
    const handle = await this.#onOwnSession((session) => session.acquire(key, opts));
    return runUnder(granted(handle, key), fn);
  }
  /** `session.read` on the client's own session (see `acquire` for a lost session). */
  read(key, opts) {
    return this.acquire(key, holdOptions(opts, "read()", { mode: "shared" }));
  }
  /** `session.write` on the client's own session (see `acquire` for a lost session). */
  write(key, opts) {
    return this.acquire(key, holdOptions(opts, "write()", { mode: "exclusive" }));
  }
  /** A counting semaphore of `permits` on `key`, its permits taken on the client's own session. */
  semaphore(key, permits) {
    return new Semaphore(this, key, checkedPermits(permits));
  }
  /** `session.campaign` on the client's own session (see `acquire` for a lost session). */
  campaign(election, opts) {
    return this.#onOwnSession((session) => session.campaign(election, opts));
  }
  /** The leader of `election` now (advisory): `{ value, term, holderId }`, or `null`. */
  leader(election) {
    if (typeof election !== "string") throw invalid("election", "must be a string");
    return call(this.#raw.leader(election));
  }
  /**
   * `key`'s events, as an async iterator: a `snapshot` first (or, with `after`, the events
   * after that id: a `reset` when the server no longer has it), then every change in order.
   * Resumes by itself after network failures and server restarts; ends when `signal`
   * aborts or the loop breaks, and throws only a non-retryable error (403, 401, 400).
   */
  watch(key, opts) {
    const { signal, rest } = splitSignal(opts, "options");
    if (typeof key !== "string") throw invalid("key", "must be a string");
    const { after, ...unknown } = rest;
    for (const name of Object.keys(unknown)) throw invalid(name, "unknown option");
    if (after !== undefined && typeof after !== "string") throw invalid("after", "must be a string");
    return iterate(adoptSync(() => this.#raw.watch(key, after)), signal);
  }
  /**
   * The leader of `election` after every change of holder or value, as an async iterator of
   * `{ value, term, holderId }` or `null`, starting with the leader now; ends as `watch`.
   */
  observe(election, opts) {
    const { signal, rest } = splitSignal(opts, "options");
    if (typeof election !== "string") throw invalid("election", "must be a string");
    for (const name of Object.keys(rest)) throw invalid(name, "unknown option");
    return iterate(adoptSync(() => this.#raw.observe(election)), signal);
  }
  /** Closes the client's own session, if one was opened (graceful shutdown); its locks go with it. */
  async close() {
    const managed = this.#managed;
    this.#managed = undefined;
    const session = await managed?.promise.catch(() => undefined);
    await session?.close();
  }
  async #onOwnSession(act) {
    const session = await this.session();
    try {
      return await act(session);
    } catch (err) {
      if (err?.code !== ErrorCode.SESSION_NOT_FOUND) throw err;
      const fresh = await this.session();
      if (fresh === session) throw err;
      return act(fresh);
    }
  }
}

// OpenTelemetry tracing (tracing.js) when the application has `@opentelemetry/api`: tried
// once, on the first openSession, in Node, Deno and Bun. Browsers and Workers never try, so
// they load nothing more; a failed try costs nothing after the first.
let tracing;
function loadTracing() {
  const serverRuntime = globalThis.process?.versions?.node || globalThis.Deno || globalThis.Bun;
  if (!serverRuntime) return Promise.resolve(undefined);
  tracing ??= import("./tracing.js").then(
    (module) => module.loadTracing(),
    () => undefined,
  );
  return tracing;
}

function adoptSync(fn) {
  try {
    return fn();
  } catch (err) {
    throw adoptError(err);
  }
}

// Bound by `createApi`; the classes above reach the wasm exports through it.
let RawClient;

// `lock-wasm/testing` builds LockClients over the test kit's raw clients (another wasm
// module with the same raw API), so that a kit's client is this very class and its errors
// these very classes. Set only for the duration of one `clientOver` call.
let rawClientFactory;

/** `new LockClient(opts)` whose raw client is `makeRaw(options without onEvent)`. */
function clientOver(makeRaw, opts) {
  rawClientFactory = makeRaw;
  try {
    return new LockClient(opts);
  } finally {
    rawClientFactory = undefined;
  }
}

/** The key of `clientOver` on the API object: not enumerable, so no package export. */
const CLIENT_OVER = Symbol.for("lock-wasm.clientOver");

/**
 * Builds the public API over an initialised wasm-bindgen module. The keys of the returned
 * object are the package's exports, the only list of them (the adapter's classes, then
 * errors.js's): the CommonJS entry exports this object, and scripts/build-npm.sh writes the
 * ESM entries' named exports from its keys.
 */
export function createApi(raw) {
  RawClient = raw.RawClient;
  const api = { LockClient, Session, LockHandle, Semaphore, Leadership, ...errorExports };
  Object.defineProperty(api, CLIENT_OVER, { value: clientOver });
  return api;
}
