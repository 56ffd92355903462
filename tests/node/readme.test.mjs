// The package README's Node example, taken from the README the installed package ships and
// run as written (only LOCK_URL points it at the test server).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

async function nodeExample() {
  const root = dirname(createRequire(import.meta.url).resolve("lock-wasm/package.json"));
  const readme = await readFile(join(root, "README.md"), "utf8");
  const section = readme.split(/^## /m).find((s) => s.startsWith("Node\n"));
  const code = section?.match(/```js\n([\s\S]*?)```/)?.[1];
  assert.ok(code, "the README has a ## Node section with a js block");
  return code;
}

test("the README's Node example runs as written", async () => {
  // Beside this test, so that `import "lock-wasm"` resolves to the installed package.
  const file = fileURLToPath(new URL("./readme-example.mjs", import.meta.url));
  await writeFile(file, await nodeExample());
  const child = spawn(process.execPath, [file], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, out);
  assert.match(out, /report written \(HTTP 204\)/);
});
