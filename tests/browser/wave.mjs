// Benchmark (not a test): how long one "wave" of simultaneous L4 calls takes to leave a client
// and to come back, in a browser and in Node, against the same lock-server. A wave is what no
// jitter does after a refusal: every contender retries after the same sleep, so their L4s
// go out together. Brooker's result needs the wave to stay together (within a fraction of
// the 5 ms base window); a client that spreads it over tens of milliseconds jitters "no
// jitter" by itself.
//
//   node tests/browser/wave.mjs --server target/release/lock-server [--n 50] [--waves 12]
//
// One release lock-server with --tls-self-signed (the browser speaks HTTP/2 over it), N
// sessions opened first; then `waves` times: N `POST /v1/locks/{key}/acquire` of one fresh
// key issued in one task (one grant, N − 1 refusals). Measured from the start of the task:
// when the last `fetch()` call returned (issue), and the first and last answer as the
// caller's code sees it. Chromium: plain `fetch` in a dedicated worker, as the dashboard's
// contenders run (no SDK, so the figure is the browser's own floor). Node: `node:https` over
// one keep-alive agent (a connection per contender, opened before the first wave; HTTP/1.1
// over the same TLS port, the test certificate accepted). Prints one line per wave and a
// table of the medians.
import https from "node:https";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { launchBare } from "./cdp.mjs";
import { flags, listeningUrl, stopServer, waitFor } from "./harness.mjs";

const args = flags();
const serverBin = resolve(args.server ?? "target/release/lock-server");
const n = Number(args.n ?? 50);
const waves = Number(args.waves ?? 12);

// The browser side: a page and the worker that runs the waves.
const WORKER = `onmessage = async (e) => {
  const { n, waves } = e.data;
  const post = (path, body) => fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const ids = [];
  for (let i = 0; i < n; i++) ids.push((await (await post("/v1/sessions", { ttlMillis: 60000 })).json()).sessionId);
  const out = [];
  for (let w = 0; w < waves; w++) {
    const path = "/v1/locks/" + encodeURIComponent("wave/browser/" + w) + "/acquire";
    const t0 = performance.now();
    const answered = [];
    const calls = ids.map((sessionId, i) =>
      post(path, { sessionId, ttlMillis: 1000, waitMillis: 0 }).then((r) => r.text()).then(() => { answered[i] = performance.now() - t0; }));
    const issued = performance.now() - t0;
    await Promise.all(calls);
    out.push({ issued, first: Math.min(...answered), last: Math.max(...answered) });
    await new Promise((r) => setTimeout(r, 200));
  }
  postMessage(out);
};`;

const scratch = mkdtempSync(join(tmpdir(), "lock-wave-"));
const webRoot = join(scratch, "www");
mkdirSync(webRoot);
writeFileSync(join(webRoot, "index.html"), "<!doctype html><title>wave</title>");
writeFileSync(join(webRoot, "wave.js"), WORKER);
const log = join(scratch, "server.log");
const server = spawn(
  serverBin,
  ["--listen", "127.0.0.1:0", "--data-dir", join(scratch, "data"), "--web-root", webRoot, "--tls-self-signed"],
  { stdio: ["ignore", openSync(log, "w"), openSync(log, "a")] },
);

async function browserWaves(base) {
  const page = await launchBare(join(scratch, "profile"), { ignoreHTTPSErrors: true });
  try {
    await page.send("Page.navigate", { url: `${base}/` });
    await waitFor("the page", () => page.evaluate(`document.title === "wave"`));
    const protocol = await page.evaluate(`performance.getEntriesByType("navigation")[0].nextHopProtocol`);
    const result = await page.evaluate(
      `new Promise((resolve) => { const w = new Worker("/wave.js"); w.onmessage = (e) => resolve(e.data); w.postMessage({ n: ${n}, waves: ${waves} }); })`,
    );
    return { protocol, result };
  } finally {
    await page.close();
  }
}

async function nodeWaves(base) {
  const url = new URL(base);
  const agent = new https.Agent({ keepAlive: true, maxSockets: n * 2, rejectUnauthorized: false });
  const post = (path, body) =>
    new Promise((ok, fail) => {
      const req = https.request({ host: url.hostname, port: url.port, path, method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => ok(text));
      });
      req.on("error", fail);
      req.end(JSON.stringify(body));
    });
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(JSON.parse(await post("/v1/sessions", { ttlMillis: 60000 })).sessionId);
  // Every connection of the pool opened before the first measured wave (handshakes apart).
  await Promise.all(ids.map((sessionId) => post("/v1/locks/wave%2Fwarm/acquire", { sessionId, ttlMillis: 1000, waitMillis: 0 })));
  const out = [];
  for (let w = 0; w < waves; w++) {
    const path = `/v1/locks/${encodeURIComponent(`wave/node/${w}`)}/acquire`;
    const t0 = performance.now();
    const answered = [];
    const calls = ids.map((sessionId, i) =>
      post(path, { sessionId, ttlMillis: 1000, waitMillis: 0 }).then(() => {
        answered[i] = performance.now() - t0;
      }));
    const issued = performance.now() - t0;
    await Promise.all(calls);
    out.push({ issued, first: Math.min(...answered), last: Math.max(...answered) });
    await new Promise((r) => setTimeout(r, 200));
  }
  agent.destroy();
  return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function report(name, rows) {
  for (const r of rows) console.log(`${name}: issued in ${r.issued.toFixed(1)} ms, answers ${r.first.toFixed(1)}–${r.last.toFixed(1)} ms (spread ${(r.last - r.first).toFixed(1)} ms)`);
  const m = (f) => median(rows.map(f)).toFixed(1);
  return `| ${name} | ${m((r) => r.issued)} | ${m((r) => r.first)} | ${m((r) => r.last)} | ${m((r) => r.last - r.first)} |`;
}

try {
  const base = await waitFor("the server's listening line", async () => listeningUrl(log));
  const { protocol, result } = await browserWaves(base);
  const table = [report(`Chromium worker, fetch (${protocol})`, result), report("Node, node:https (HTTP/1.1)", await nodeWaves(base))];
  console.log(`\nN = ${n}, ${waves} waves, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}; medians, ms from the wave's start`);
  console.log("| client | all issued | first answer | last answer | answers spread over |");
  console.log("|---|---|---|---|---|");
  for (const row of table) console.log(row);
} finally {
  await stopServer(server);
  rmSync(scratch, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
