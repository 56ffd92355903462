// Serves this project directory on 127.0.0.1:PORT with PAGE (an HTML file) as its index,
// loads it in headless Chromium and prints the DOM the page ends with (`--dump-dom`):
// `node browser-page.mjs PORT PAGE`. The lock-server must allow the origin through CORS.
// `dumpDom` is the same for a page given as text (browser-smoke.mjs).
import { createServer } from "node:http";
import { readFile, mkdtemp } from "node:fs/promises";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { join, extname, normalize } from "node:path";
import { pathToFileURL } from "node:url";

const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };

/** Serves the working directory with `page` as its index on `port`, loads it in headless
 * Chromium and resolves `{ err, stdout }`: the DOM the page ended with. */
export async function dumpDom(port, page) {
  const root = process.cwd();
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
  return new Promise((resolve) => {
    execFile(process.env.CHROMIUM ?? "chromium", args, { timeout: 90_000 }, (err, stdout) => {
      server.close();
      resolve({ err, stdout });
    });
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [port, pageFile] = [Number(process.argv[2]), process.argv[3]];
  const { err, stdout } = await dumpDom(port, await readFile(pageFile));
  process.stdout.write(stdout);
  process.exit(err ? 1 : 0);
}
