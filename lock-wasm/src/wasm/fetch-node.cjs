// The Node counterpart of `fetch.js`: the same `send` and the same exchange object, over
// Node's own HTTP client (`node:http`/`node:https`, through their global keep-alive agents)
// instead of the global `fetch`. `scripts/build-npm.sh` puts it in the Node glue's place of
// `fetch.js` (whose CommonJS copy stays beside it).
//
// Why: in Node 20 `fetch` (undici) builds a WHATWG Request, Headers, a body stream, a
// Response and its stream for every request, and clones the request to be able to follow a
// redirect; over loopback that costs more than twice the time of the same request through
// `node:http` (`docs/BENCHMARKS.md`). A lock client is on its caller's critical path twice
// per hold, so the SDK takes the cheaper client where it has one. Certificates are trusted as
// for `fetch` (Node's roots plus `NODE_EXTRA_CA_CERTS`). Unlike `fetch`, a redirect is not
// followed: a lock-server never sends one, so the wasm side sees the 3xx and reports an
// unexpected answer, and the bearer token goes nowhere else. Bun, whose `fetch` is its fast
// path and whose `node:http` is built over it, keeps `fetch.js`.
"use strict";

const http = require("node:http");
const https = require("node:https");
const viaFetch = require("./fetch.cjs");

/** An exchange in flight; `status`, `body`, `error` and `timedOut` are set when it settled. */
class Exchange {
  constructor() {
    this.request = undefined;
    this.timer = undefined;
    this.status = 0;
    // The body text once the exchange succeeded; `undefined` until then or on failure.
    this.body = undefined;
    this.error = undefined;
    // Whether the timeout ended the exchange that failed.
    this.timedOut = false;
    this.settled = false;
  }
  /** The wasm side gave up (its future was dropped): end the request, so no socket stays busy. */
  cancel() {
    clearTimeout(this.timer);
    this.settled = true;
    this.request?.destroy();
  }
}

/** The client module for `url`'s scheme; anything else is refused as `fetch` refuses it. */
function clientFor(url) {
  if (url.protocol === "http:") return http;
  if (url.protocol === "https:") return https;
  throw new TypeError(`unsupported URL scheme ${JSON.stringify(url.protocol)}`);
}

/**
 * Sends `method url` with an optional JSON `body`, an optional `Authorization` value, an
 * optional W3C `traceparent` value and an optional `Lock-Session-Id` value (L2, L3 and L5's
 * session id, which never goes in the URL); calls `wake(id)` once it settled.
 */
function sendViaHttp(method, url, body, authorization, traceparent, sessionId, timeoutMillis, wake, id) {
  const exchange = new Exchange();
  // `wake` runs once, and never while the wasm side is still inside this call.
  const settle = () => {
    if (exchange.settled) return;
    exchange.settled = true;
    clearTimeout(exchange.timer);
    wake(id);
  };
  const fail = (err) => {
    if (exchange.settled) return;
    exchange.error = err;
    settle();
  };
  // JSON answers only: L8 answers its long poll rather than a server-sent stream.
  const headers = { accept: "application/json" };
  if (authorization !== undefined) headers.authorization = authorization;
  if (traceparent !== undefined) headers.traceparent = traceparent;
  if (sessionId !== undefined) headers["lock-session-id"] = sessionId;
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    headers["content-length"] = Buffer.byteLength(body);
  }
  try {
    const target = new URL(url);
    const request = clientFor(target).request(target, { method, headers }, (res) => {
      exchange.status = res.statusCode;
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        exchange.body = text;
        settle();
      });
      res.on("error", fail);
      // A connection that ends inside the answer's body.
      res.on("close", () => {
        if (!res.complete) fail(new Error("connection closed before the answer was complete"));
      });
    });
    exchange.request = request;
    request.on("error", fail);
    exchange.timer = setTimeout(() => {
      exchange.timedOut = true;
      request.destroy(new Error(`no answer within ${timeoutMillis} ms`));
    }, timeoutMillis);
    request.end(body);
  } catch (err) {
    // A URL or header Node refuses: report it from the event loop, as a rejected fetch would.
    queueMicrotask(() => fail(err));
  }
  return exchange;
}

// The runtime is known at load, so the choice is made once, not per request.
module.exports = { send: process.versions.bun === undefined ? sendViaHttp : viaFetch.send };
