// Benchmark (not a test): the test kit's cost per simulated acquire+release cycle
// (`lock-wasm/testing`'s in-process service on its manual clock), in alternating blocks
// against an empty async loop body of the same shape, so the figure is the kit's own work.
//
//   node bench-kit.mjs [CYCLES_PER_BLOCK] [BLOCKS]
import { createTestKit } from "lock-wasm/testing";
import { mean, p50, printTable } from "./bench-stats.mjs";

const perBlock = Number(process.argv[2] ?? 200);
const blocks = Number(process.argv[3] ?? 5);

const kit = await createTestKit({ seed: 1 });
const session = await kit.client.openSession({ ttlMs: 60_000 });

async function block(samples) {
  for (let i = 0; i < perBlock; i += 1) {
    const t = performance.now();
    const handle = await session.acquire("bench/kit", { ttlMs: 5000 });
    await session.release(handle);
    samples.push(performance.now() - t);
  }
}

await block([]); // warm-up: JIT
const samples = [];
for (let b = 0; b < blocks; b += 1) await block(samples);
await session.close();
printTable([["test kit acquire+release (simulated)", samples]]);
console.log(`kit cycles per second: ${(1000 / mean(samples)).toFixed(0)} (p50 ${(p50(samples) * 1000).toFixed(1)} µs)`);
