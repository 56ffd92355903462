// The errors of the `lock-wasm` npm package: the stable codes, `LockError` and its
// subclasses, and the adoption of the plain errors the wasm side rejects with.
//
// Why JS classes at all: wasm-bindgen cannot declare `Error` subclasses, and `instanceof`
// on a class per failure is what users of node-redlock and etcd3 expect. Which code an
// error of the Rust side carries, and whether it may be retried, is decided there; this
// file only gives it its class.
//
// This file is ESM; `scripts/build-npm.sh` derives the CommonJS copy (`errors.cjs`) from it
// by rewriting its `export` statement, so there is one source for both module systems.

/**
 * Stable error codes: the contract's (lock_api::ErrorCode::ALL) plus the SDK's own
 * (lock_wasm::error::SDK_CODES). lock-wasm/tests/error_codes.rs checks this list, RETRY_SAFE
 * and the TypeScript union against those, so none of them can drift.
 */
const ErrorCode = Object.freeze({
  LOCK_CONTENDED: "LOCK_CONTENDED",
  CONTENTION_EXCEEDED: "CONTENTION_EXCEEDED",
  NOT_LEADER: "NOT_LEADER",
  VALIDATION_FAILED: "VALIDATION_FAILED",
  SESSION_NOT_FOUND: "SESSION_NOT_FOUND",
  LOCK_LOST: "LOCK_LOST",
  FENCED_OUT: "FENCED_OUT",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  UNAUTHORIZED: "UNAUTHORIZED",
  FORBIDDEN: "FORBIDDEN",
  NOT_FOUND: "NOT_FOUND",
  METHOD_NOT_ALLOWED: "METHOD_NOT_ALLOWED",
  INTERNAL: "INTERNAL",
  LIMIT_MISMATCH: "LIMIT_MISMATCH",
  UPGRADE_NOT_ALLOWED: "UPGRADE_NOT_ALLOWED",
  STORE_UNAVAILABLE: "STORE_UNAVAILABLE",
  TRANSPORT: "TRANSPORT",
  UNEXPECTED_ANSWER: "UNEXPECTED_ANSWER",
  NOT_GRANTED: "NOT_GRANTED",
});

// The codes after which a retry of the acquire can succeed (never of the side effect). Errors
// from the Rust side carry their verdict; this set serves errors built in JS.
const RETRY_SAFE = new Set(["LOCK_CONTENDED", "CONTENTION_EXCEEDED", "NOT_LEADER", "STORE_UNAVAILABLE", "TRANSPORT", "NOT_GRANTED"]);

/** Every error the SDK throws. `code` is stable; `retryable`: may the acquire be retried? */
class LockError extends Error {
  // A subclass built without a code carries its own (`new ContentionError(m)`: LOCK_CONTENDED).
  constructor(message, { code = DEFAULT_CODES.get(new.target) ?? ErrorCode.INTERNAL, retryable, field, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = retryable ?? RETRY_SAFE.has(code);
    if (field !== undefined) this.field = field;
  }
}
/** LOCK_CONTENDED or CONTENTION_EXCEEDED. */
class ContentionError extends LockError {}
/** NOT_LEADER: the replica cannot accept writes now. */
class NotLeaderError extends LockError {}
/**
 * STORE_UNAVAILABLE: the service's store cannot write now (`reason`: `disk_full`,
 * `io_error`, `read_only`, `busy`, `space_exceeded`, `no_quorum`, `unreachable`;
 * `retryAfterMillis`: the server's hint). Nothing was applied; retryable.
 */
class StoreUnavailableError extends LockError {
  constructor(message, options = {}) {
    super(message, options);
    this.reason = options.reason ?? null;
    if (options.retryAfterMillis !== undefined) this.retryAfterMillis = options.retryAfterMillis;
  }
}
/** VALIDATION_FAILED: bad options or input; `field` names the offender. */
class ValidationError extends LockError {}
/** SESSION_NOT_FOUND: the session is gone and so are its locks. */
class SessionLostError extends LockError {}
/**
 * LOCK_LOST: the handle's lock is gone. On a handle's `signal`, `reason` says why:
 * `deadlinePassed`, `notInHeartbeat` (expired, revoked or released server-side),
 * `sessionLost`, `sessionClosed` or `released`.
 */
class LockLostError extends LockError {}
/**
 * FENCED_OUT: a fenced resource saw a higher token. Never retry the side effect. The code
 * guarding a resource throws it too, so `new FencedOutError(message)` carries FENCED_OUT.
 */
class FencedOutError extends LockError {}
/** NOT_GRANTED: `using` could not get the key within the acquire budget; its callback did not run. */
class NotGrantedError extends LockError {}
/**
 * LIMIT_MISMATCH: a shared acquire (a semaphore's permit) asked for a limit other than the
 * one the key's shared holders agreed on. `limit` is the limit in force (`null`: they have
 * none). Never retryable: the callers' configurations disagree.
 */
class LimitMismatchError extends LockError {
  constructor(message, options = {}) {
    super(message, options);
    this.limit = options.limit ?? null;
  }
}
/**
 * UPGRADE_NOT_ALLOWED: an exclusive hold asked for by a holder of the key's shared hold (an
 * exclusive `nest` of a shared handle, refused without a request, or an exclusive acquire by
 * a session the server sees holding the key shared). Two readers upgrading would wait for
 * each other forever: release the shared hold, then acquire exclusive. Never retryable.
 */
class UpgradeNotAllowedError extends LockError {}

const DEFAULT_CODES = new Map([
  [ContentionError, ErrorCode.LOCK_CONTENDED],
  [NotLeaderError, ErrorCode.NOT_LEADER],
  [StoreUnavailableError, ErrorCode.STORE_UNAVAILABLE],
  [ValidationError, ErrorCode.VALIDATION_FAILED],
  [SessionLostError, ErrorCode.SESSION_NOT_FOUND],
  [LockLostError, ErrorCode.LOCK_LOST],
  [FencedOutError, ErrorCode.FENCED_OUT],
  [NotGrantedError, ErrorCode.NOT_GRANTED],
  [LimitMismatchError, ErrorCode.LIMIT_MISMATCH],
  [UpgradeNotAllowedError, ErrorCode.UPGRADE_NOT_ALLOWED],
]);

/** UNAUTHORIZED: the server has an auth file and the `token` option is missing or unknown. */
class UnauthorizedError extends LockError {}
/** FORBIDDEN: the token does not cover the request (a key outside the client's prefixes). */
class ForbiddenError extends LockError {}

const ERROR_CLASSES = {
  LOCK_CONTENDED: ContentionError,
  CONTENTION_EXCEEDED: ContentionError,
  NOT_LEADER: NotLeaderError,
  STORE_UNAVAILABLE: StoreUnavailableError,
  VALIDATION_FAILED: ValidationError,
  SESSION_NOT_FOUND: SessionLostError,
  LOCK_LOST: LockLostError,
  FENCED_OUT: FencedOutError,
  UNAUTHORIZED: UnauthorizedError,
  FORBIDDEN: ForbiddenError,
  NOT_GRANTED: NotGrantedError,
  LIMIT_MISMATCH: LimitMismatchError,
  UPGRADE_NOT_ALLOWED: UpgradeNotAllowedError,
};

/** Whether `err` is an error of this package (for TypeScript, narrows to the union on `code`). */
function isLockError(err) {
  return err instanceof LockError;
}

function lockError(code, message, extra = {}) {
  const Class = ERROR_CLASSES[code] ?? LockError;
  return new Class(message, { code, ...extra });
}

// The Rust side rejects with plain `Error`s carrying `code`/`retryable`/`field`/`limit`; turn them
// into the classes above. Anything else (an AbortSignal's reason, a user callback's error)
// passes through untouched.
function adoptError(err) {
  if (err instanceof LockError) return err;
  if (err && typeof err === "object" && err.name === "LockError" && typeof err.code === "string") {
    const extra = { retryable: err.retryable, field: err.field };
    if ("limit" in err) extra.limit = err.limit;
    if ("reason" in err) extra.reason = err.reason;
    if ("retryAfterMillis" in err) extra.retryAfterMillis = err.retryAfterMillis;
    return lockError(err.code, err.message, extra);
  }
  return err;
}

// The package's exports that are this file's, in their order there: createApi's object
// spreads them in after the adapter's classes, so the keys of that object stay the one
// list of the package's exports.
const errorExports = {
  LockError,
  ContentionError,
  NotLeaderError,
  StoreUnavailableError,
  ValidationError,
  SessionLostError,
  LockLostError,
  FencedOutError,
  UnauthorizedError,
  ForbiddenError,
  NotGrantedError,
  LimitMismatchError,
  UpgradeNotAllowedError,
  ErrorCode,
  isLockError,
};

export { ErrorCode, lockError, adoptError, errorExports };
