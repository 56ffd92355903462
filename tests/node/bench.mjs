// Benchmark (not a test): SDK acquire+release latency in Node vs the same two requests made
// with raw `fetch`, against the same server in the same run. Blocks alternate so drift of a
// noisy machine hits both sides alike. `node bench.mjs [CYCLES_PER_BLOCK] [BLOCKS]`.
import { LockClient } from "lock-wasm";
import { mean, p50, printTable } from "./bench-stats.mjs";

const baseUrl = process.env.LOCK_URL;
const perBlock = Number(process.argv[2] ?? 200);
const blocks = Number(process.argv[3] ?? 5);

async function post(path, body) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const session = await new LockClient({ baseUrl }).openSession({ ttlMs: 60_000 });
const raw = await post("/v1/sessions", { ttlMillis: 60_000 });

async function sdkCycle(key) {
  const handle = await session.acquire(key, { ttlMs: 5000 });
  await session.release(handle);
}

async function rawCycle(key) {
  const path = `/v1/locks/${encodeURIComponent(key)}`;
  const grant = await post(`${path}/acquire`, { sessionId: raw.sessionId, ttlMillis: 5000 });
  await post(`${path}/release`, { fencingToken: grant.fencingToken, sessionId: raw.sessionId });
}

async function block(cycle, key, samples) {
  for (let i = 0; i < perBlock; i += 1) {
    const t = performance.now();
    await cycle(key);
    samples.push(performance.now() - t);
  }
}

const sdk = [];
const plain = [];
// Warm-up: JIT, connection pool, SQLite page cache.
await block(sdkCycle, "bench/warm-sdk", []);
await block(rawCycle, "bench/warm-raw", []);
for (let b = 0; b < blocks; b += 1) {
  await block(sdkCycle, "bench/sdk", sdk);
  await block(rawCycle, "bench/raw", plain);
}
await session.close();
await fetch(`${baseUrl}/v1/sessions/${raw.sessionId}`, { method: "DELETE" });

printTable([
  ["lock-wasm SDK (acquire+release)", sdk],
  ["raw fetch (L4 + L6 POSTs)", plain],
]);
console.log(`ratio SDK/raw: mean ${(mean(sdk) / mean(plain)).toFixed(3)}x, p50 ${(p50(sdk) / p50(plain)).toFixed(3)}x`);
