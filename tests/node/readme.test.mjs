// Every code block of the package README, taken from the README the installed package
// ships and run in the runtime its `<!-- runs: ... -->` marker names (readme-blocks.mjs).
// Only the server address changes: LOCK_URL for the blocks that read it, and the browser
// page's literal default address, replaced by the test server's.
//
// Tools come from the runner (scripts/test-wasm.sh): BUN, WORKERD, CHROMIUM, deno on PATH,
// README_TARBALL (the packed package), LOCK_TEST_PAGE_PORT (the browser origin the server
// allows) and LOCK_TEST_HOLDBACK_URL (a server that does not allow it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readmeBlocks, RUNTIMES } from "./readme-blocks.mjs";
import { startWorker } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = dirname(createRequire(import.meta.url).resolve("lock-wasm/package.json"));
const readme = await readFile(join(packageRoot, "README.md"), "utf8");
const blocks = readmeBlocks(readme);

/** Runs a command to its end (killed after 90 s); resolves `{ code, out }`. */
function run(command, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: here, stdio: ["ignore", "pipe", "pipe"], ...options });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", (err) => (out += String(err)));
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

async function runFile(block, name, command, args) {
  const file = join(here, name);
  await writeFile(file, block.code);
  const { code, out } = await run(command, [...args, file]);
  assert.equal(code, 0, `README line ${block.line} under ${block.runtime}:\n${out}`);
  return out;
}

const runners = {
  "node-esm": (b, i) => runFile(b, `readme-${i}.mjs`, process.execPath, []),
  "node-cjs": (b, i) => runFile(b, `readme-${i}.cjs`, process.execPath, []),
  // Not named *.test.mjs: the runner's glob must not pick it up as a suite of its own.
  "node-test": (b, i) => runFile(b, `readme-${i}-node-test.mjs`, process.execPath, ["--test"]),
  bun: (b, i) => runFile(b, `readme-${i}.mjs`, process.env.BUN ?? "bun", ["run"]),
  deno: (b, i) => runFile(b, `readme-${i}.mjs`, "deno", ["run", "--quiet", "--allow-net=127.0.0.1", "--allow-read", "--allow-env"]),
  async workerd(b, i) {
    const file = join(here, `readme-${i}.worker.js`);
    await writeFile(file, b.code);
    const worker = await startWorker(file, { LOCK_URL: process.env.LOCK_URL });
    try {
      const res = await fetch(worker.url, { signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      assert.equal(res.status, 200, `${text}\n${worker.log()}`);
      return text;
    } finally {
      await worker.stop();
    }
  },
  async browser(b, i) {
    const page = join(here, `readme-${i}.html`);
    await writeFile(page, b.code.replaceAll("http://127.0.0.1:7878", process.env.LOCK_URL));
    const { code, out } = await run(process.execPath, ["browser-page.mjs", process.env.LOCK_TEST_PAGE_PORT, page]);
    assert.equal(code, 0, out);
    return /<title>([^<]*)<\/title>/.exec(out)?.[1] ?? out;
  },
  async sh(b) {
    // A fresh project with the tarball where the README puts it.
    const project = await mkdtemp(join(tmpdir(), "lock-wasm-readme-sh-"));
    const tarball = process.env.README_TARBALL;
    await mkdir(join(project, "vendor"));
    await copyFile(tarball, join(project, "vendor", basename(tarball)));
    await writeFile(join(project, "package.json"), '{ "name": "my-service", "private": true }\n');
    const { code, out } = await run("bash", ["-euo", "pipefail", "-c", b.code], {
      cwd: project,
      env: { ...process.env, npm_config_offline: "true", npm_config_audit: "false", npm_config_fund: "false" },
    });
    assert.equal(code, 0, out);
    return JSON.parse(await readFile(join(project, "package.json"), "utf8")).dependencies;
  },
};

test("every README block names a runtime the tests run", () => {
  assert.ok(blocks.length >= 8, `${blocks.length} blocks`);
  for (const block of blocks) assert.ok(block.runtime in RUNTIMES);
  assert.ok(blocks.some((b) => b.runtime === "sh-checkout"), "the install section shows the build");
});

blocks.forEach((block, i) => {
  if (block.runtime === "sh-checkout") return; // scripts/test-wasm.sh builds with it
  test(`README block at line ${block.line} runs under ${block.runtime}`, async () => {
    const result = await runners[block.runtime](block, i);
    // What the README says the block does, where the block's output shows it.
    if (block.runtime === "sh") {
      assert.equal(result?.["lock-wasm"], "file:vendor/lock-wasm-0.1.0.tgz", "the dependency line the README shows");
    }
    if (block.code.includes("report written")) assert.match(result, /report written \(HTTP 204\)/);
    if (block.runtime === "workerd") assert.match(result, /^ledger answered 204 to token \d+$/);
    if (block.runtime === "browser") assert.match(result, /^editing \(token \d+\)$/);
  });
});

test("a page whose origin the server does not allow sees TRANSPORT 'network error: Failed to fetch'", async () => {
  const page = join(here, "readme-cors.html");
  await writeFile(
    page,
    `<script type="module">
  import { LockClient } from "./node_modules/lock-wasm/web/index.js";
  try {
    await new LockClient({ baseUrl: ${JSON.stringify(process.env.LOCK_TEST_HOLDBACK_URL)} }).openSession();
    document.title = "opened";
  } catch (e) {
    document.title = e.code + " " + e.message;
  }
</script>`,
  );
  const { code, out } = await run(process.execPath, ["browser-page.mjs", process.env.LOCK_TEST_PAGE_PORT, page]);
  assert.equal(code, 0, out);
  assert.match(out, /<title>TRANSPORT network error: Failed to fetch<\/title>/);
});
