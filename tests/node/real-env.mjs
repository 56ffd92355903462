// The scenarios' environment on a real lock-server (LOCK_URL): each session reaches it
// through a TCP proxy of its own (helpers.mjs), which `partition` cuts; revoke is R1 with the
// admin token the runner configured (LOCK_TEST_ADMIN_TOKEN); time is real, so bounds are
// generous wall-clock milliseconds and nothing asserts on speed.
import { LockClient } from "lock-wasm";
import { baseUrl, lockState, startProxy, uniqueKey } from "./helpers.mjs";

export async function realEnv() {
  const proxies = new Map();
  const token = process.env.LOCK_TEST_ADMIN_TOKEN;
  return {
    async openSession(options, defaults) {
      const proxy = await startProxy();
      const client = new LockClient({ baseUrl: proxy.url, defaults });
      const session = await client.openSession(options);
      proxies.set(session, proxy);
      return session;
    },
    async until(predicate, boundMs, what) {
      // Real time runs at its own pace on a loaded machine: a generous multiple of the bound.
      const until = Date.now() + boundMs * 3;
      for (;;) {
        if (await predicate()) return;
        if (Date.now() >= until) throw new Error(`not within ${boundMs * 3} ms: ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    partition(session, cut) {
      const proxy = proxies.get(session);
      if (cut) proxy.block();
      else proxy.unblock();
    },
    async revoke(key) {
      const res = await fetch(`${baseUrl}/v1/admin/locks/${encodeURIComponent(key)}/revoke`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ reason: "test" }),
      });
      if (!res.ok) throw new Error(`R1 answered ${res.status}: ${await res.text()}`);
      return (await res.json()).revokedToken ?? undefined;
    },
    async holder(key) {
      return (await lockState(key)).holder;
    },
    key: (prefix) => uniqueKey(`kit-real/${prefix}`),
    async close() {
      await Promise.all([...proxies.values()].map((p) => p.close()));
    },
  };
}
