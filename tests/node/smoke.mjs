// The smoke example, run as-is by Node (exit.test.mjs) and by Deno (scripts/test-wasm.sh):
// open a session, take a lock, write to the fenced ledger under its token, release, close.
import { LockClient } from "lock-wasm";

const env = (name) => (typeof Deno !== "undefined" ? Deno.env.get(name) : process.env[name]);
const baseUrl = env("LOCK_URL");
const client = new LockClient({ baseUrl });
const session = await client.openSession({ ttlMs: Number(env("SMOKE_SESSION_TTL_MS") ?? 15000) });
const key = `smoke/${Date.now()}/${Math.random()}`;
const handle = await session.acquire(key, { ttlMs: 5000 });
if (!handle) throw new Error("not granted");
const res = await fetch(`${baseUrl}/v1/demo/ledger/${encodeURIComponent(key)}`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ fencingToken: handle.fencingToken, entry: "smoke" }),
});
if (!res.ok) throw new Error(`ledger refused: ${res.status}`);
await res.body?.cancel();
await session.release(handle);
await session.close();
console.log(`smoke ok: ${key} token ${handle.fencingToken}`);
