// The package with `@opentelemetry/api` installed but no tracer provider registered (the API
// alone, as many applications have it through some other package), against the real
// lock-server whose JSON log the runner passes in LOCK_LOG. Runs in the tracing suite's
// project (scripts/test-wasm.sh), in a process of its own: the first test runs before any
// provider exists. Then a provider that samples nothing: its spans record nothing but carry
// a trace, which must still reach the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { LockClient } from "lock-wasm";
import { baseUrl, uniqueKey, deleteSession, grantLine, waitFor } from "./helpers.mjs";

const client = new LockClient({ baseUrl });

test("the API alone: acquire, release and loss as without it, and no traceparent sent", async () => {
  const key = uniqueKey("otel-api/plain");
  const session = await client.openSession({ ttlMs: 600 });
  const heard = [];
  session.onEvent((event) => heard.push(event.type));
  const first = await session.acquire(key);
  assert.ok(first, "granted");
  assert.equal(first.nest(), first, "a nested hold");
  await session.release(first);
  await session.release(first);
  assert.equal(first.lostReason, "released");
  assert.equal((await grantLine(key, first.fencingToken)).traceId, undefined, "no trace to join");

  // A loss still reaches the handle's signal (the tracing's own wait for it is skipped).
  const second = await session.acquire(key);
  assert.ok(second.fencingToken > first.fencingToken);
  assert.equal(await deleteSession(session), 204);
  await waitFor(() => second.signal.aborted, 10_000, "the loss");
  assert.equal(second.signal.reason.code, "LOCK_LOST");
  await waitFor(() => heard.includes("lost"), 2_000, "the lost event");
  assert.ok(heard.includes("granted"), heard.join());
  await session.close().catch(() => {});
});

test("a provider that samples nothing: no spans, but the active trace still reaches the server", async () => {
  const exporter = new InMemorySpanExporter();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
  const key = uniqueKey("otel-api/unsampled");
  const session = await client.openSession();
  const { traceId, handle } = await trace.getTracer("otel-no-provider-test").startActiveSpan("job", async (span) => {
    assert.equal(span.isRecording(), false);
    const handle = await session.acquire(key);
    await session.release(handle);
    span.end();
    return { traceId: span.spanContext().traceId, handle };
  });
  assert.equal((await grantLine(key, handle.fencingToken)).traceId, traceId, "the acquire's L4 carried the trace");
  assert.equal(exporter.getFinishedSpans().length, 0, "nothing sampled, nothing exported");
  await session.close();
});
