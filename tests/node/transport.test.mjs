// The package's Node transport (node:http, `lock-wasm/src/wasm/fetch-node.cjs`) against
// servers that misbehave as a network can: no answer, a connection cut inside the answer, a
// refused connection, a redirect. Each is a real socket on 127.0.0.1; every failure must reach
// the caller with its code, and a request the caller gave up on must not keep its socket.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { LockClient, ErrorCode } from "lock-wasm";
import { waitFor } from "./helpers.mjs";

/** Starts `server` on a free loopback port; resolves its base URL. */
async function listen(server) {
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${server.address().port}`;
}

/** A server that accepts connections and never answers; counts the sockets still open. */
async function silentServer() {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    // Reads (and drops) what comes, so the client's end of the connection is seen.
    socket.resume();
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  const baseUrl = await listen(server);
  const close = () => {
    for (const socket of sockets) socket.destroy();
    return new Promise((r) => server.close(r));
  };
  return { baseUrl, sockets, close };
}

async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail("expected a rejection");
}

test("no answer within requestTimeoutMs rejects TRANSPORT and closes the socket", async () => {
  const server = await silentServer();
  try {
    const client = new LockClient({ baseUrl: server.baseUrl, defaults: { requestTimeoutMs: 200 } });
    const err = await rejection(client.openSession());
    assert.equal(err.code, ErrorCode.TRANSPORT);
    assert.match(err.message, /no answer within 200 ms/);
    // The timed-out request's socket is destroyed, not left waiting for a late answer.
    await waitFor(() => server.sockets.size === 0, 2000, "the request's socket to close");
  } finally {
    await server.close();
  }
});

test("an acquire cancelled by its AbortSignal ends its request's socket", async () => {
  // Sessions open (201), every other request hangs: the acquire is in flight when aborted.
  const hanging = new Set();
  const server = http.createServer((req, res) => {
    if (req.url === "/v1/sessions") {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ sessionId: "a".repeat(32), holderId: "b".repeat(32), ttlMillis: 15000, heartbeatMillis: 5000 }));
      return;
    }
    hanging.add(req.socket);
    req.socket.on("close", () => hanging.delete(req.socket));
  });
  const baseUrl = await listen(server);
  try {
    const session = await new LockClient({ baseUrl }).openSession();
    const controller = new AbortController();
    const acquire = session.acquire("k", { signal: controller.signal });
    await waitFor(() => hanging.size === 1, 2000, "the acquire's request to reach the server");
    controller.abort();
    await rejection(acquire);
    await waitFor(() => hanging.size === 0, 2000, "the cancelled request's socket to close");
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test("a connection cut inside the answer rejects TRANSPORT", async () => {
  const server = http.createServer((req, res) => {
    res.writeHead(201, { "content-type": "application/json", "content-length": "200" });
    res.write('{"sessionId":"');
    setTimeout(() => req.socket.destroy(), 10);
  });
  const baseUrl = await listen(server);
  try {
    const err = await rejection(new LockClient({ baseUrl }).openSession());
    assert.equal(err.code, ErrorCode.TRANSPORT);
    assert.match(err.message, /network error/);
  } finally {
    await new Promise((r) => server.close(r));
  }
});

test("a refused connection rejects TRANSPORT", async () => {
  const server = await silentServer();
  await server.close();
  const refused = await rejection(new LockClient({ baseUrl: server.baseUrl }).openSession());
  assert.equal(refused.code, ErrorCode.TRANSPORT);
  assert.match(refused.message, /ECONNREFUSED/);
});

test("a redirect is not followed: it is an UNEXPECTED_ANSWER naming the status", async () => {
  // A lock-server never redirects; one that answers so is not the lock service's root (an
  // http → https redirect, a proxy's login page), and the bearer token must not follow it.
  let followed = false;
  const target = http.createServer((req, res) => {
    followed = true;
    res.end();
  });
  const targetUrl = await listen(target);
  const server = http.createServer((req, res) => {
    res.writeHead(308, { location: `${targetUrl}${req.url}` });
    res.end();
  });
  const baseUrl = await listen(server);
  try {
    const err = await rejection(new LockClient({ baseUrl }).openSession());
    assert.equal(err.code, ErrorCode.UNEXPECTED_ANSWER);
    assert.match(err.message, /HTTP 308/);
    assert.equal(followed, false, "the redirect was followed");
  } finally {
    await new Promise((r) => server.close(r));
    await new Promise((r) => target.close(r));
  }
});
