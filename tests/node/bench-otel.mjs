// Benchmark (not a test): SDK acquire+release in Node with OpenTelemetry installed (the API,
// and the SDK's tracer provider registered with no exporter) vs without `@opentelemetry/api`,
// against the same server in the same run. The package loads its tracing once per process,
// so each side is a child process started from a project with or without the API. Both
// children live for the whole run and take turns, a block of cycles each, the order swapped
// every block: a noisy machine's drift hits both alike, and both are as warm as a long-lived
// application (short-lived children measured JIT warm-up as much as tracing).
//
//   node bench-otel.mjs PLAIN_DIR OTEL_DIR [CYCLES_PER_BLOCK] [BLOCKS] [WARM_UP_BLOCKS]
//
// Both directories hold this file and the installed package; a child (`--child`) runs the
// number of cycles it reads from each stdin line and answers that block's samples as JSON.
import { spawn } from "node:child_process";
import readline from "node:readline";
import { mean, p50, printTable } from "./bench-stats.mjs";

const baseUrl = process.env.LOCK_URL;

async function child() {
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
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const cycles = Number(line);
    const samples = [];
    const cpu = process.cpuUsage();
    for (let i = 0; i < cycles; i += 1) {
      const t = performance.now();
      await cycle();
      samples.push(performance.now() - t);
    }
    const { user, system } = process.cpuUsage(cpu);
    process.stdout.write(`${JSON.stringify({ traced, samples, cpuMicros: user + system })}\n`);
  }
  await session.close();
}

/** A child in `dir`; `run(cycles)` resolves that block's result. */
function start(dir, traced) {
  const proc = spawn(process.execPath, ["bench-otel.mjs", "--child"], {
    cwd: dir,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const answers = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    async run(cycles) {
      proc.stdin.write(`${cycles}\n`);
      const { value, done } = await answers.next();
      if (done) throw new Error(`${dir}: the child exited`);
      const result = JSON.parse(value);
      if (result.traced !== traced) throw new Error(`${dir}: OpenTelemetry ${result.traced ? "found" : "missing"}`);
      return result;
    },
    stop: () => proc.stdin.end(),
  };
}

if (process.argv[2] === "--child") {
  await child();
} else {
  const [plainDir, otelDir] = process.argv.slice(2, 4);
  const perBlock = Number(process.argv[4] ?? 50);
  const blocks = Number(process.argv[5] ?? 100);
  const warmUp = Number(process.argv[6] ?? 20);
  const sides = {
    plain: { child: start(plainDir, false), samples: [], cpu: 0 },
    otel: { child: start(otelDir, true), samples: [], cpu: 0 },
  };
  for (let b = 0; b < warmUp + blocks; b += 1) {
    for (const side of b % 2 === 0 ? [sides.plain, sides.otel] : [sides.otel, sides.plain]) {
      const result = await side.child.run(perBlock);
      if (b < warmUp) continue; // JIT, connections
      side.samples.push(...result.samples);
      side.cpu += result.cpuMicros;
    }
  }
  for (const side of Object.values(sides)) side.child.stop();
  const { plain, otel } = sides;
  printTable([
    ["without @opentelemetry/api", plain.samples],
    ["OpenTelemetry SDK, no exporter", otel.samples],
  ]);
  const ratio = (f) => (f(otel.samples) / f(plain.samples)).toFixed(3);
  console.log(`ratio traced/untraced: mean ${ratio(mean)}x, p50 ${ratio(p50)}x`);
  const perCycle = (side) => side.cpu / side.samples.length;
  console.log(
    `CPU per cycle (process.cpuUsage): untraced ${perCycle(plain).toFixed(0)} µs, ` +
      `traced ${perCycle(otel).toFixed(0)} µs; ratio ${(perCycle(otel) / perCycle(plain)).toFixed(3)}x`,
  );
}
