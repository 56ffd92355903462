// Mutual exclusion through the SDK, checked by the fenced demo ledger: ten sessions in one
// process, then three separate Node processes, contending for one key.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { LockClient } from "lock-wasm";
import { baseUrl, uniqueKey, ledgerEntries, assertNoOverlap, contend } from "./helpers.mjs";

test("ten sessions in one process never overlap", async () => {
  const key = uniqueKey("ten");
  const client = new LockClient({ baseUrl });
  const sessions = await Promise.all(Array.from({ length: 10 }, () => client.openSession()));
  await Promise.all(sessions.map((s, i) => contend(s, key, `s${i}`, 3)));
  await Promise.all(sessions.map((s) => s.close()));
  const sections = assertNoOverlap(await ledgerEntries(key));
  assert.equal(sections, 30);
  console.log(`ten sessions: ${sections} critical sections, no overlap`);
});

function runWorker(key, id, rounds) {
  const worker = fileURLToPath(new URL("./worker.mjs", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, key, id, String(rounds)], { stdio: "inherit" });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`worker ${id} exited ${code}`))));
  });
}

test("three Node processes never overlap", async () => {
  const key = uniqueKey("procs");
  await Promise.all([0, 1, 2].map((i) => runWorker(key, `p${i}`, 4)));
  const sections = assertNoOverlap(await ledgerEntries(key));
  assert.equal(sections, 12);
  console.log(`three processes: ${sections} critical sections, no overlap`);
});
