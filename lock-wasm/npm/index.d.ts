/// <reference lib="esnext.disposable" />
// Types of the `lock-wasm` npm package. The runtime is the Rust client core compiled to
// WebAssembly (lock-wasm/src) under a thin JS layer (lock-wasm/npm/src/api.js); these
// declarations describe that layer and are checked by `tsc --noEmit` in tests/node.
// The lib reference above brings `Symbol.asyncDispose`/`AsyncDisposable` (TypeScript ≥ 5.2)
// to projects whose `lib` setting lacks them, so the types check without extra settings.

/**
 * Stable error codes: the HTTP contract's, plus `TRANSPORT` (no answer, no connection, or a
 * balancer's 502/503/504), `UNEXPECTED_ANSWER` (an answer that is not the lock service's:
 * `baseUrl` points elsewhere) and `NOT_GRANTED` (`using` did not get the key in its budget).
 */
export type ErrorCodeName =
  | "LOCK_CONTENDED"
  | "CONTENTION_EXCEEDED"
  | "NOT_LEADER"
  | "VALIDATION_FAILED"
  | "SESSION_NOT_FOUND"
  | "LOCK_LOST"
  | "FENCED_OUT"
  | "PAYLOAD_TOO_LARGE"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "INTERNAL"
  | "LIMIT_MISMATCH"
  | "UPGRADE_NOT_ALLOWED"
  | "STORE_UNAVAILABLE"
  | "TRANSPORT"
  | "UNEXPECTED_ANSWER"
  | "NOT_GRANTED";

/** The codes as constants: `err.code === ErrorCode.LOCK_CONTENDED`. */
export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };

/**
 * The bounded acquire loop's knobs. Defaults (ASSUMPTIONS of the SDK): base 50 ms,
 * cap 2000 ms, total budget 10000 ms, 12 attempts, waitMs 0.
 */
export interface AcquirePolicy {
  /**
   * The first retry's backoff cap; the cap doubles per retry up to `maxBackoffMs`: retry n
   * (1, 2, ...) sleeps uniformly in [0, min(maxBackoffMs, baseBackoffMs · 2^(n−1))].
   */
  baseBackoffMs?: number;
  /** Largest backoff cap. Full jitter draws uniformly from [0, cap]. */
  maxBackoffMs?: number;
  /** Whole-acquire budget, measured once at entry. */
  totalBudgetMs?: number;
  /** Secondary cap on L4 requests. */
  maxAttempts?: number;
  /**
   * How long each L4 waits in the key's FIFO queue on the server, 0…30000 (below the
   * budget). 0 (the default): poll with full jitter. More: the server hands the lock to the
   * oldest waiter when it frees (one request per grant, no starvation); a request whose wait
   * runs out is re-sent at once and keeps its place.
   */
  waitMs?: number;
}

/**
 * Why a handle is lost: `deadlinePassed` (no renewal came by its local deadline),
 * `notInHeartbeat` (a heartbeat no longer listed it: expired, revoked or released
 * server-side), `sessionLost`, and — ended by its owner, never a `lost` event —
 * `sessionClosed`, `released`.
 */
export type LostReason = "deadlinePassed" | "notInHeartbeat" | "sessionLost" | "sessionClosed" | "released";

/** Per-client defaults, overridable per call. */
export interface ClientDefaults {
  /** Lock TTL when `acquire` gives none (10000); 400…300000, like `AcquireOptions.ttlMs`. */
  ttlMs?: number;
  /** Acquire policy when `acquire` gives none. */
  policy?: AcquirePolicy;
  /** Timeout of every HTTP request (per hop). */
  requestTimeoutMs?: number;
}

export interface LockClientOptions {
  /** Where lock-server listens, e.g. `http://127.0.0.1:7878`. */
  baseUrl: string;
  /**
   * Bearer token of a client of the server's auth file, sent as `Authorization: Bearer`
   * with every request; 1–1024 bytes of visible ASCII. Omit it for a server without one.
   */
  token?: string;
  defaults?: ClientDefaults;
  /** Receives the events of every session this client opens. */
  onEvent?: (event: LockEvent) => void;
  /** Options of the client's own session (`client.session()`, `client.using()`). */
  session?: OpenSessionOptions;
}

export interface OpenSessionOptions {
  /** Session TTL, 100…300000 (server default 15000); heartbeats renew it every third. */
  ttlMs?: number;
  /** Free-form label shown in logs and the dashboard; at most 128 bytes, no control characters. */
  owner?: string;
}

/**
 * How a key is held: `"exclusive"` (the default: one holder, nobody beside it) or `"shared"`
 * (beside the key's other shared holders, up to its limit). A read-write lock is shared
 * readers and an exclusive writer; a counting semaphore of N permits is shared holds with
 * `limit` N.
 */
export type LockMode = "exclusive" | "shared";

export interface AcquireOptions {
  /**
   * `"exclusive"` (the default) or `"shared"`. Every grant, shared or not, has a fencing
   * token of its own. `session.read`/`session.write`/`semaphore` set it for you.
   */
  mode?: LockMode;
  /**
   * Shared holds only: the most shared holders of the key at once, 1…10000 (absent: no
   * limit). Every shared holder of a key must ask for the same limit; another is refused with
   * a `LimitMismatchError` carrying the limit in force.
   */
  limit?: number;
  /**
   * Lock TTL in milliseconds, 400…300000: heartbeats renew a held lock every third of its
   * TTL, and a shorter one would reach its local deadline before a renewal could be answered
   * (VALIDATION_FAILED names the shortest that works).
   */
  ttlMs?: number;
  /** Overrides the client's default policy, field by field. */
  policy?: AcquirePolicy;
  /** Cancels the wait promptly; the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
}

/** Why an acquire attempt is retried (`contention` events). */
export type ContentionReason = "LOCK_CONTENDED" | "CONTENTION_EXCEEDED" | "NOT_LEADER" | "STORE_UNAVAILABLE" | "TIMEOUT" | "NETWORK";

/** Why the service's store cannot write (`StoreUnavailableError.reason`). */
export type StoreUnavailableReason =
  | "disk_full"
  | "io_error"
  | "read_only"
  | "busy"
  | "space_exceeded"
  | "no_quorum"
  | "unreachable";

/** Something happened to a session's locks (debug detail; never a metric label). */
export type LockEvent =
  | {
      type: "granted";
      key: string;
      /** The session's public holder id (never its session id: events reach logs). */
      holderId: string;
      fencingToken: number;
      /** L4 requests this acquire sent. */
      attempts: number;
      /** Time from the start of the acquire to the grant. */
      waitedMs: number;
      /** Of it, the granting request's wait in the server's queue (0 without `waitMs`). */
      queuedMs: number;
    }
  /**
   * Attempt `attempt` was refused or unanswered; the loop sleeps `delayMs` and retries.
   * `reason`: `LOCK_CONTENDED`, `CONTENTION_EXCEEDED` (held elsewhere; full jitter),
   * `NOT_LEADER` (fixed 100 ms), `STORE_UNAVAILABLE` (the server's `retryAfterMillis`, at
   * least 100 ms, cut to what the budget leaves), `TIMEOUT` or `NETWORK` (no answer; full
   * jitter).
   */
  | { type: "contention"; key: string; attempt: number; delayMs: number; reason: ContentionReason }
  /**
   * The acquire gave up (budget or attempts exhausted). It then resolves `undefined`, or
   * rejects with `TRANSPORT` when its last attempt got no answer at all (a timeout of an
   * attempt whose `requestTimeoutMs` the budget had cut short leaves it to the attempt before).
   */
  | { type: "notGranted"; key: string; attempts: number; waitedMs: number }
  /** The lock was lost (once per handle, at the instant the SDK learned it). */
  | { type: "lost"; key: string; fencingToken: number; reason: "deadlinePassed" | "notInHeartbeat" | "sessionLost" }
  /**
   * A release's L6 failed (`code`: `TRANSPORT`, `NOT_LEADER`, ...). The handle ended anyway,
   * the next caller got the key, and the L6 is re-sent in the background until the lock's
   * TTL would end it. `using` reports it here, not by rejecting.
   */
  | { type: "releaseFailed"; key: string; fencingToken: number; code: ErrorCodeName }
  | { type: "sessionLost"; holderId: string };

/**
 * Every error the SDK throws. To branch on `code` with the types following, test with
 * `isLockError(err)`: it narrows to `AnyLockError`, a union discriminated on `code`, so
 * `err.code === "LOCK_LOST"` makes `err` a `LockLostError` (with its `reason`).
 */
export declare class LockError extends Error {
  /** Stable code; branch on this, not on the message. */
  readonly code: ErrorCodeName;
  /** Can a retry of the acquire succeed? (Never retry the side effect.) */
  readonly retryable: boolean;
  /** VALIDATION_FAILED: the offending option or field, e.g. `"policy.maxAttempts"`. */
  readonly field?: string;
  constructor(
    message: string,
    options?: { code?: ErrorCodeName; retryable?: boolean; field?: string; cause?: unknown },
  );
}
/** Built without a `code`, each subclass carries its own: ContentionError LOCK_CONTENDED. */
export declare class ContentionError extends LockError {
  readonly code: "LOCK_CONTENDED" | "CONTENTION_EXCEEDED";
}
/** NOT_LEADER by default. */
export declare class NotLeaderError extends LockError {
  readonly code: "NOT_LEADER";
}
/**
 * STORE_UNAVAILABLE by default: the service's store cannot write now; nothing was applied.
 * Retryable. The acquire loop retries it within its budget, heartbeats keep the session
 * through it until its deadline.
 */
export declare class StoreUnavailableError extends LockError {
  readonly code: "STORE_UNAVAILABLE";
  /** Why, as the server said (a newer server may name a reason not listed here). */
  readonly reason: StoreUnavailableReason | (string & {}) | null;
  /** The server's hint of when to try again, in milliseconds. */
  readonly retryAfterMillis?: number;
}
/** VALIDATION_FAILED by default. */
export declare class ValidationError extends LockError {
  readonly code: "VALIDATION_FAILED";
}
/**
 * SESSION_NOT_FOUND by default: the session is closed or lost, and its locks with it. Open a
 * new session, or use the client's own (`client.acquire`, `client.using`), which replaces a
 * lost one by itself.
 */
export declare class SessionLostError extends LockError {
  readonly code: "SESSION_NOT_FOUND";
}
/** LOCK_LOST by default. */
export declare class LockLostError extends LockError {
  readonly code: "LOCK_LOST";
  /** On a handle's `signal`: why the lock was lost. */
  readonly reason?: LostReason;
}
/**
 * FENCED_OUT. `new FencedOutError(message)` carries that code: throw it when a fenced
 * resource refuses a write.
 */
export declare class FencedOutError extends LockError {
  readonly code: "FENCED_OUT";
}
/** UNAUTHORIZED (401): the `token` option is missing or unknown to the server. Never retryable. */
export declare class UnauthorizedError extends LockError {
  readonly code: "UNAUTHORIZED";
}
/** FORBIDDEN (403): the token does not cover the request (a key outside its prefixes). Never retryable. */
export declare class ForbiddenError extends LockError {
  readonly code: "FORBIDDEN";
}
/** NOT_GRANTED: `using` did not get the key within its acquire budget; the callback did not run. Retryable. */
export declare class NotGrantedError extends LockError {
  readonly code: "NOT_GRANTED";
}
/**
 * LIMIT_MISMATCH (409): a shared acquire asked for a limit other than the one the key's
 * shared holders agreed on. Never retryable.
 */
export declare class LimitMismatchError extends LockError {
  readonly code: "LIMIT_MISMATCH";
  /** The limit in force for the key's shared holds; `null`: they have none. */
  readonly limit: number | null;
  constructor(
    message: string,
    options?: { code?: ErrorCodeName; retryable?: boolean; limit?: number | null; cause?: unknown },
  );
}
/**
 * UPGRADE_NOT_ALLOWED (409, or refused without a request): an exclusive hold asked for by a
 * holder of the key's shared hold (`handle.nest({ mode: "exclusive" })` on a shared handle,
 * or an exclusive acquire by a session the server sees holding the key shared). Two readers
 * upgrading would wait for each other forever: release, then acquire exclusive. Never
 * retryable.
 */
export declare class UpgradeNotAllowedError extends LockError {
  readonly code: "UPGRADE_NOT_ALLOWED";
}
/** The errors raised as a plain `LockError`, by code. */
export type OtherLockError = LockError & {
  readonly code: "TRANSPORT" | "UNEXPECTED_ANSWER" | "PAYLOAD_TOO_LARGE" | "INTERNAL" | "NOT_FOUND" | "METHOD_NOT_ALLOWED";
};
/** Every error the SDK throws, as a union discriminated on `code`. */
export type AnyLockError =
  | ContentionError
  | NotLeaderError
  | StoreUnavailableError
  | ValidationError
  | SessionLostError
  | LockLostError
  | FencedOutError
  | UnauthorizedError
  | ForbiddenError
  | NotGrantedError
  | LimitMismatchError
  | UpgradeNotAllowedError
  | OtherLockError;
/** Whether `err` is an error of this package; narrows it to `AnyLockError`. */
export declare function isLockError(err: unknown): err is AnyLockError;

/** A held lock. */
export declare class LockHandle implements AsyncDisposable {
  private constructor();
  readonly key: string;
  /** Strictly increasing per key; send it with every side effect. Below 2^53. */
  readonly fencingToken: number;
  /** True once the lock is known or presumed gone. */
  readonly isLost: boolean;
  /** Epoch milliseconds (like `Date.now()`) after which the handle counts as lost. */
  readonly deadline: number;
  /**
   * Aborts the moment the lock is lost (at its deadline if no renewal came, or when a
   * heartbeat or the session says it is gone) or released; the reason is a `LockLostError`.
   * Pass it to the work done under the lock.
   */
  readonly signal: AbortSignal;
  /** Why the lock was lost; `undefined` until then. */
  readonly lostReason: LostReason | undefined;
  /**
   * How the key is held, as granted: a shared acquire by the session holding the key
   * exclusively is answered with its exclusive grant.
   */
  readonly mode: LockMode;
  /** A shared grant's limit (a semaphore's permits); `undefined` otherwise. */
  readonly limit: number | undefined;
  /**
   * A nested hold of this lock for the holder's own inner section: returns this handle and
   * sends nothing. Release it once per `nest()` (`await using inner = handle.nest()`); the
   * lock goes with the outermost release. `mode` defaults to the handle's own: a `"shared"`
   * nest under an exclusive hold is the same handle; an `"exclusive"` nest under a shared
   * hold throws an `UpgradeNotAllowedError` and sends nothing (release, then acquire
   * exclusive). Throws a `LockLostError` once the lock is lost or released. Acquiring the
   * key again instead would wait for this very hold to end.
   */
  nest(options?: { mode?: LockMode }): LockHandle;
  /** Same as `session.release(handle)`. */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The work `using` runs under a lock: `signal` is the handle's, aborted when the lock is lost. */
export type WorkUnderLock<T> = (handle: LockHandle, signal: AbortSignal) => Promise<T> | T;

/** The options of `read`, `write` and a semaphore: those of `acquire`, but the helper sets `mode` and `limit`. */
export type HoldOptions = Omit<AcquireOptions, "mode" | "limit">;

/**
 * A counting semaphore: at most `permits` holders of `key` at once, each permit a shared
 * grant with a fencing token of its own. `session.semaphore(key, permits)` takes permits on
 * that session, `client.semaphore(key, permits)` on the client's own. Every holder of the key
 * must use the same number of permits (else `LimitMismatchError`). Within one session,
 * callers take turns per key: permits held at once need a session each.
 */
export declare class Semaphore {
  private constructor();
  readonly key: string;
  /** 1…10000: the `limit` of every permit. */
  readonly permits: number;
  /** Takes a permit: its handle, or `undefined` when none was free within the budget. */
  acquire(options?: HoldOptions): Promise<LockHandle | undefined>;
  /** Takes a permit, runs `fn`, gives the permit back (see `Session.using`). */
  using<T>(options: HoldOptions | undefined, fn: WorkUnderLock<T>): Promise<T>;
  using<T>(fn: WorkUnderLock<T>): Promise<T>;
}

/** What a candidate asks for. */
export interface CampaignOptions {
  /** What readers see as the leader's value (UTF-8, at most 1 KiB), e.g. its address. */
  value?: string;
  /** The grant's TTL (heartbeats renew it); the client's default lock TTL when absent. */
  ttlMs?: number;
  /** Cancels the campaign (it rejects with `signal.reason`). */
  signal?: AbortSignal;
}

/**
 * A won election: the campaign's grant. `term` is its fencing token: terms of one election
 * strictly increase, so pass it with every side effect the leader makes and a fenced
 * resource refuses a deposed leader.
 */
export declare class Leadership implements AsyncDisposable {
  private constructor();
  /** The election (the key). */
  readonly election: string;
  /** The grant's fencing token. */
  readonly term: number;
  /** The value last proclaimed (or campaigned with). */
  readonly value: string | undefined;
  /** The grant's handle. */
  readonly handle: LockHandle;
  /** Aborts (reason: a `LockLostError`) the moment the term ends: lost, revoked or resigned. */
  readonly signal: AbortSignal;
  /** True once the term may be over; never turns false again. */
  readonly isLost: boolean;
  /** Resolves with the reason the moment the term ends. */
  lost(): Promise<LostReason>;
  /**
   * Replaces the leader's value (L9). Rejects with a `LockLostError`, sending nothing, once
   * the term is over (and when the server says it is).
   */
  proclaim(value: string): Promise<void>;
  /** Ends the term (releases the grant); the next candidate in the queue is elected. */
  resign(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** An election's leader as readers see it. */
export interface Leader {
  /** What it proclaimed; `null` when nothing. */
  value: string | null;
  /** Its term: its fencing token. */
  term: number;
  /** Its session's public name. */
  holderId: string;
}

/** What happened to a watched key (the server's `kind`). */
export type WatchEventKind =
  | "snapshot"
  | "reset"
  | "granted"
  | "handedOff"
  | "released"
  | "expired"
  | "revoked"
  | "proclaimed"
  | "waiters";

/** The key's state in a `snapshot` or `reset`, as the server's holder read shows it. */
export interface LockState {
  key: string;
  mode: LockMode | null;
  holder: WatchHolder | null;
  holders: WatchHolder[];
  limit: number | null;
  waiterCount: number;
}

/** One holder in a `LockState`. */
export interface WatchHolder {
  holderId: string;
  owner: string | null;
  fencingToken: number;
  remainingMillis: number;
  value?: string;
}

/** One event of a watched key. Holder fields are set for grants, ends and `proclaimed`. */
export interface WatchEvent {
  /** Opaque: resume after this event with `watch(key, { after: id })`. */
  id: string;
  kind: WatchEventKind;
  key: string;
  /** Server wall-clock milliseconds of the change. */
  atMillis: number;
  fencingToken?: number;
  holderId?: string;
  owner?: string;
  mode?: LockMode;
  limit?: number;
  value?: string;
  waiterCount: number;
  /** `snapshot` and `reset`: the key at that instant. */
  state?: LockState;
}

/** A session: the lease that keeps its locks alive through heartbeats. */
export declare class Session implements AsyncDisposable {
  private constructor();
  /** The server's session id: the session's credential. Never log or show it. */
  readonly id: string;
  /** The session's public name: what L7 shows as its locks' holder, and what server logs say. */
  readonly holderId: string;
  readonly isClosed: boolean;
  /**
   * Resolves the handle, or `undefined` when the budget ran out while the key was held
   * elsewhere. Every call is an independent caller: when another caller of this session has
   * the key (holds it, or is acquiring or releasing it), this one waits its turn, in arrival
   * order and within its budget, and then gets a grant and a token of its own; in either
   * mode, so shared holds held at once need a session each. To nest inside a hold you have,
   * use `handle.nest()`. Rejects with: `ValidationError` (a bad key or option),
   * `LimitMismatchError` (a shared `limit` other than the key's holders'),
   * `UpgradeNotAllowedError` (an exclusive acquire while the server sees this session holding
   * the key shared), `SessionLostError` (the session is closed or lost), `NOT_LEADER` (the
   * service answered 503 to the last attempt that decided), a `TRANSPORT` `LockError` (the
   * last attempt that decided got no answer: the service was unreachable), an
   * `UNEXPECTED_ANSWER` `LockError` (`baseUrl` is not the lock service's), another contract
   * code from a failing server (`INTERNAL`), or `signal.reason` when `signal` aborts.
   */
  acquire(key: string, options?: AcquireOptions): Promise<LockHandle | undefined>;
  /**
   * A read lock: `acquire` with `mode: "shared"` and no limit, held beside other readers
   * (of other sessions) while no writer holds the key.
   */
  read(key: string, options?: HoldOptions): Promise<LockHandle | undefined>;
  /** A write lock: `acquire` exclusive; no reader and no other writer beside it. */
  write(key: string, options?: HoldOptions): Promise<LockHandle | undefined>;
  /** A counting semaphore of `permits` (1…10000) on `key`, its permits taken on this session. */
  semaphore(key: string, permits: number): Semaphore;
  /**
   * Campaigns in `election` (a key) until elected: an exclusive acquire that waits in the
   * key's queue without a budget, so candidates are elected in the order they asked.
   * Rejects with `ValidationError`, `SessionLostError`, a non-retryable error, or
   * `signal.reason` when `signal` aborts.
   */
  campaign(election: string, options?: CampaignOptions): Promise<Leadership>;
  /**
   * Releases one hold (`handle.nest()` adds one); a lost lock releases quietly. A failed
   * release rejects, but never wedges the key: the handle has ended, the next caller gets
   * the key, and the L6 is re-sent in the background (a `releaseFailed` event).
   */
  release(handle: LockHandle): Promise<void>;
  /**
   * Acquire, run, release. `signal` (the handle's) aborts the moment the lock is lost.
   * Settles with `fn`'s outcome: its value when it returned, even if the release then failed
   * (a `releaseFailed` event), its error when it threw. Rejects with a `NotGrantedError`
   * when the key was not granted within the budget (`fn` did not run).
   */
  using<T>(key: string, options: AcquireOptions | undefined, fn: WorkUnderLock<T>): Promise<T>;
  using<T>(key: string, fn: WorkUnderLock<T>): Promise<T>;
  /** Adds a listener; returns its remover. */
  onEvent(listener: (event: LockEvent) => void): () => void;
  /** Stops heartbeats and closes the session; its locks are released server-side. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Entry point. */
export declare class LockClient {
  constructor(options: LockClientOptions);
  /**
   * Opens a session (L1) and starts its heartbeats. In Node, Deno and Bun, when the
   * application has `@opentelemetry/api` (an optional peer dependency), the session's
   * acquires and grants become `lock.acquire` and `lock.hold` spans and each request carries
   * the W3C `traceparent` of its span; without it nothing changes. Nothing to configure:
   * spans go to the application's registered tracer provider.
   */
  openSession(options?: OpenSessionOptions): Promise<Session>;
  /**
   * The client's own session, for a service that does not want to manage sessions: opened
   * on first use (concurrent first callers share one), shared by every caller, replaced by a
   * new one on the first call after it was lost.
   */
  session(): Promise<Session>;
  /** `acquire` on the client's own session; made once more on a new session if it was lost. */
  acquire(key: string, options?: AcquireOptions): Promise<LockHandle | undefined>;
  /** `using` on the client's own session; its acquire made once more on a new session if it was lost. */
  using<T>(key: string, options: AcquireOptions | undefined, fn: WorkUnderLock<T>): Promise<T>;
  using<T>(key: string, fn: WorkUnderLock<T>): Promise<T>;
  /** `Session.read` on the client's own session. */
  read(key: string, options?: HoldOptions): Promise<LockHandle | undefined>;
  /** `Session.write` on the client's own session. */
  write(key: string, options?: HoldOptions): Promise<LockHandle | undefined>;
  /** A counting semaphore of `permits` (1…10000) on `key`, its permits taken on the client's own session. */
  semaphore(key: string, permits: number): Semaphore;
  /** `Session.campaign` on the client's own session. */
  campaign(election: string, options?: CampaignOptions): Promise<Leadership>;
  /** The leader of `election` now (advisory), or `null`. */
  leader(election: string): Promise<Leader | null>;
  /**
   * `key`'s events: a `snapshot` first (with `after`, the events after that id, or one
   * `reset` when the server no longer has it), then every change in order. Resumes by itself
   * after failures and server restarts; ends when `signal` aborts or the loop breaks; throws
   * only a non-retryable error (403, 401, 400).
   */
  watch(key: string, options?: { signal?: AbortSignal; after?: string }): AsyncGenerator<WatchEvent, void, undefined>;
  /**
   * The leader of `election` after every change of holder or value (`null`: none), starting
   * with the leader now; consecutive equal leaders once. Ends as `watch` does.
   */
  observe(election: string, options?: { signal?: AbortSignal }): AsyncGenerator<Leader | null, void, undefined>;
  /** Closes the client's own session, if one was opened (graceful shutdown). */
  close(): Promise<void>;
}

declare const api: {
  LockClient: typeof LockClient;
  Session: typeof Session;
  LockHandle: typeof LockHandle;
  Semaphore: typeof Semaphore;
  Leadership: typeof Leadership;
  LockError: typeof LockError;
  ContentionError: typeof ContentionError;
  NotLeaderError: typeof NotLeaderError;
  StoreUnavailableError: typeof StoreUnavailableError;
  ValidationError: typeof ValidationError;
  SessionLostError: typeof SessionLostError;
  LockLostError: typeof LockLostError;
  FencedOutError: typeof FencedOutError;
  UnauthorizedError: typeof UnauthorizedError;
  ForbiddenError: typeof ForbiddenError;
  NotGrantedError: typeof NotGrantedError;
  LimitMismatchError: typeof LimitMismatchError;
  UpgradeNotAllowedError: typeof UpgradeNotAllowedError;
  ErrorCode: typeof ErrorCode;
  isLockError: typeof isLockError;
};
export default api;
