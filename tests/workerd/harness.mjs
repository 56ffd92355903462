// Runs a Worker module under workerd (npm's `workerd` package ships the binary; WORKERD
// names it) the way a bundler would lay it out: the package is resolved through its
// `workerd` export condition, every module the entry reaches is listed in the config
// (`.wasm` as a compiled wasm module: Workers cannot compile wasm from bytes), and a module
// named `lock-wasm` re-exports the resolved entry, so the Worker imports "lock-wasm" as
// users write it.
//
//   const worker = await startWorker("worker.js", { LOCK_URL });  // cwd: a project with node_modules
//   await fetch(worker.url); await worker.stop();
import { spawn } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, posix, relative, resolve } from "node:path";

async function freePort() {
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/** The package entry for the `workerd` condition, as a path relative to `root`. */
async function workerdEntry(root) {
  const pkgDir = join(root, "node_modules", "lock-wasm");
  const pkg = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8"));
  const target = pkg.exports?.["."]?.workerd;
  if (typeof target !== "string") throw new Error("lock-wasm has no `workerd` export condition");
  return relative(root, join(pkgDir, target));
}

/** `file` and every module it reaches through relative imports (static `import ... from`). */
async function reachable(root, file, seen = new Map()) {
  if (seen.has(file)) return seen;
  const wasm = file.endsWith(".wasm");
  seen.set(file, wasm ? "wasm" : "esModule");
  if (wasm) return seen;
  const text = await readFile(join(root, file), "utf8");
  for (const [, spec] of text.matchAll(/^\s*(?:import|export)\b[^"';]*?from\s*["'](\.[^"']+)["']/gm)) {
    await reachable(root, posix.normalize(posix.join(dirname(file), spec)), seen);
  }
  return seen;
}

export async function startWorker(workerFile, bindings = {}) {
  const root = process.cwd();
  const dir = await mkdtemp(join(tmpdir(), "lock-wasm-workerd-"));
  const entry = await workerdEntry(root);
  const shim = join(dir, "lock-wasm.js");
  await writeFile(shim, `export * from ${JSON.stringify(entry)};\nexport { default } from ${JSON.stringify(entry)};\n`);
  // Cap'n Proto reads an absolute `embed` path against its import roots, not the file
  // system: every path is given relative to the config's directory.
  const embed = (path) => `embed ${JSON.stringify(relative(dir, path))}`;
  const modules = [
    `(name = "worker.js", esModule = ${embed(resolve(workerFile))})`,
    `(name = "lock-wasm", esModule = ${embed(shim)})`,
  ];
  for (const [file, kind] of await reachable(root, entry)) {
    modules.push(`(name = ${JSON.stringify(file)}, ${kind} = ${embed(join(root, file))})`);
  }
  const port = await freePort();
  const bound = Object.entries(bindings).map(([name, text]) => `(name = ${JSON.stringify(name)}, text = ${JSON.stringify(text)})`);
  const config = join(dir, "config.capnp");
  await writeFile(
    config,
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    # The lock-server of the tests listens on loopback: let the Worker's fetch reach it.
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [
    ${modules.join(",\n    ")},
  ],
  compatibilityDate = "2025-09-01",
  bindings = [${bound.join(", ")}],
  globalOutbound = "internet",
);
`,
  );
  const child = spawn(process.env.WORKERD ?? "workerd", ["serve", config], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const exited = new Promise((r) => child.once("exit", r));
  const url = `http://127.0.0.1:${port}/`;
  for (let i = 0; ; i += 1) {
    if (child.exitCode !== null) throw new Error(`workerd exited ${child.exitCode}:\n${log}`);
    // A TCP connect, not a request: a request would run the Worker.
    const up = await new Promise((r) => {
      const socket = connect(port, "127.0.0.1", () => r(true) || socket.end());
      socket.once("error", () => r(false));
    });
    if (up) break;
    {
      if (i > 300) throw new Error(`workerd did not listen:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    log: () => log,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
