// OpenTelemetry tracing of the `lock-wasm` npm package, over the application's own
// `@opentelemetry/api` (an optional peer dependency).
//
// `api.js` imports this module on a session's first need, in Node, Deno and Bun only, and
// this module imports `@opentelemetry/api`; when the application does not have it, both
// end there and the package runs exactly as without tracing (no spans, no extra headers).
// Spans go to whatever tracer provider the application registers. With none registered the
// API's spans are no-ops: an acquire whose span neither records nor carries a trace is then
// not followed at all (no hold span, no wait for its loss), so the API alone costs nothing
// per call. Names and attributes (C4, "Client spans"):
//
// - `lock.acquire`: one per `session.acquire`, a child of the active span at the call.
//   `lock.key`, `lock.acquire.attempts` (L4 requests sent, as the wasm side counts them),
//   `lock.acquire.waited_ms`, `lock.acquire.outcome` (granted | not_granted |
//   cancelled | error), `lock.fencing_token` when it resolves a handle, `error.type` (the
//   error's code) on error; a `lock.contention` event per refused attempt.
// - `lock.hold`: one per grant, a child of its `lock.acquire`, from the grant until the
//   handle's signal aborts. `lock.key`, `lock.fencing_token`, `lock.hold.end_reason`; a loss
//   the owner did not cause is a `lock.lost` event (`lock.lost.reason`) and an error status.
// - The W3C `traceparent` of the span a request belongs to goes with it: L4 the acquire's,
//   L6 the hold's, L3 the active span at `close()`, every other (L1, the heartbeats) the
//   active span when the session was opened. No valid span, no header. `api.js` hands each
//   value to the wasm side with the call it belongs to (open, acquire, release, close), and
//   the wasm transport puts it on that call's requests: no call into JS per request.
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

/** The `traceparent` value of a span context, or `undefined` for none or an invalid one. */
function traceparent(api, spanContext) {
  if (!spanContext || !api.isSpanContextValid(spanContext)) return undefined;
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
  return `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
}

/** One session's spans, and the `traceparent` of each of its calls. */
class SessionTrace {
  #tracing;
  // key → the acquires of that key in flight, oldest first (a session rarely has two).
  #acquires = new Map();
  // key → the open hold span of that key (a session holds a key at most once).
  #holds = new Map();
  constructor(tracing, context) {
    this.#tracing = tracing;
    /** The `traceparent` of L1, the heartbeats and the session's other own requests. */
    this.opened = traceparent(tracing.api, tracing.api.trace.getSpanContext(context));
  }
  /** `close()` was called in the active context: the `traceparent` of its L3. */
  closing() {
    const { api } = this.#tracing;
    return traceparent(api, api.trace.getSpanContext(api.context.active()));
  }
  /** The `traceparent` of the release (L6) of `key`: its hold span's. */
  releasing(key) {
    const span = this.#holds.get(key);
    return span && traceparent(this.#tracing.api, span.spanContext());
  }
  /**
   * Starts the `lock.acquire` span of `key` under the active span. `undefined` when that span
   * neither records nor carries a trace (no tracer provider registered: the application has
   * the API alone, often as some other package's dependency): then there is nothing to
   * record or propagate, and the acquire and its hold run exactly as without tracing.
   */
  acquire(key) {
    const { api, tracer } = this.#tracing;
    const active = api.context.active();
    const span = tracer.startSpan("lock.acquire", { attributes: { "lock.key": key } }, active);
    if (!span.isRecording() && !api.isSpanContextValid(span.spanContext())) return undefined;
    const trace = new AcquireTrace(this.#tracing, active, span, {
      forget: () => this.#forget(key, trace),
      holds: this.#holds,
    });
    const list = this.#acquires.get(key);
    if (list) list.push(trace);
    else this.#acquires.set(key, [trace]);
    return trace;
  }
  #forget(key, trace) {
    const list = this.#acquires.get(key);
    if (list === undefined) return;
    const at = list.indexOf(trace);
    if (at !== -1) list.splice(at, 1);
    if (list.length === 0) this.#acquires.delete(key);
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
  /**
   * `span`: the acquire's span, started in the context `active`. `forget` drops this trace
   * from its session's list; `holds` is the session's map of open hold spans.
   */
  constructor(tracing, active, span, { forget, holds }) {
    const { api } = tracing;
    this.#tracing = tracing;
    this.#forget = forget;
    this.#holds = holds;
    this.span = span;
    this.#context = api.trace.setSpan(active, span);
    const value = traceparent(api, span.spanContext());
    /**
     * What the wasm acquire takes of this trace: `traceparent` for its L4 requests; it sets
     * `attempts` (the L4 requests sent) before the acquire settles. `undefined` without a
     * valid span: no header, and no attempts to record.
     */
    this.request = value && { traceparent: value, attempts: 0 };
  }
  /**
   * The acquire made a new grant: its `lock.hold` span starts, a child of this one, and ends
   * when `lost` (the handle's loss, or its release) resolves with the reason. Through that
   * promise rather than the handle's signal, so tracing makes no AbortController and no
   * LockLostError per hold.
   */
  hold(handle, lost) {
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
  /** Resolved: a handle (a new grant) or `undefined` (not granted). */
  done(handle) {
    const outcome = handle === undefined ? "not_granted" : "granted";
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
      "lock.acquire.attempts": this.request?.attempts ?? 0,
      "lock.acquire.waited_ms": now() - this.#started,
    });
    this.span.end();
    this.#forget();
  }
}
