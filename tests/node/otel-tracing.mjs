// The package's OpenTelemetry tracing (C4, "Client spans"), in Node with the OpenTelemetry
// SDK's in-memory exporter, against the real lock-server whose JSON log the runner passes in
// LOCK_LOG. It runs in a project of its own that has `@opentelemetry/api` installed
// (scripts/test-wasm.sh); every other suite runs where it is not, so they show the package
// unchanged without it.
//
// Versions (pinned by the runner): `@opentelemetry/api` 1.9.1 with SDK 2.x. SDK 2 has no
// `provider.register()` (the API's setters are used) and reports a span's parent as
// `parentSpanContext` (1.x: `parentSpanId`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, trace, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { LockClient } from "lock-wasm";
import { baseUrl, uniqueKey, deleteSession, grantLine, serverLines, waitFor } from "./helpers.mjs";

const exporter = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
);
const tracer = trace.getTracer("otel-tracing-test");
const client = new LockClient({ baseUrl });

const finished = (name, key) =>
  exporter.getFinishedSpans().filter((s) => s.name === name && s.attributes["lock.key"] === key);
const parentOf = (span) => span.parentSpanContext?.spanId;

test("an acquire that waits: lock.acquire and lock.hold spans, and the trace id in the server log", async () => {
  const key = uniqueKey("otel/wait");
  const holder = await client.openSession();
  const held = await holder.acquire(key);
  // Client-side retries only (no server-side wait), so each refusal is an attempt.
  const policy = { waitMs: 0, baseBackoffMs: 20, maxBackoffMs: 40, totalBudgetMs: 20_000, maxAttempts: 1000 };
  let elapsed;
  const heard = [];
  const job = await tracer.startActiveSpan("job", async (span) => {
    const session = await client.openSession();
    // The holder lets go once the waiter has been refused: at least one refusal, whatever
    // the machine's speed.
    let released;
    session.onEvent((event) => {
      heard.push(event.type);
      if (event.type === "contention" && event.key === key) released ??= holder.release(held);
    });
    const started = performance.now();
    const handle = await session.acquire(key, { policy });
    elapsed = performance.now() - started;
    await released;
    assert.ok(handle, "granted once the holder released");
    // The tracing alone asks the wasm side for contention events only; a listener of the
    // application's own hears every event all the same.
    await waitFor(() => heard.includes("granted"), 2_000, "the granted event");
    assert.equal(handle.nest(), handle, "a nested hold: no acquire, no span");
    await session.release(handle);
    await session.release(handle);
    await session.close();
    span.end();
    return span;
  });
  await holder.close();

  const acquires = finished("lock.acquire", key).filter((s) => s.spanContext().traceId === job.spanContext().traceId);
  assert.equal(acquires.length, 1, "the wait; nesting is no acquire");
  const [wait] = acquires;
  for (const span of acquires) assert.equal(parentOf(span), job.spanContext().spanId, "a child of the caller's span");
  assert.equal(wait.attributes["lock.acquire.outcome"], "granted");
  const attempts = wait.attributes["lock.acquire.attempts"];
  assert.ok(attempts >= 2, `refused at least once, then granted (${attempts} attempts)`);
  const contention = wait.events.filter((e) => e.name === "lock.contention");
  assert.equal(contention.length, attempts - 1, "one lock.contention event per refusal");
  const waited = wait.attributes["lock.acquire.waited_ms"];
  assert.ok(waited > 0 && waited <= elapsed, `waited ${waited} ms of the call's ${elapsed} ms`);
  const token = wait.attributes["lock.fencing_token"];
  assert.ok(Number.isSafeInteger(token) && token > held.fencingToken);

  const [hold] = finished("lock.hold", key).filter((s) => s.spanContext().traceId === job.spanContext().traceId);
  assert.equal(parentOf(hold), wait.spanContext().spanId, "a hold is its acquire's child");
  assert.equal(hold.attributes["lock.fencing_token"], token);
  assert.equal(hold.attributes["lock.hold.end_reason"], "released");
  assert.equal(hold.status.code, SpanStatusCode.UNSET);
  assert.equal(hold.events.length, 0);

  // No span attribute names a session (its id is its owner's credential).
  for (const span of exporter.getFinishedSpans()) {
    assert.ok(!JSON.stringify(span.attributes).match(/session/i), JSON.stringify(span.attributes));
  }

  // The server joined its lines to the trace: the grant and every refusal under the
  // acquire's traceparent.
  const traceId = job.spanContext().traceId;
  assert.equal((await grantLine(key, token)).traceId, traceId);
  const refused = await serverLines("contention", key);
  assert.ok(refused.length >= attempts - 1);
  assert.ok(refused.every((l) => l.traceId === traceId), JSON.stringify(refused));
  // The holder acquired outside any span: its lock.acquire is a root span, a trace of its
  // own, and that is the trace id of its grant's line.
  const [root] = finished("lock.acquire", key).filter((s) => s.spanContext().traceId !== traceId);
  assert.equal(parentOf(root), undefined);
  assert.equal((await grantLine(key, held.fencingToken)).traceId, root.spanContext().traceId);
});

test("a lock lost: its hold span ends with a lock.lost event and an error status", async () => {
  const key = uniqueKey("otel/lost");
  const session = await client.openSession({ ttlMs: 600 });
  const handle = await tracer.startActiveSpan("job", async (span) => {
    const handle = await session.acquire(key);
    span.end();
    return handle;
  });
  // The server forgets the session; the next heartbeat (a third of the TTL) finds out.
  assert.equal(await deleteSession(session), 204);
  await waitFor(() => handle.signal.aborted, 10_000, "the loss");
  const [hold] = finished("lock.hold", key);
  assert.ok(hold, "the hold span ended with the loss");
  const reason = hold.attributes["lock.hold.end_reason"];
  // Which loss the SDK learns of first depends on timing; each is one the owner did not ask for.
  assert.ok(["deadlinePassed", "notInHeartbeat", "sessionLost"].includes(reason), reason);
  assert.equal(hold.status.code, SpanStatusCode.ERROR);
  const lost = hold.events.filter((e) => e.name === "lock.lost");
  assert.equal(lost.length, 1);
  assert.equal(lost[0].attributes["lock.lost.reason"], reason);
  await session.close().catch(() => {});
});
