// Benchmark (not a test): watches and elections against one lock-server, each figure a ratio
// to a baseline measured side by side in the same run (scripts/bench-watch.sh runs it):
//
//   fanout    the delay from an L6 release to each of W SSE watchers' `released` event on
//             that key, vs the L6 round trip (an L6 on a key nobody watches, in interleaved
//             blocks; and the same L6's own); p50 and p99. The watchers run in forked
//             processes (bench-watchers.mjs), so that reading W streams does not hold up this
//             process's own round trip; times are epoch milliseconds from
//             performance.timeOrigin + performance.now(), comparable across processes.
//   failover  an election's leader (a child process, tests/node/bench-candidate.mjs) frozen
//             with SIGSTOP at a random phase of its heartbeat → the waiting candidate's
//             campaign granted, vs the session TTL (target ≤ TTL + one heartbeat, TTL/3).
//   memory    the server's RSS per 1,000 idle watchers (open SSE streams, 100 per key) vs per
//             1,000 idle keep-alive connections (one answered GET /healthz each), added in
//             steps without closing anything in between (freed memory would be reused).
//
//   node bench-watch.mjs [fanout] [failover] [memory]     # all three by default
//
// Environment: LOCK_URL; LOCK_PID (the server's pid, for its RSS from /proc); optional
// BENCH_WATCHERS (100), BENCH_WATCHER_PROCS (2), BENCH_CYCLES (200), BENCH_TTLS
// ("1500,3000"), BENCH_FAILOVERS (5), BENCH_IDLE (1000). The last line is a JSON summary.
import http from "node:http";
import net from "node:net";
import { fork, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const { env, argv } = process;
const baseUrl = new URL(env.LOCK_URL);
const WATCHERS = Number(env.BENCH_WATCHERS ?? 100);
const CYCLES = Number(env.BENCH_CYCLES ?? 200);
const TTLS = (env.BENCH_TTLS ?? "1500,3000").split(",").map(Number);
const FAILOVERS = Number(env.BENCH_FAILOVERS ?? 5);
const IDLE = Number(env.BENCH_IDLE ?? 1000);
const WATCHER_PROCS = Number(env.BENCH_WATCHER_PROCS ?? 2);
// Bounds against a broken run hanging; never part of a figure.
const BOUND_MS = 60_000;
const parts = argv.slice(2).length ? argv.slice(2) : ["fanout", "failover", "memory"];
const tag = `${process.pid}-${Date.now()}`;

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const f = (x, d = 3) => x.toFixed(d);
const summary = {};

// One keep-alive connection for the requests whose round trip is the baseline, as a client
// of the service would send them (the SDK uses node:http in Node).
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function post(path, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(data) };
    const req = http.request(new URL(path, baseUrl), { method: "POST", headers, agent }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => {
        if (res.statusCode >= 300) reject(new Error(`${path}: ${res.statusCode} ${text}`));
        else resolve(text ? JSON.parse(text) : undefined);
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}

const lockPath = (key) => `/v1/locks/${encodeURIComponent(key)}`;

/** Forked watcher processes (bench-watchers.mjs): `count` SSE streams of `key` in all. */
async function watcherProcesses(key, count, processes) {
  const children = [];
  for (let i = 0; i < processes; i += 1) {
    const share = Math.floor(count / processes) + (i < count % processes ? 1 : 0);
    const child = fork(fileURLToPath(new URL("./bench-watchers.mjs", import.meta.url)), {
      env: { ...env, KEY: key, COUNT: String(share) },
    });
    const inbox = [];
    let wake = () => {};
    child.on("message", (message) => {
      inbox.push(message);
      wake();
    });
    child.on("exit", (code) => code && console.error(`watcher process exited ${code}`));
    // The next message with `field`; a bound keeps a broken run from hanging.
    const next = async (field) => {
      const until = Date.now() + BOUND_MS;
      for (;;) {
        const i = inbox.findIndex((m) => field in m);
        if (i >= 0) return inbox.splice(i, 1)[0];
        if (Date.now() > until) throw new Error(`watcher process: no ${field} message`);
        await Promise.race([new Promise((resolve) => (wake = resolve)), delay(1000)]);
      }
    };
    children.push({ child, next });
  }
  await Promise.all(children.map((c) => c.next("ready")));
  return children;
}

const epochNow = () => performance.timeOrigin + performance.now();

async function fanout() {
  const session = await post("/v1/sessions", { ttlMillis: 60_000 });
  const watched = `bench-watch/${tag}/watched`;
  const unwatched = `bench-watch/${tag}/unwatched`;
  const children = await watcherProcesses(watched, WATCHERS, WATCHER_PROCS);
  const delays = [];
  const last = [];
  const rttWatched = [];
  const rttUnwatched = [];

  async function cycleWatched(record) {
    const grant = await post(`${lockPath(watched)}/acquire`, { sessionId: session.sessionId, ttlMillis: 10_000 });
    const token = grant.fencingToken;
    // Every watcher has seen the grant: they are idle when the release goes out.
    for (const c of children) {
      const { granted } = await c.next("granted");
      if (granted !== token) throw new Error(`watchers saw the grant of ${granted}, not ${token}`);
    }
    const t0 = epochNow();
    await post(`${lockPath(watched)}/release`, { sessionId: session.sessionId, fencingToken: token });
    const t1 = epochNow();
    const arrivals = [];
    for (const c of children) {
      const message = await c.next("released");
      if (message.released !== token) throw new Error(`watchers saw the release of ${message.released}, not ${token}`);
      arrivals.push(...message.at);
    }
    if (!record) return;
    rttWatched.push(t1 - t0);
    for (const at of arrivals) delays.push(at - t0);
    last.push(Math.max(...arrivals) - t0);
  }
  async function cycleUnwatched(record) {
    const grant = await post(`${lockPath(unwatched)}/acquire`, { sessionId: session.sessionId, ttlMillis: 10_000 });
    const t0 = epochNow();
    await post(`${lockPath(unwatched)}/release`, { sessionId: session.sessionId, fencingToken: grant.fencingToken });
    if (record) rttUnwatched.push(epochNow() - t0);
  }

  for (let i = 0; i < 20; i += 1) {
    await cycleWatched(false);
    await cycleUnwatched(false);
  }
  // Blocks of 20 alternate, so drift of a noisy machine hits both sides alike.
  for (let done = 0; done < CYCLES; done += 20) {
    for (let i = 0; i < 20; i += 1) await cycleWatched(true);
    for (let i = 0; i < 20; i += 1) await cycleUnwatched(true);
  }
  for (const c of children) c.child.disconnect();
  await fetch(new URL(`/v1/sessions/${session.holderId}`, baseUrl), {
    method: "DELETE",
    headers: { "lock-session-id": session.sessionId },
  });

  const rows = [
    [`L6 release → each watcher's \`released\` (${WATCHERS} watchers × ${rttWatched.length} releases)`, delays],
    ["L6 release → the last of the watchers' `released`, per release", last],
    [`L6 round trip, the same releases (key with ${WATCHERS} watchers)`, rttWatched],
    ["L6 round trip, a key nobody watches (baseline)", rttUnwatched],
  ];
  console.log(`\n### fanout: ${WATCHERS} SSE watchers on one key, in ${WATCHER_PROCS} processes\n`);
  console.log("| measure | samples | p50 ms | p99 ms |");
  console.log("|---|---|---|---|");
  for (const [name, xs] of rows) console.log(`| ${name} | ${xs.length} | ${f(pct(xs, 0.5))} | ${f(pct(xs, 0.99))} |`);
  const ratio = (xs, ys, p) => pct(xs, p) / pct(ys, p);
  const r = {
    watcherVsBaseline: { p50: ratio(delays, rttUnwatched, 0.5), p99: ratio(delays, rttUnwatched, 0.99) },
    watcherVsSameL6: { p50: ratio(delays, rttWatched, 0.5), p99: ratio(delays, rttWatched, 0.99) },
    lastVsBaseline: { p50: ratio(last, rttUnwatched, 0.5), p99: ratio(last, rttUnwatched, 0.99) },
    l6WatchedVsBaseline: { p50: ratio(rttWatched, rttUnwatched, 0.5), p99: ratio(rttWatched, rttUnwatched, 0.99) },
  };
  console.log("\n| ratio | p50 | p99 |");
  console.log("|---|---|---|");
  console.log(`| watcher's delay ÷ L6 round trip, unwatched key (target ≤ 1.5× at p99) | ${f(r.watcherVsBaseline.p50, 2)}× | ${f(r.watcherVsBaseline.p99, 2)}× |`);
  console.log(`| watcher's delay ÷ the same L6's round trip | ${f(r.watcherVsSameL6.p50, 2)}× | ${f(r.watcherVsSameL6.p99, 2)}× |`);
  console.log(`| last watcher's delay ÷ L6 round trip, unwatched key | ${f(r.lastVsBaseline.p50, 2)}× | ${f(r.lastVsBaseline.p99, 2)}× |`);
  console.log(`| L6 round trip, watched key ÷ unwatched key | ${f(r.l6WatchedVsBaseline.p50, 2)}× | ${f(r.l6WatchedVsBaseline.p99, 2)}× |`);
  summary.fanout = {
    watchers: WATCHERS,
    releases: rttWatched.length,
    p50: { delay: pct(delays, 0.5), last: pct(last, 0.5), rttWatched: pct(rttWatched, 0.5), rttUnwatched: pct(rttUnwatched, 0.5) },
    p99: { delay: pct(delays, 0.99), last: pct(last, 0.99), rttWatched: pct(rttWatched, 0.99), rttUnwatched: pct(rttUnwatched, 0.99) },
    ratios: r,
  };
}

/** A candidate process (bench-candidate.mjs) and its JSON lines. */
function candidate(election, ttlMs, name) {
  const child = spawn(process.execPath, [fileURLToPath(new URL("./bench-candidate.mjs", import.meta.url))], {
    env: { ...env, ELECTION: election, TTL_MS: String(ttlMs), CANDIDATE: name },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    child,
    async next() {
      const line = await Promise.race([lines.next(), delay(BOUND_MS * 2, "timeout", { ref: false })]);
      if (line === "timeout" || line.done) throw new Error(`candidate ${name}: no message`);
      return JSON.parse(line.value);
    },
  };
}

async function waiters(key) {
  const res = await fetch(new URL(lockPath(key), baseUrl));
  return (await res.json()).waiterCount ?? 0;
}

async function failover() {
  const rows = [];
  summary.failover = [];
  for (const ttl of TTLS) {
    const times = [];
    for (let round = 0; round < FAILOVERS; round += 1) {
      const election = `bench-election/${tag}/${ttl}-${round}`;
      const a = candidate(election, ttl, "a");
      const electedA = await a.next();
      const b = candidate(election, ttl, "b");
      // B's ticket waits in the key's queue.
      const until = Date.now() + BOUND_MS;
      while ((await waiters(election)) < 1) {
        if (Date.now() > until) throw new Error("candidate b never queued");
        await delay(20);
      }
      // Freeze A at a random phase of its heartbeat period (TTL/3).
      await delay(Math.random() * (ttl / 3));
      const stoppedAt = Date.now();
      a.child.kill("SIGSTOP");
      const electedB = await b.next();
      if (!(electedB.term > electedA.term)) throw new Error(`b's term ${electedB.term} not above a's ${electedA.term}`);
      times.push(electedB.at - stoppedAt);
      a.child.kill("SIGKILL");
      b.child.stdin.end();
      await new Promise((resolve) => b.child.on("exit", resolve));
    }
    const target = ttl + ttl / 3;
    rows.push([ttl, times, target]);
    summary.failover.push({ ttlMs: ttl, times, p50: pct(times, 0.5), max: Math.max(...times), targetMs: target });
  }
  console.log(`\n### failover: leader SIGSTOP'd → the other candidate elected (${FAILOVERS} rounds per TTL)\n`);
  console.log("| session TTL ms | failovers ms | median ms | max ms | median ÷ TTL | max ÷ TTL | target ≤ TTL + TTL/3 |");
  console.log("|---|---|---|---|---|---|---|");
  for (const [ttl, times, target] of rows) {
    const max = Math.max(...times);
    console.log(
      `| ${ttl} | ${times.map((t) => t.toFixed(0)).join(", ")} | ${pct(times, 0.5).toFixed(0)} | ${max.toFixed(0)} | ` +
        `${f(pct(times, 0.5) / ttl, 2)}× | ${f(max / ttl, 2)}× | ${max <= target ? "met" : "NOT met"} (${target.toFixed(0)} ms) |`,
    );
  }
}

function rssKiB() {
  const status = readFileSync(`/proc/${env.LOCK_PID}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

/** A raw connection that sent `request` and has read up to `marker` in the answer. */
function rawConnection(request, marker) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(baseUrl.port), baseUrl.hostname);
    let seen = "";
    const onData = (chunk) => {
      seen = (seen + chunk).slice(-4096);
      if (seen.includes(marker)) {
        socket.off("data", onData);
        socket.on("data", () => {}); // keep reading (keep-alive comments)
        resolve(socket);
      }
    };
    socket.setEncoding("utf8");
    socket.on("data", onData);
    socket.on("error", reject);
    socket.write(request);
  });
}

async function openMany(n, open) {
  const sockets = [];
  for (let i = 0; i < n; i += 50) {
    sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => open(i + j)))));
  }
  return sockets;
}

async function settledRss() {
  await delay(2000);
  return rssKiB();
}

async function memory() {
  if (!env.LOCK_PID) throw new Error("memory: LOCK_PID not set");
  const host = `Host: ${baseUrl.host}\r\n`;
  const idle = () => rawConnection(`GET /healthz HTTP/1.1\r\n${host}\r\n`, "\r\n\r\n");
  const watch = (i) =>
    rawConnection(
      `GET ${lockPath(`bench-idle/${tag}/${Math.floor(i / 100)}`)}/events HTTP/1.1\r\n${host}Accept: text/event-stream\r\n\r\n`,
      "snapshot",
    );
  const open = (sockets) => sockets.filter((socket) => !socket.destroyed && socket.readyState === "open").length;
  const rss0 = await settledRss();
  const conns = await openMany(IDLE, idle);
  const rss1 = await settledRss();
  const connsOpen = open(conns);
  const watchers1 = await openMany(IDLE, watch);
  const rss2 = await settledRss();
  const watchers2 = await openMany(IDLE, (i) => watch(i + IDLE));
  const rss3 = await settledRss();
  const alive = [open(conns), open(watchers1), open(watchers2)];
  for (const socket of [...conns, ...watchers1, ...watchers2]) socket.destroy();
  const per = (kib) => (kib / IDLE) * 1000;
  const conn = per(rss1 - rss0);
  const w1 = per(rss2 - rss1);
  const w2 = per(rss3 - rss2);
  console.log(`\n### memory: server RSS per 1,000 idle connections and watchers (${IDLE} each step)\n`);
  console.log("| step | server RSS KiB | Δ KiB per 1,000 |");
  console.log("|---|---|---|");
  console.log(`| before | ${rss0} | |`);
  console.log(`| + ${IDLE} idle keep-alive connections (baseline; ${connsOpen} still open when measured) | ${rss1} | ${conn.toFixed(0)} |`);
  console.log(`| + ${IDLE} SSE watchers (${IDLE / 100} keys × 100) | ${rss2} | ${w1.toFixed(0)} |`);
  console.log(`| + ${IDLE} more SSE watchers | ${rss3} | ${w2.toFixed(0)} |`);
  console.log(`\nopen at the end (connections, watchers, more watchers): ${alive.join(", ")}; watcher ÷ idle connection: ${f(w1 / conn, 2)}×, ${f(w2 / conn, 2)}×`);
  summary.memory = { rssKiB: [rss0, rss1, rss2, rss3], perThousandKiB: { connection: conn, watchers: [w1, w2] }, connsOpen, alive };
}

const runs = { fanout, failover, memory };
for (const part of parts) {
  console.log(`\n== ${part} (load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")})`);
  await runs[part]();
}
agent.destroy();
console.log(JSON.stringify(summary));
