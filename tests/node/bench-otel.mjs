// Benchmark (not a test): SDK acquire+release in Node with OpenTelemetry installed vs without
// `@opentelemetry/api`, against the same server in the same run, three sides: no API; the
// API alone, no tracer provider registered (as an application has it through some other
// dependency); the API with the SDK's tracer provider registered and no exporter (spans are
// made, recorded and ended, and go nowhere). The package loads its tracing once per process,
// so each side is a child process started from a project with what that side installs. The
// children live for the whole run and take turns, a block of cycles each, the order rotated
// every block: a noisy machine's drift hits all alike, and all are as warm as a long-lived
// application (short-lived children measured JIT warm-up as much as tracing).
//
//   node bench-otel.mjs PLAIN_DIR SDK_DIR API_DIR [CYCLES_PER_BLOCK] [BLOCKS] [WARM_UP_BLOCKS]
//
// Each directory holds this file and the installed package; a child (`--child`) runs the
// number of cycles it reads from each stdin line and answers that block's samples as JSON.
import { spawn } from "node:child_process";
import readline from "node:readline";
import { mean, p50, printTable } from "./bench-stats.mjs";

const baseUrl = process.env.LOCK_URL;

/** What this child's project has: "none", "api" (the API alone) or "sdk" (registered). */
async function setUpTracing() {
  let api;
  try {
    api = await import("@opentelemetry/api");
  } catch {
    return "none";
  }
  try {
    const { BasicTracerProvider } = await import("@opentelemetry/sdk-trace-base");
    const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.trace.setGlobalTracerProvider(new BasicTracerProvider());
    return "sdk";
  } catch {
    return "api";
  }
}

async function child() {
  const tracing = await setUpTracing();
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
    process.stdout.write(`${JSON.stringify({ tracing, samples, cpuMicros: user + system })}\n`);
  }
  await session.close();
}

/** A child in `dir`; `run(cycles)` resolves that block's result. */
function start(dir, tracing) {
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
      if (result.tracing !== tracing) throw new Error(`${dir}: tracing "${result.tracing}", expected "${tracing}"`);
      return result;
    },
    stop: () => proc.stdin.end(),
  };
}

if (process.argv[2] === "--child") {
  await child();
} else {
  const [plainDir, sdkDir, apiDir] = process.argv.slice(2, 5);
  const perBlock = Number(process.argv[5] ?? 50);
  const blocks = Number(process.argv[6] ?? 100);
  const warmUp = Number(process.argv[7] ?? 20);
  const side = (name, dir, tracing) => ({ name, child: start(dir, tracing), samples: [], cpu: 0 });
  const sides = [
    side("without @opentelemetry/api", plainDir, "none"),
    side("the API alone, no provider", apiDir, "api"),
    side("OpenTelemetry SDK, no exporter", sdkDir, "sdk"),
  ];
  for (let b = 0; b < warmUp + blocks; b += 1) {
    // Each side first, second and last in turn.
    for (let i = 0; i < sides.length; i += 1) {
      const s = sides[(b + i) % sides.length];
      const result = await s.child.run(perBlock);
      if (b < warmUp) continue; // JIT, connections
      s.samples.push(...result.samples);
      s.cpu += result.cpuMicros;
    }
  }
  for (const s of sides) s.child.stop();
  printTable(sides.map((s) => [s.name, s.samples]));
  const [plain, ...traced] = sides;
  const perCycle = (s) => s.cpu / s.samples.length;
  console.log(`CPU per cycle (process.cpuUsage), without the API: ${perCycle(plain).toFixed(0)} µs`);
  for (const s of traced) {
    const ratio = (f) => (f(s.samples) / f(plain.samples)).toFixed(3);
    console.log(
      `${s.name} ÷ without: p50 ${ratio(p50)}x, mean ${ratio(mean)}x; ` +
        `CPU per cycle ${perCycle(s).toFixed(0)} µs, ${(perCycle(s) / perCycle(plain)).toFixed(3)}x`,
    );
  }
}
