// Benchmark (not a test) of the service pattern, run by scripts/bench-npm.sh: an in-process
// `node:http` server whose handler takes the lock of an account, `acct/<k>`, with `using`
// and writes to the fenced demo ledger under its token, driven by N concurrent requests for
// a fixed duration. Side by side in one run: one long-lived session for the whole process
// (every request's `using` on it) vs one session per request (openSession + using + close),
// with K keys and with one key. Runs take turns (round by round) so a change in the
// machine's load hits every configuration alike.
//
//   LOCK_URL=http://127.0.0.1:7878 node bench-service.mjs [SECONDS_PER_RUN] [ROUNDS] [CONCURRENCY] [KEYS]
//                                                          # defaults 5 2 20 20
//
// Reports requests/s and latency percentiles of each configuration, the ratios, and the
// overlaps seen: two sections of one key at once, or one token handed to two sections
// (both must be 0), plus ledger refusals (409 FENCED_OUT; must be 0 too) and requests that
// failed (not granted within the default 10 s budget, or an error).
import http from "node:http";
import { LockClient } from "lock-wasm";

const baseUrl = process.env.LOCK_URL;
if (!baseUrl) throw new Error("LOCK_URL must point at a running lock-server");
const [seconds = 5, rounds = 2, concurrency = 20, manyKeys = 20] = process.argv.slice(2).map(Number);

const client = new LockClient({ baseUrl });
const shared = await client.openSession({ ttlMs: 15_000, owner: "bench-service" });
const lockOptions = { ttlMs: 5000 };

async function ledgerAppend(key, fencingToken, entry) {
  const res = await fetch(`${baseUrl}/v1/demo/ledger/${encodeURIComponent(key)}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fencingToken, entry }),
  });
  await res.arrayBuffer();
  return res.status;
}

// Per run: what the sections saw.
let stats;
function newStats() {
  return { active: new Map(), tokens: new Map(), overlaps: 0, sameToken: 0, refused: 0, failed: 0 };
}

/** The critical section: fenced write under the handle's token, checking for overlaps. */
async function section(key, handle, entry) {
  const token = handle.fencingToken;
  const active = stats.active.get(key) ?? 0;
  if (active > 0) stats.overlaps += 1;
  stats.active.set(key, active + 1);
  const seen = stats.tokens.get(key) ?? new Set();
  if (seen.has(token)) stats.sameToken += 1;
  seen.add(token);
  stats.tokens.set(key, seen);
  try {
    const status = await ledgerAppend(key, token, entry);
    if (status !== 204) stats.refused += 1;
  } finally {
    stats.active.set(key, stats.active.get(key) - 1);
  }
  return token;
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  const key = `acct/${url.searchParams.get("run")}/${url.searchParams.get("k")}`;
  const entry = `req:${url.searchParams.get("n")}`;
  try {
    let token;
    if (url.searchParams.get("mode") === "shared") {
      token = await shared.using(key, lockOptions, (handle) => section(key, handle, entry));
    } else {
      const session = await client.openSession({ ttlMs: 15_000, owner: "bench-service" });
      try {
        token = await session.using(key, lockOptions, (handle) => section(key, handle, entry));
      } finally {
        await session.close();
      }
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(String(token));
  } catch (err) {
    stats.failed += 1;
    res.writeHead(503, { "content-type": "text/plain" }).end(String(err?.code ?? err));
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const serviceUrl = `http://127.0.0.1:${server.address().port}`;
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

function get(path) {
  return new Promise((resolve, reject) => {
    http
      .get(`${serviceUrl}${path}`, { agent }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      })
      .on("error", reject);
  });
}

let runs = 0;
/** N loops of requests for `durationS` seconds; returns the latencies (ms) and the run's stats. */
async function runOnce(mode, keys, durationS = seconds) {
  runs += 1;
  const run = `${process.pid}-${Date.now()}-${runs}`;
  stats = newStats();
  const latencies = [];
  const end = performance.now() + durationS * 1000;
  let n = 0;
  const loop = async () => {
    while (performance.now() < end) {
      n += 1;
      const k = Math.floor(Math.random() * keys);
      const t0 = performance.now();
      await get(`/pay?mode=${mode}&run=${run}&k=${k}&n=${n}`);
      latencies.push(performance.now() - t0);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { latencies, ms: performance.now() - t0, stats };
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const configs = [
  { keys: manyKeys, mode: "shared", name: "one long-lived session" },
  { keys: manyKeys, mode: "per-request", name: "session per request" },
  { keys: 1, mode: "shared", name: "one long-lived session" },
  { keys: 1, mode: "per-request", name: "session per request" },
];
const totals = configs.map(() => ({ latencies: [], ms: 0, overlaps: 0, sameToken: 0, refused: 0, failed: 0 }));
// A short warm-up of each path (JIT, connection pools), not measured.
for (const c of configs) await runOnce(c.mode, c.keys, 1);
for (let round = 0; round < rounds; round += 1) {
  for (const [i, c] of configs.entries()) {
    const r = await runOnce(c.mode, c.keys);
    const t = totals[i];
    t.latencies.push(...r.latencies);
    t.ms += r.ms;
    t.overlaps += r.stats.overlaps;
    t.sameToken += r.stats.sameToken;
    t.refused += r.stats.refused;
    t.failed += r.stats.failed;
    console.error(`round ${round + 1}/${rounds}: K=${c.keys} ${c.name}: ${r.latencies.length} requests in ${r.ms.toFixed(0)} ms`);
  }
}

const rows = totals.map((t, i) => ({
  ...configs[i],
  requests: t.latencies.length,
  rps: (t.latencies.length * 1000) / t.ms,
  p50: pct(t.latencies, 0.5),
  p99: pct(t.latencies, 0.99),
  overlaps: t.overlaps,
  sameToken: t.sameToken,
  refused: t.refused,
  failed: t.failed,
}));
console.log(
  `service pattern: ${concurrency} concurrent requests, ${rounds} rounds of ${seconds} s per configuration, lock ttl ${lockOptions.ttlMs} ms, default acquire policy`,
);
console.log();
console.log("| keys | sessions | requests | req/s | p50 ms | p99 ms | failed | ledger refused | overlaps (same key at once) | same-token overlaps |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.keys} | ${r.name} | ${r.requests} | ${r.rps.toFixed(1)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.failed} | ${r.refused} | ${r.overlaps} | ${r.sameToken} |`,
  );
}
console.log();
console.log("| keys | req/s long-lived ÷ per-request | p99 per-request ÷ long-lived |");
console.log("|---|---|---|");
for (let i = 0; i < rows.length; i += 2) {
  const [long, per] = [rows[i], rows[i + 1]];
  console.log(`| ${long.keys} | ${(long.rps / per.rps).toFixed(2)}x | ${(per.p99 / long.p99).toFixed(2)}x |`);
}
const bad = rows.reduce((a, r) => a + r.overlaps + r.sameToken + r.refused, 0);
agent.destroy();
server.close();
await shared.close();
if (bad > 0) {
  console.error(`bench-service: ${bad} overlaps or ledger refusals: mutual exclusion broken`);
  process.exit(1);
}
