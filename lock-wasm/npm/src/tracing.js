// OpenTelemetry tracing of the `lock-wasm` npm package, over the application's own
// `@opentelemetry/api` (an optional peer dependency).
//
// `api.js` imports this module on a session's first need, in Node, Deno and Bun only, and
// this module imports `@opentelemetry/api`; when the application does not have it, both
// end there and the package runs exactly as without tracing (no spans, no extra headers).
// Spans go to whatever tracer provider the application registers; with none registered
// the API's spans are no-ops. Names and attributes (C4, "Client spans"):
//
// - `lock.acquire`: one per `session.acquire`, a child of the active span at the call.
//   `lock.key`, `lock.acquire.attempts` (L4 requests sent), `lock.acquire.waited_ms`,
//   `lock.acquire.outcome` (granted | nested | not_granted | cancelled | error),
//   `lock.fencing_token` when it resolves a handle, `error.type` (the error's code) on
//   error; a `lock.contention` event per refused attempt.
// - `lock.hold`: one per grant, a child of its `lock.acquire`, from the grant until the
//   handle's signal aborts. `lock.key`, `lock.fencing_token`, `lock.hold.end_reason`; a loss
//   the owner did not cause is a `lock.lost` event (`lock.lost.reason`) and an error status.
// - The W3C `traceparent` of the span a request belongs to goes with it: L4 the acquire's,
//   L6 the hold's, L3 the active span at `close()`, every other (L1, the heartbeats) the
//   active span when the session was opened. No valid span, no header.
//
// Nothing here names a session id: spans leave the process, and a session id is its
// owner's credential.

const OTEL_API = "@opentelemetry/api";
const TRACER_NAME = "lock-wasm";
// Ends a hold without an error: the owner's own release or close.
const BY_OWNER = new Set(["released", "sessionClosed"]);

/** Resolves a `Tracing` over `@opentelemetry/api`, or `undefined` when it cannot be loaded. */
export async function loadTracing() {
  let api;
  try {
    // A computed specifier with ignore hints: bundlers must not try to resolve a package
    // the application may not have.
    api = await import(/* webpackIgnore: true */ /* @vite-ignore */ OTEL_API);
  } catch {
    return undefined;
  }
  api = api.trace ? api : api.default;
  return api?.trace && api.context ? new Tracing(api) : undefined;
}

class Tracing {
  constructor(api) {
    this.api = api;
    // A proxy tracer: spans go to whichever provider is registered when they start.
    this.tracer = api.trace.getTracer(TRACER_NAME);
  }
  /** The tracing of a session being opened in the active context. */
  session() {
    return new SessionTrace(this, this.api.context.active());
  }
}

/** Milliseconds on the monotonic clock. */
const now = () => performance.now();

/** `{ traceparent }` for a span context, or `undefined` for none or an invalid one. */
function traceparent(api, spanContext) {
  if (!spanContext || !api.isSpanContextValid(spanContext)) return undefined;
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
  return { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}` };
}

/**
 * What the transport's header callback needs of a request path: the lock key and whether it
 * is the key's L4 (`acquire`) or L6 (`release`), or `undefined` for any other path. Read
 * with string operations and remembered per path (a session asks for the same few paths
 * over and over), so a request costs no regex and no `decodeURIComponent`.
 */
const LOCKS = "/v1/locks/";
const lockPaths = new Map();
function lockPath(path) {
  let found = lockPaths.get(path);
  if (found === undefined) {
    found = parseLockPath(path) ?? null;
    // Bounded: a process locking ever new keys must not grow this without end.
    if (lockPaths.size >= 1024) lockPaths.clear();
    lockPaths.set(path, found);
  }
  return found ?? undefined;
}
function parseLockPath(path) {
  if (!path.startsWith(LOCKS)) return undefined;
  const slash = path.indexOf("/", LOCKS.length);
  if (slash <= LOCKS.length || path.indexOf("/", slash + 1) !== -1) return undefined;
  const action = path.slice(slash + 1);
  if (action !== "acquire" && action !== "release") return undefined;
  return { key: decodeURIComponent(path.slice(LOCKS.length, slash)), acquire: action === "acquire" };
}

/** One session's spans, and the request-header callback of its transport. */
class SessionTrace {
  #tracing;
  #opened;
  #closing;
  // key → the acquires of that key in flight, oldest first (a session rarely has two).
  #acquires = new Map();
  // key → the open hold span of that key (a session holds a key at most once).
  #holds = new Map();
  constructor(tracing, context) {
    this.#tracing = tracing;
    this.#opened = tracing.api.trace.getSpanContext(context);
    // Handed to the wasm transport: asked before every request of the session.
    this.headers = (method, path) => traceparent(tracing.api, this.#spanContextOf(method, path));
  }
  #spanContextOf(method, path) {
    const lock = lockPath(path);
    if (lock) {
      const span = lock.acquire ? this.#acquires.get(lock.key)?.[0]?.sent() : this.#holds.get(lock.key);
      if (span) return span.spanContext();
    }
    if (method === "DELETE" && this.#closing) return this.#closing;
    return this.#opened;
  }
  /** `close()` was called in the active context. */
  closing() {
    this.#closing = this.#tracing.api.trace.getSpanContext(this.#tracing.api.context.active());
  }
  /** Starts the `lock.acquire` span of `key` under the active span. */
  acquire(key) {
    const trace = new AcquireTrace(this.#tracing, key, () => this.#forget(key, trace), this.#holds);
    const list = this.#acquires.get(key);
    if (list) list.push(trace);
    else this.#acquires.set(key, [trace]);
    return trace;
  }
  #forget(key, trace) {
    const list = this.#acquires.get(key) ?? [];
    const rest = list.filter((t) => t !== trace);
    if (rest.length > 0) this.#acquires.set(key, rest);
    else this.#acquires.delete(key);
  }
  /** A session event from the SDK core (synchronous, before any listener sees it). */
  event(event) {
    if (event.type !== "contention") return;
    this.#acquires.get(event.key)?.[0]?.span.addEvent("lock.contention", {
      "lock.acquire.attempt": event.attempt,
      "lock.contention.reason": event.reason,
      "lock.contention.delay_ms": event.delayMs,
    });
  }
}

/** One `lock.acquire` span until the acquire settles. */
class AcquireTrace {
  #tracing;
  #forget;
  #holds;
  #context;
  #started = now();
  #attempts = 0;
  #held = false;
  constructor(tracing, key, forget, holds) {
    const { api, tracer } = tracing;
    this.#tracing = tracing;
    this.#forget = forget;
    this.#holds = holds;
    this.key = key;
    const active = api.context.active();
    this.span = tracer.startSpan("lock.acquire", { attributes: { "lock.key": key } }, active);
    this.#context = api.trace.setSpan(active, this.span);
  }
  /** Counts an L4 request of this acquire; returns the span it carries. */
  sent() {
    this.#attempts += 1;
    return this.span;
  }
  /**
   * The acquire made a new grant: its `lock.hold` span starts, a child of this one, and ends
   * when `lost` (the handle's loss, or its release) resolves with the reason. Through that
   * promise rather than the handle's signal, so tracing makes no AbortController and no
   * LockLostError per hold.
   */
  hold(handle, lost) {
    this.#held = true;
    const { api, tracer } = this.#tracing;
    const span = tracer.startSpan(
      "lock.hold",
      { attributes: { "lock.key": handle.key, "lock.fencing_token": handle.fencingToken } },
      this.#context,
    );
    this.#holds.set(handle.key, span);
    lost.then((reason) => {
      span.setAttribute("lock.hold.end_reason", reason);
      if (!BY_OWNER.has(reason)) {
        span.addEvent("lock.lost", { "lock.lost.reason": reason });
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: `lock lost: ${reason}` });
      }
      span.end();
      if (this.#holds.get(handle.key) === span) this.#holds.delete(handle.key);
    });
  }
  /** Resolved: a handle (new grant or nested hold) or `undefined` (not granted). */
  done(handle) {
    const outcome = handle === undefined ? "not_granted" : this.#held ? "granted" : "nested";
    if (handle !== undefined) this.span.setAttribute("lock.fencing_token", handle.fencingToken);
    this.#end(outcome);
  }
  /** Rejected: by the caller's AbortSignal (`cancelled`) or with an error. */
  failed(err, cancelled) {
    if (!cancelled) {
      this.span.setAttribute("error.type", err?.code ?? err?.name ?? "Error");
      if (err instanceof Error) this.span.recordException(err);
      this.span.setStatus({ code: this.#tracing.api.SpanStatusCode.ERROR, message: err?.message });
    }
    this.#end(cancelled ? "cancelled" : "error");
  }
  #end(outcome) {
    this.span.setAttributes({
      "lock.acquire.outcome": outcome,
      "lock.acquire.attempts": this.#attempts,
      "lock.acquire.waited_ms": now() - this.#started,
    });
    this.span.end();
    this.#forget();
  }
}
