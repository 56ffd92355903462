// Benchmark (not a test): SDK acquire+release latency vs the same two requests made with raw
// `fetch`, against the same server in the same run. The fair baseline is fetch with a
// per-request timeout (`AbortSignal.timeout`, as any robust client has; the SDK bounds every
// request the same way); bare fetch, with no timeout at all, is a third side. Under Node, where
// the SDK sends through `node:http` rather than `fetch`, a fourth side makes the same requests
// through `node:http` with a timeout: the SDK's own cost over the client it uses. Blocks
// alternate so drift of a noisy machine hits every side alike. Runs under Node, Bun and Deno
// (`scripts/bench-npm.sh` runs it under each against one server):
//
//   node bench.mjs [CYCLES_PER_BLOCK] [BLOCKS]
//
// The last line is a JSON summary (runtime, p50s, ratios) for the script's cross-runtime table.
import { LockClient } from "lock-wasm";
import { mean, p50, printTable } from "./bench-stats.mjs";

const { argv, env } = globalThis.process;
const baseUrl = env.LOCK_URL;
const perBlock = Number(argv[2] ?? 200);
const blocks = Number(argv[3] ?? 5);
// The SDK's default per-request timeout (`requestTimeoutMs`, 2 s).
const REQUEST_TIMEOUT_MS = 2000;

function runtime() {
  if (globalThis.Deno) return `deno ${globalThis.Deno.version.deno}`;
  if (globalThis.Bun) return `bun ${globalThis.Bun.version}`;
  return `node ${globalThis.process.versions.node}`;
}

async function post(path, body, timed) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: timed ? AbortSignal.timeout(REQUEST_TIMEOUT_MS) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const session = await new LockClient({ baseUrl }).openSession({ ttlMs: 60_000 });
const raw = await post("/v1/sessions", { ttlMillis: 60_000 }, true);

async function sdkCycle(key) {
  const handle = await session.acquire(key, { ttlMs: 5000 });
  await session.release(handle);
}

// The same POST through `node:http` (its global keep-alive agent), with the same timeout.
function httpPost(http, path, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(data) };
    const req = http.request(new URL(`${baseUrl}${path}`), { method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => {
        clearTimeout(timer);
        if (res.statusCode >= 300) reject(new Error(`${path}: ${res.statusCode} ${text}`));
        else resolve(text ? JSON.parse(text) : undefined);
      });
      res.on("error", reject);
    });
    const timer = setTimeout(() => req.destroy(new Error("timeout")), REQUEST_TIMEOUT_MS);
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(data);
  });
}

function rawCycle(send) {
  return async (key) => {
    const path = `/v1/locks/${encodeURIComponent(key)}`;
    const grant = await send(`${path}/acquire`, { sessionId: raw.sessionId, ttlMillis: 5000 });
    await send(`${path}/release`, { fencingToken: grant.fencingToken, sessionId: raw.sessionId });
  };
}

// The process's CPU time in µs (user + system), where the runtime has `process.cpuUsage()`
// (Node, Bun, Deno): the client's own cost per cycle, which the machine's load disturbs less
// than latency (the server is another process).
const cpuUsage = globalThis.process?.cpuUsage?.bind(globalThis.process);
const cpuMicros = () => {
  const { user, system } = cpuUsage?.() ?? { user: NaN, system: 0 };
  return user + system;
};

async function block(side, key) {
  const cpu = cpuMicros();
  for (let i = 0; i < perBlock; i += 1) {
    const t = performance.now();
    await side.cycle(key);
    side.samples?.push(performance.now() - t);
  }
  side.cpu += cpuMicros() - cpu;
}

const onNode = !globalThis.Deno && !globalThis.Bun;
const http = onNode ? await import("node:http") : undefined;
const sides = [
  { name: "lock-wasm SDK (acquire+release)", cycle: sdkCycle, key: "sdk", samples: [], cpu: 0 },
  {
    name: "fetch + AbortSignal.timeout (L4 + L6 POSTs)",
    cycle: rawCycle((path, body) => post(path, body, true)),
    key: "timed",
    samples: [],
    cpu: 0,
  },
  {
    name: "bare fetch, no timeout (L4 + L6 POSTs)",
    cycle: rawCycle((path, body) => post(path, body, false)),
    key: "bare",
    samples: [],
    cpu: 0,
  },
];
if (onNode) {
  sides.push({
    name: "node:http + timeout (L4 + L6 POSTs)",
    cycle: rawCycle((path, body) => httpPost(http, path, body)),
    key: "http",
    samples: [],
    cpu: 0,
  });
}
const tag = `${runtime().split(" ")[0]}-${globalThis.process.pid}`;
// Warm-up: JIT, connection pool, SQLite page cache.
for (const side of sides) await block({ cycle: side.cycle, cpu: 0 }, `bench/${tag}/warm-${side.key}`);
for (let b = 0; b < blocks; b += 1) {
  for (const side of sides) await block(side, `bench/${tag}/${side.key}`);
}
await session.close();
await fetch(`${baseUrl}/v1/sessions/${raw.holderId}`, {
  method: "DELETE",
  headers: { "lock-session-id": raw.sessionId },
});

const [sdk, timed, bare, viaHttp] = sides.map((side) => side.samples);
printTable(sides.map((side) => [side.name, side.samples]));
const ratio = (a, b, f) => f(a) / f(b);
const cpu = Object.fromEntries(sides.map((side) => [side.key, side.cpu / side.samples.length]));
console.log(
  `CPU per cycle (process.cpuUsage): SDK ${cpu.sdk.toFixed(0)} µs, fetch+timeout ${cpu.timed.toFixed(0)} µs, ` +
    `bare fetch ${cpu.bare.toFixed(0)} µs; SDK − (fetch+timeout) ${(cpu.sdk - cpu.timed).toFixed(0)} µs`,
);
console.log(
  `ratio SDK/(fetch+timeout): mean ${ratio(sdk, timed, mean).toFixed(3)}x, p50 ${ratio(sdk, timed, p50).toFixed(3)}x; ` +
    `SDK/bare fetch: mean ${ratio(sdk, bare, mean).toFixed(3)}x, p50 ${ratio(sdk, bare, p50).toFixed(3)}x`,
);
console.log(
  JSON.stringify({
    runtime: runtime(),
    p50: { sdk: p50(sdk), timed: p50(timed), bare: p50(bare), http: viaHttp && p50(viaHttp) },
    ratioP50: { timed: ratio(sdk, timed, p50), bare: ratio(sdk, bare, p50), http: viaHttp && ratio(sdk, viaHttp, p50) },
    cpuMicros: cpu,
  }),
);
