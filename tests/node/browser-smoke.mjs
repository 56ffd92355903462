// The packed package's browser entry (web/index.js, `--target web` glue, top-level-await
// init fetching the .wasm) in headless Chromium: `node browser-smoke.mjs PORT`.
//
// Serves this project directory on 127.0.0.1:PORT (the lock-server must allow that origin
// through CORS), loads a page that imports the package, takes and releases a lock, and
// prints the page's verdict, read back with `chromium --dump-dom`. Exits non-zero unless
// the page says "browser smoke ok".
import { createServer } from "node:http";
import { readFile, mkdtemp } from "node:fs/promises";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { join, extname, normalize } from "node:path";

const port = Number(process.argv[2]);
const root = process.cwd();
const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };

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

const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
  if (path === "/" || path === "/index.html") {
    res.writeHead(200, { "content-type": "text/html" }).end(page);
    return;
  }
  try {
    const body = await readFile(join(root, path));
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
}).listen(port, "127.0.0.1");

const profile = await mkdtemp(join(tmpdir(), "lock-wasm-chromium-"));
const args = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--no-first-run", `--user-data-dir=${profile}`, "--virtual-time-budget=20000",
  "--dump-dom", `http://127.0.0.1:${port}/`,
];
execFile(process.env.CHROMIUM ?? "chromium", args, { timeout: 90_000 }, (err, stdout) => {
  server.close();
  const verdict = /browser smoke [^<]*/.exec(stdout)?.[0] ?? `no verdict (${err?.message ?? "page still pending"})`;
  console.log(verdict);
  process.exit(verdict.startsWith("browser smoke ok") ? 0 : 1);
});
