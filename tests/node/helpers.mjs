// Shared helpers of the node:test suites. They talk to the real lock-server whose URL the
// runner (scripts/test-wasm.sh) passes in LOCK_URL.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import net from "node:net";

export const baseUrl = process.env.LOCK_URL;
assert.ok(baseUrl, "LOCK_URL must point at a running lock-server (scripts/test-wasm.sh sets it)");

let counter = 0;
/** A key no other test uses, so suites can share one server. */
export function uniqueKey(prefix) {
  counter += 1;
  return `${prefix}/${process.pid}/${Date.now()}/${counter}`;
}

async function json(method, path, body, headers = {}) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** L7 advisory read. */
export async function lockState(key) {
  return (await json("GET", `/v1/locks/${encodeURIComponent(key)}`)).body;
}

/** Appends to the demo ledger (the fenced resource); returns the HTTP status. */
export async function ledgerAppend(key, fencingToken, entry) {
  return (await json("POST", `/v1/demo/ledger/${encodeURIComponent(key)}`, { fencingToken, entry })).status;
}

/** Reads the demo ledger's entries in acceptance order. */
export async function ledgerEntries(key) {
  const { status, body } = await json("GET", `/v1/demo/ledger/${encodeURIComponent(key)}`);
  return status === 200 ? body.entries : [];
}

/**
 * L3 through raw fetch: makes the server forget a session behind the SDK's back. The path
 * names the session by its holder id; its id goes in the `Lock-Session-Id` header.
 */
export async function deleteSession(session) {
  const headers = { "lock-session-id": session.id };
  return (await json("DELETE", `/v1/sessions/${session.holderId}`, undefined, headers)).status;
}

/**
 * The server's JSON log lines with `event` for `key`, from the log file the runner passes in
 * LOCK_LOG (scripts/test-wasm.sh).
 */
export async function serverLines(event, key) {
  assert.ok(process.env.LOCK_LOG, "LOCK_LOG must name the server's log file");
  const text = await readFile(process.env.LOCK_LOG, "utf8");
  return text
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
    .filter((line) => line.event === event && line.key === key);
}

/** The server's `lock_granted` line of `key` for `fencingToken`, once written (10 s bound). */
export async function grantLine(key, fencingToken) {
  const find = async () => (await serverLines("lock_granted", key)).find((l) => l.fencingToken === fencingToken);
  await waitFor(async () => (await find()) !== undefined, 10_000, "the grant's log line");
  return find();
}

/** Polls `predicate` every 20 ms until it holds or `boundMs` passes (a generous bound). */
export async function waitFor(predicate, boundMs, what) {
  const until = Date.now() + boundMs;
  while (Date.now() < until) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/**
 * Checks a ledger written by holders that each appended `begin:<id>` then `end:<id>` under
 * one grant: pairs never interleave and tokens strictly increase from pair to pair. Returns
 * the number of critical sections found.
 */
export function assertNoOverlap(entries) {
  assert.equal(entries.length % 2, 0, "every begin has its end");
  let last = -1;
  for (let i = 0; i < entries.length; i += 2) {
    const [begin, end] = [entries[i], entries[i + 1]];
    assert.match(begin.entry, /^begin:/, `entry ${i} opens a critical section`);
    assert.equal(end.entry, begin.entry.replace(/^begin:/, "end:"), `entry ${i + 1} closes the same section`);
    assert.equal(end.fencingToken, begin.fencingToken, "one grant per section");
    assert.ok(begin.fencingToken > last, `tokens strictly increase (${begin.fencingToken} after ${last})`);
    last = begin.fencingToken;
  }
  return entries.length / 2;
}

/**
 * One contender: `rounds` times acquire `key`, write begin/end to the ledger under the
 * token, release. An acquire that runs out of budget just tries again.
 */
export async function contend(session, key, id, rounds) {
  for (let round = 0; round < rounds; round += 1) {
    let handle;
    while (handle === undefined) {
      handle = await session.acquire(key, { ttlMs: 5000, policy: { baseBackoffMs: 10, maxBackoffMs: 200 } });
    }
    const tag = `${id}:${round}`;
    assertAccepted(await ledgerAppend(key, handle.fencingToken, `begin:${tag}`));
    await new Promise((r) => setTimeout(r, 5));
    assertAccepted(await ledgerAppend(key, handle.fencingToken, `end:${tag}`));
    await session.release(handle);
  }
}

/** The ledger accepted an append (any 2xx). */
export function assertAccepted(status) {
  assert.ok(status >= 200 && status < 300, `ledger append accepted, got HTTP ${status}`);
}

/** Resolves after `ms` milliseconds (a referenced timer: it keeps Node's loop alive). */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A TCP proxy in front of the lock-server whose path can be cut, as a dead network would:
 * `block()` drops every open connection and leaves new ones accepted but never answered;
 * `unblock()` lets new connections through again (`startGateProxy`'s block and allow).
 */
export async function startProxy() {
  const gate = await startGateProxy();
  return { url: gate.url, block: gate.block, unblock: gate.allow, close: gate.close };
}

/**
 * A lock-server of the test's own, for tests that kill it: the binary the runner built
 * (LOCK_SERVER_BIN, exported by scripts/test-wasm.sh) on 127.0.0.1 with `dataDir` (a new temp
 * directory when omitted). Resolves once it printed its `listening` line. `kill9()` kills it
 * with SIGKILL (no graceful shutdown: SQLite keeps what it had committed) and `restart()`
 * starts it again on the same port and data dir; `stop()` kills it for good (call it in
 * `t.after`).
 */
export async function startServer({ dataDir } = {}) {
  const { spawn } = await import("node:child_process");
  const { mkdtemp } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const bin = process.env.LOCK_SERVER_BIN;
  assert.ok(bin, "LOCK_SERVER_BIN must name the lock-server binary (scripts/test-wasm.sh sets it)");
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), "lock-server-test-")));
  let child;
  let output = "";
  const launch = (listen) =>
    new Promise((resolve, reject) => {
      output = "";
      const proc = spawn(bin, ["--listen", listen, "--data-dir", dir], { stdio: ["ignore", "pipe", "pipe"] });
      child = proc;
      let buffered = "";
      const onData = (chunk) => {
        buffered += chunk;
        output += chunk;
        for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (!line.startsWith("{")) continue;
          let parsed;
          try {
            parsed = JSON.parse(line);
          } catch {
            continue;
          }
          if (parsed.event === "listening") resolve(parsed.addr);
        }
      };
      proc.stdout.setEncoding("utf8").on("data", onData);
      proc.stderr.setEncoding("utf8").on("data", (chunk) => (output += chunk));
      proc.on("error", reject);
      proc.on("exit", (code, signal) =>
        reject(new Error(`lock-server exited (${code ?? signal}) before listening:\n${output}`)),
      );
    });
  const addr = await launch("127.0.0.1:0");
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const kill = async () => {
    if (exited()) return;
    const gone = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await gone;
  };
  return {
    url: `http://${addr}`,
    dataDir: dir,
    /** The server's output so far (its JSON log), for failure messages. */
    get output() {
      return output;
    },
    /** SIGKILL, resolved once the process is gone. */
    kill9: kill,
    /**
     * Starts it again on the same address and data dir. The port was just freed; binding it
     * again is retried for a few seconds in case the kernel still holds it.
     */
    async restart() {
      await kill();
      for (let attempt = 0; ; attempt += 1) {
        try {
          await launch(addr);
          return;
        } catch (err) {
          if (attempt >= 50 || !/cannot listen|in use/i.test(err.message)) throw err;
          await sleep(100);
        }
      }
    },
    stop: kill,
  };
}

/**
 * A TCP proxy in front of `targetUrl` (the main server by default) with three modes: `allow()`
 * (pass through), `block()` (connections accepted but never answered, like `startProxy`'s) and
 * `refuse()`: every open connection and every new one is reset at once (TCP RST), as a
 * server restarting or a balancer without a backend would. `refused` counts the connections
 * reset since it started.
 */
export async function startGateProxy(targetUrl = baseUrl) {
  const target = new URL(targetUrl);
  const sockets = new Set();
  const stalled = new Set();
  let mode = "allow";
  let refused = 0;
  const reset = (socket) => (socket.resetAndDestroy ? socket.resetAndDestroy() : socket.destroy());
  const track = (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (mode === "refuse") {
      refused += 1;
      reset(client);
      return;
    }
    if (mode === "block") {
      stalled.add(client);
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    track(upstream);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = (next) => {
    mode = next;
    for (const socket of sockets) reset(socket);
  };
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    get refused() {
      return refused;
    },
    refuse: () => cut("refuse"),
    block: () => cut("block"),
    allow() {
      mode = "allow";
      // Reset the dead ends, so that a request still waiting on one (a heartbeat sent during
      // the block) fails now instead of holding up the calls queued behind it until its
      // timeout; a loaded machine can stretch that wait past the next call's own timeout.
      for (const socket of stalled) socket.destroy();
      stalled.clear();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
