// The Worker of the workerd suite: within one request it opens a session, acquires a lock,
// writes the token to the lock-server's demo ledger (the fenced resource) under the
// handle's signal, releases and closes, and answers what happened as JSON.
import { LockClient, LockError } from "lock-wasm";

export default {
  async fetch(request, env) {
    const key = new URL(request.url).searchParams.get("key") ?? "workerd/demo";
    const client = new LockClient({ baseUrl: env.LOCK_URL });
    const session = await client.openSession({ ttlMs: 10_000 });
    try {
      const handle = await session.acquire(key, { ttlMs: 5000 });
      if (!handle) return Response.json({ granted: false }, { status: 409 });
      let ledger;
      try {
        const res = await fetch(`${env.LOCK_URL}/v1/demo/ledger/${encodeURIComponent(key)}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ fencingToken: handle.fencingToken, entry: "written by a Worker" }),
          signal: handle.signal,
        });
        ledger = res.status;
      } finally {
        await session.release(handle);
      }
      let validation;
      try {
        await session.acquire("", {});
      } catch (err) {
        validation = err instanceof LockError ? `${err.code} ${err.field}` : String(err);
      }
      return Response.json({ granted: true, fencingToken: handle.fencingToken, ledger, validation });
    } finally {
      await session.close();
    }
  },
};
