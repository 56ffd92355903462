// The package under Cloudflare's workerd (scripts/test-wasm.sh): the `workerd` export
// condition's entry (the wasm imported as a module, no top-level I/O) in a Worker that takes
// a lock, writes its token to the demo ledger and releases, all within one request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { baseUrl, ledgerEntries, lockState, uniqueKey } from "./helpers.mjs";
import { startWorker } from "./harness.mjs";

// Bounded: a Worker that never answers must fail the suite, not hang it.
test("a Worker acquires, writes the token to the ledger and releases within one request", { timeout: 120_000 }, async () => {
  const worker = await startWorker("worker.js", { LOCK_URL: baseUrl });
  try {
    const key = uniqueKey("workerd");
    const tokens = [];
    for (let i = 0; i < 2; i += 1) {
      const res = await fetch(`${worker.url}?key=${encodeURIComponent(key)}`, { signal: AbortSignal.timeout(60_000) });
      const body = await res.text();
      assert.equal(res.status, 200, `${body}\n${worker.log()}`);
      const answer = JSON.parse(body);
      assert.equal(answer.ledger, 204, "the ledger accepted the token");
      assert.equal(answer.validation, "VALIDATION_FAILED key", "errors keep their code and field");
      tokens.push(answer.fencingToken);
    }
    assert.ok(tokens[1] > tokens[0], "each request's grant has a higher token");
    const entries = await ledgerEntries(key);
    assert.deepEqual(entries.map((e) => e.fencingToken), tokens);
    assert.equal((await lockState(key)).holder, null, "released before the response");
  } finally {
    await worker.stop();
  }
});
