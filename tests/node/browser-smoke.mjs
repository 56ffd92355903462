// The packed package's browser entry (web/index.js, `--target web` glue, top-level-await
// init fetching the .wasm) in headless Chromium: `node browser-smoke.mjs PORT`.
//
// Serves this project directory on 127.0.0.1:PORT (the lock-server must allow that origin
// through CORS), loads a page that imports the package, takes and releases a lock, and
// prints the page's verdict, read back with `chromium --dump-dom`. Exits non-zero unless
// the page says "browser smoke ok".
import { dumpDom } from "./browser-page.mjs";

const port = Number(process.argv[2]);

const page = `<!doctype html><meta charset="utf-8"><title>lock-wasm smoke</title><body>pending
<script type="module">
  const out = (text) => { document.body.textContent = text; };
  try {
    const { LockClient, ValidationError } = await import("/node_modules/lock-wasm/web/index.js");
    const client = new LockClient({ baseUrl: ${JSON.stringify(process.env.LOCK_URL)} });
    const session = await client.openSession();
    const handle = await session.acquire("browser/smoke/" + Date.now());
    if (!handle) throw new Error("not granted");
    let validated = false;
    try { await session.acquire("k", { ttlMs: "soon" }); } catch (e) { validated = e instanceof ValidationError && e.field === "ttlMs"; }
    await session.release(handle);
    await session.close();
    out(validated ? "browser smoke ok: token " + handle.fencingToken : "browser smoke failed: no ValidationError");
  } catch (e) {
    out("browser smoke failed: " + e);
  }
</script>`;

const { err, stdout } = await dumpDom(port, page);
const verdict = /browser smoke [^<]*/.exec(stdout)?.[0] ?? `no verdict (${err?.message ?? "page still pending"})`;
console.log(verdict);
process.exit(verdict.startsWith("browser smoke ok") ? 0 : 1);
