// Without `@opentelemetry/api` (this project has none; the tracing suite, otel-tracing.mjs,
// runs in a project of its own) the package sends no `traceparent`: the real server's log
// lines for its requests carry no trace id.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LockClient } from "lock-wasm";
import { baseUrl, uniqueKey, serverLines, waitFor } from "./helpers.mjs";

test("without @opentelemetry/api no traceparent is sent", async () => {
  await assert.rejects(import("@opentelemetry/api"), "this project must not have the API");
  const session = await new LockClient({ baseUrl }).openSession();
  const key = uniqueKey("untraced");
  const handle = await session.acquire(key);
  await session.release(handle);
  await session.close();
  await waitFor(async () => (await serverLines("lock_granted", key)).length === 1, 10_000, "the grant's log line");
  const [granted] = await serverLines("lock_granted", key);
  assert.equal(granted.fencingToken, handle.fencingToken);
  assert.equal(granted.traceId, undefined, JSON.stringify(granted));
});
