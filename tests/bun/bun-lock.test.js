// The package under Bun (`bun test`, scripts/test-wasm.sh): the ESM and CommonJS entries
// (Bun resolves the `bun` export condition to the Node build) against the real lock-server.
import { test, expect } from "bun:test";
import * as esm from "lock-wasm";

const baseUrl = process.env.LOCK_URL;

async function cycle({ LockClient }, key) {
  const session = await new LockClient({ baseUrl }).openSession({ ttlMs: 5000 });
  try {
    const handle = await session.acquire(key, { ttlMs: 5000 });
    expect(handle).toBeDefined();
    const res = await fetch(`${baseUrl}/v1/demo/ledger/${encodeURIComponent(key)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fencingToken: handle.fencingToken, entry: "bun" }),
      signal: handle.signal,
    });
    expect(res.status).toBe(204);
    await session.release(handle);
    return handle.fencingToken;
  } finally {
    await session.close();
  }
}

test("ESM: import from lock-wasm takes, uses and releases a lock", async () => {
  const key = `bun/esm/${Date.now()}`;
  const first = await cycle(esm, key);
  expect(await cycle(esm, key)).toBeGreaterThan(first);
});

test("CommonJS: require('lock-wasm') is the same build as import", async () => {
  const cjs = require("lock-wasm");
  expect(cjs.LockClient).toBe(esm.LockClient);
  expect(await cycle(cjs, `bun/cjs/${Date.now()}`)).toBeGreaterThan(0);
});

test("errors are the package's classes with their codes", async () => {
  const session = await new esm.LockClient({ baseUrl }).openSession();
  try {
    await session.acquire("", {});
    throw new Error("an empty key was accepted");
  } catch (err) {
    expect(err).toBeInstanceOf(esm.ValidationError);
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.field).toBe("key");
  } finally {
    await session.close();
  }
  expect(new esm.ContentionError("m").code).toBe("LOCK_CONTENDED");
});
