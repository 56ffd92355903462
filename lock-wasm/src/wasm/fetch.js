// The JS half of `fetch.rs`: one HTTP exchange with its per-request timeout, in one call
// from wasm. The request, the timeout and reading the body as text happen here, and the
// wasm side is woken once, through the module's shared wake callback (`wake.rs`), when the
// exchange settled; it then reads `status`, `body`, `error` and `timedOut`. That replaces
// a promise, a `then` and two resolve/reject closures per step (`fetch`, then `text()`)
// that a wasm-side `JsFuture` costs.
//
// `fetch` is looked up on the global object at each call, so the same code runs in
// browsers, Deno, Bun and Workers. The Node glue uses `fetch-node.cjs` instead: the same
// `send` over `node:http`, which costs less than half of Node's `fetch` per request.

class Exchange {
  constructor(controller, timer) {
    this.controller = controller;
    this.timer = timer;
    this.status = 0;
    // The body text once the exchange succeeded; `undefined` until then or on failure.
    this.body = undefined;
    this.error = undefined;
    // Whether the timeout aborted the exchange that failed.
    this.timedOut = false;
  }
  /** The wasm side gave up (its future was dropped): abort, so no socket stays busy. */
  cancel() {
    clearTimeout(this.timer);
    this.controller.abort();
  }
}

/**
 * Sends `method url` with an optional JSON `body`, an optional `Authorization` value, an
 * optional W3C `traceparent` value and an optional `Lock-Session-Id` value (L2, L3 and L5's
 * session id, which never goes in the URL); calls `wake(id)` once it settled.
 */
export function send(method, url, body, authorization, traceparent, sessionId, timeoutMillis, wake, id) {
  const controller = new AbortController();
  // JSON answers only: L8 answers its long poll rather than a server-sent stream.
  const headers = { accept: "application/json" };
  if (authorization !== undefined) headers.authorization = authorization;
  if (traceparent !== undefined) headers.traceparent = traceparent;
  if (sessionId !== undefined) headers["lock-session-id"] = sessionId;
  const init = { method, headers, signal: controller.signal };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = body;
  }
  const exchange = new Exchange(controller, setTimeout(() => controller.abort(), timeoutMillis));
  const settle = () => {
    clearTimeout(exchange.timer);
    wake(id);
  };
  const fail = (err) => {
    exchange.error = err;
    exchange.timedOut = controller.signal.aborted;
    settle();
  };
  let response;
  try {
    response = fetch(url, init);
  } catch (err) {
    response = Promise.reject(err);
  }
  response.then((res) => {
    exchange.status = res.status;
    return res.text().then((text) => {
      exchange.body = text;
      settle();
    }, fail);
  }, fail);
  return exchange;
}
