// Benchmark (not a test): SDK acquire+release in Node with OpenTelemetry installed (the API,
// and the SDK's tracer provider registered with no exporter) vs without `@opentelemetry/api`,
// against the same server in the same run. The package loads its tracing once per process,
// so each side runs in child processes started from a project with or without the API, in
// alternating blocks so drift of a noisy machine hits both alike.
//
//   node bench-otel.mjs PLAIN_DIR OTEL_DIR [CYCLES_PER_BLOCK] [BLOCKS]
//
// Both directories hold this file and the installed package; the child mode
// (`--child CYCLES`) prints one block's samples as JSON.
import { spawnSync } from "node:child_process";
import { mean, p50, printTable } from "./bench-stats.mjs";

const baseUrl = process.env.LOCK_URL;

async function child(cycles) {
  let traced = false;
  try {
    const api = await import("@opentelemetry/api");
    const { BasicTracerProvider } = await import("@opentelemetry/sdk-trace-base");
    const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.trace.setGlobalTracerProvider(new BasicTracerProvider());
    traced = true;
  } catch {
    // No OpenTelemetry in this project: the untraced side.
  }
  const { LockClient } = await import("lock-wasm");
  const session = await new LockClient({ baseUrl }).openSession({ ttlMs: 60_000 });
  const key = `bench-otel/${process.pid}`;
  const cycle = async () => {
    const handle = await session.acquire(key, { ttlMs: 5000 });
    await session.release(handle);
  };
  for (let i = 0; i < 50; i += 1) await cycle(); // warm-up: JIT, connections
  const samples = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < cycles; i += 1) {
    const t = performance.now();
    await cycle();
    samples.push(performance.now() - t);
  }
  const { user, system } = process.cpuUsage(cpu);
  await session.close();
  console.log(JSON.stringify({ traced, samples, cpuMicros: user + system }));
}

function run(dir, cycles, traced) {
  const out = spawnSync(process.execPath, ["bench-otel.mjs", "--child", String(cycles)], {
    cwd: dir,
    encoding: "utf8",
  });
  if (out.status !== 0) throw new Error(`${dir}: ${out.stderr}`);
  const result = JSON.parse(out.stdout.trim().split("\n").pop());
  if (result.traced !== traced) throw new Error(`${dir}: OpenTelemetry ${result.traced ? "found" : "missing"}`);
  return result;
}

if (process.argv[2] === "--child") {
  await child(Number(process.argv[3]));
} else {
  const [plainDir, otelDir] = process.argv.slice(2, 4);
  const perBlock = Number(process.argv[4] ?? 200);
  const blocks = Number(process.argv[5] ?? 5);
  const plain = [];
  const otel = [];
  // CPU time of the measured cycles (user + system, µs), per side.
  const cpu = { plain: 0, otel: 0 };
  for (let b = 0; b < blocks; b += 1) {
    for (const [dir, traced, samples, side] of [
      [plainDir, false, plain, "plain"],
      [otelDir, true, otel, "otel"],
    ]) {
      const result = run(dir, perBlock, traced);
      samples.push(...result.samples);
      cpu[side] += result.cpuMicros;
    }
  }
  printTable([
    ["without @opentelemetry/api", plain],
    ["OpenTelemetry SDK, no exporter", otel],
  ]);
  console.log(`ratio traced/untraced: mean ${(mean(otel) / mean(plain)).toFixed(3)}x, p50 ${(p50(otel) / p50(plain)).toFixed(3)}x`);
  const perCycle = (side, samples) => cpu[side] / samples.length;
  console.log(
    `CPU per cycle (process.cpuUsage): untraced ${perCycle("plain", plain).toFixed(0)} µs, ` +
      `traced ${perCycle("otel", otel).toFixed(0)} µs; ratio ${(perCycle("otel", otel) / perCycle("plain", plain)).toFixed(3)}x`,
  );
}
