// End-to-end test of the dashboard: a real lock-server (fresh temp data dir) serving the
// built www/ with --web-root, driven by headless Chromium through playwright-core.
//
//   node tests/browser/e2e.mjs --server target/debug/lock-server --web-root www \
//        [--screenshot target/bench-ui-e2e.png]
//
// The server has an auth file with one client, `dashboard`, whose keys start with `bench/`.
// A first Run without a token must end in the error banner (401); then the token goes into
// the token field and a 10-session experiment runs with full jitter. Checks: the histogram
// and the timeline rendered with non-zero data; the timeline is drawn from the L8 event
// stream, which showed every grant the contenders recorded, with no overlap (nor in L7's
// samples beside it), and the holds the samples missed are counted; no ledger
// write was FENCED_OUT (every grant's write was accepted, in token order, as the server's
// ledger confirms); no error banner, no page error, no panic in the console; the token is
// nowhere but in the page's memory (not in the URL, web storage or cookies); the run ran in
// the experiment worker (www/worker.js, served as JavaScript), and without workers (none in
// the page's global) on the page, through the engine module it imports; the page names
// HTTP/1.1 and warns that 10 contenders over 6 browser connections distort the figures (the
// sweep over HTTP/2 is tests/browser/sweep.mjs). Then the same with the server queue
// (waitMillis): one L4 call per grant, grants in the order asked (no overtake), the key held
// nearly all the time (L7 utilisation ≥ 0.9), the fairness panel drawn, the stream again
// the source and complete. Then a mixed run on
// the queue: 80 % readers (shared holds) on the one key, a semaphore of 3 permits, the rest
// writers: no overlap that must not happen (an exclusive hold beside another, or more than 3
// shared holds), in L7 or among the client's own holds; some shared holds seen overlapping;
// readers' and writers' waits drawn; the ledger written by the writers alone. Saves a
// screenshot and prints its path. Exits non-zero on any failure.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { checker, finish, flags, launchChromium, readCounter, stopServer, waitFor, watchConsole } from "./harness.mjs";

const args = flags();
const serverBin = resolve(args.server ?? "target/debug/lock-server");
const webRoot = resolve(args["web-root"] ?? "www");
const screenshot = resolve(args.screenshot ?? "target/bench-ui-e2e.png");
const SESSIONS = 10;
const ROUNDS = 2; // the form's default
const READER_PERCENT = 80; // 8 of the 10 contenders
const PERMITS = 3;

const { failures, check } = checker();

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

// The ledger itself, read from the server: one accepted entry per grant, tokens in order.
async function checkLedger(page, grants) {
  const runId = await page.getAttribute("[data-testid=status]", "data-run-id");
  const key = encodeURIComponent(`bench/${runId}/k0`);
  const auth = { headers: { authorization: `Bearer ${token}` } };
  const ledger = await (await fetch(`${base}/v1/demo/ledger/${key}`, auth)).json();
  const tokens = (ledger.entries ?? []).map((e) => e.fencingToken);
  check(tokens.length === grants, `the ledger holds one entry per grant (${tokens.length})`);
  check(tokens.every((t, i) => i === 0 || t >= tokens[i - 1]), "ledger tokens never go backwards");
}

// The timeline of the last run is drawn from the L8 stream, which showed every grant the
// contenders recorded (`grants`, their own count) and nothing that must not happen.
async function checkStream(page, label, grants) {
  const t = await page.$eval("[data-testid=timeline-verdict]", (p) => ({ ...p.dataset }));
  const missed = await readCounter(page, "missed-by-sampling");
  console.log(`${label}: stream ${t.holds} holds, ${t.missedBySampling} missed by sampling (counter ${missed}), ${t.gaps} gaps, ${t.overlaps} overlaps (L7: ${t.sampleOverlaps})`);
  check(t.source === "stream", `${label}: the timeline is drawn from the event stream (source ${t.source})`);
  check(t.grantsUnseen === "0", `${label}: the stream showed every grant the contenders recorded (${t.grantsUnseen} unseen)`);
  check(Number(t.holds) >= grants, `${label}: the stream has a bar for each of the ${grants} grants (${t.holds})`);
  check(t.overlaps === "0" && t.sampleOverlaps === "0", `${label}: no overlap in the stream nor in L7 (${t.overlaps}, ${t.sampleOverlaps})`);
  check(String(missed) === t.missedBySampling, `${label}: the counters show what sampling missed (${missed})`);
  const drawn = await page.$eval("svg[data-testid=timeline]", (svg) => svg.textContent);
  check(/L8 event stream/.test(drawn), `${label}: the chart names its source`);
}

// What the fairness panel says about the last run.
async function fairness(page) {
  const panel = await page.$eval("[data-testid=fairness]", (p) => ({
    text: p.textContent,
    utilisationClient: Number(p.dataset.utilisationClient),
    utilisationL7: Number(p.dataset.utilisationL7),
    overtakes: Number(p.dataset.overtakes),
  }));
  panel.bars = await page.$$eval("svg[data-testid=waits] rect.wait-max:not(.swatch)", (rs) => rs.length);
  return panel;
}

const scratch = mkdtempSync(join(tmpdir(), "bench-ui-e2e-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const log = join(scratch, "server.log");
const logFd = openSync(log, "w");
// The dashboard's client of the auth file; the hash comes from `lock-server hash-token`.
const token = randomBytes(16).toString("hex");
const hashed = spawnSync(serverBin, ["hash-token"], { input: `${token}\n`, encoding: "utf8" });
if (hashed.status !== 0) throw new Error(`hash-token failed: ${hashed.stderr}`);
const authFile = join(scratch, "auth.json");
writeFileSync(
  authFile,
  JSON.stringify({ clients: [{ name: "dashboard", tokenSha256: hashed.stdout.trim(), keyPrefixes: ["bench/"] }] }),
);
const server = spawn(
  serverBin,
  [
    "--listen", `127.0.0.1:${port}`,
    "--data-dir", join(scratch, "data"),
    "--web-root", webRoot,
    "--auth-file", authFile,
  ],
  { stdio: ["ignore", logFd, logFd] },
);
let browser;
try {
  await waitFor("the server to serve the dashboard", async () => {
    const r = await fetch(`${base}/`);
    return r.ok && (await r.text()).includes("bench_ui.js");
  });
  const launched = await launchChromium(join(scratch, "profile"));
  browser = launched.context;
  const page = launched.page;
  const consoleErrors = watchConsole(page);

  await page.goto(`${base}/`);
  await page.waitForSelector("[data-testid=run]", { timeout: 30_000 });
  // Timings for docs/BENCHMARKS.md ("time to first plot"); reported, never asserted.
  const mountedAt = await page.evaluate(() => performance.now());
  // Without the token the server refuses the run's first request: the banner says so.
  await page.click("[data-testid=run]");
  const refused = await page.waitForSelector("[data-testid=error]", { timeout: 60_000 });
  const refusal = await refused.textContent();
  check(/unauthorized/i.test(refusal), `a run without the token is refused (${refusal})`);
  await page.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 60_000 });
  await page.fill("[data-testid=field-token]", token);
  await page.fill("[data-testid=field-sessions]", String(SESSIONS));
  const clickedAt = await page.evaluate(() => performance.now());
  await page.click("[data-testid=run]");
  await page.waitForSelector("svg[data-testid=timeline] rect.hold:not(.swatch)", { timeout: 60_000 });
  const firstPlotAt = await page.evaluate(() => performance.now());
  await page.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 120_000 });
  const doneAt = await page.evaluate(() => performance.now());
  console.log(
    `timing: dashboard mounted ${mountedAt.toFixed(0)} ms after navigation; first plot ` +
      `${(firstPlotAt - clickedAt).toFixed(0)} ms after Run; run finished ${(doneAt - clickedAt).toFixed(0)} ms after Run`,
  );

  const counter = (id) => readCounter(page, id);
  const grants = await counter("grants");
  const gaveUp = await counter("gave-up");
  const errors = await counter("errors");
  console.log(`run: grants ${grants}, L4 calls ${await counter("L4-calls")}, 409s ${await counter("409-contended")}, gave up ${gaveUp}, errors ${errors}`);
  check(grants > 0 && grants + gaveUp === SESSIONS * ROUNDS && errors === 0, `every acquisition finished without error (${grants} granted, ${gaveUp} gave up)`);
  check((await counter("fenced-out-writes")) === 0, "no ledger write was FENCED_OUT");
  check((await counter("lost-locks")) === 0, "no lock was lost");
  const banner = await page.$("[data-testid=error]");
  check(!banner, `no error banner${banner ? ` (shown: ${await banner.textContent()})` : ""}`);
  // Off the page's main thread: the run went to the experiment worker (www/worker.js, a
  // module worker, which the server must serve as JavaScript).
  const host = await page.getAttribute("[data-testid=status]", "data-host");
  check(host === "worker", `the run ran in the experiment worker (data-host ${host})`);
  const workerType = (await fetch(`${base}/worker.js`)).headers.get("content-type");
  check(/javascript/.test(workerType ?? ""), `worker.js is served as JavaScript (${workerType})`);
  // Plain HTTP: the browser speaks HTTP/1.1, and 10 sessions are more than its 6 connections.
  const protocol = await page.getAttribute("[data-testid=protocol]", "data-protocol");
  check(protocol === "HTTP/1.1", `the dashboard names the protocol of its requests (${protocol})`);
  const warning = await page.$("[data-testid=protocol-warning]");
  const warned = warning ? await warning.textContent() : "";
  check(/at most 6/.test(warned) && /LOCK_TLS=self-signed/.test(warned), `the 6-connection warning says why and what to do (${warned.slice(0, 60)}…)`);

  const bars = await page.$$eval("svg[data-testid=histogram] rect.bar:not(.swatch)", (rs) => rs.map((r) => Number(r.getAttribute("height"))));
  check(bars.length > 0 && bars.some((h) => h > 0), `histogram has bars with data (${bars.filter((h) => h > 0).length} non-empty bins)`);
  check((await page.$$("svg[data-testid=histogram] polyline.expect")).length === 1, "histogram shows the uniform expectation");
  const holds = await page.$$eval("svg[data-testid=timeline] rect.hold:not(.swatch)", (rs) => rs.length);
  check(holds > 0, `timeline has hold bars (${holds})`);
  const verdict = await page.$eval("[data-testid=timeline-verdict]", (p) => ({ overlaps: p.dataset.overlaps, text: p.textContent }));
  console.log(`timeline: ${verdict.text}`);
  check(verdict.overlaps === "0", "the L7 timeline shows no overlap");
  check((await page.$$("svg[data-testid=timeline] rect.overlap:not(.swatch)")).length === 0, "no red overlap drawn");

  await checkLedger(page, grants);
  await checkStream(page, "full jitter", grants);
  const jitter = await fairness(page);
  console.log(`full jitter: ${jitter.text}`);

  // The server queue: the same run, every L4 waiting in the key's queue.
  await page.selectOption("[data-testid=field-strategy]", "queue");
  await page.click("[data-testid=run]");
  await page.waitForSelector("[data-testid=status][data-state=running]", { state: "attached", timeout: 30_000 });
  await page.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 120_000 });
  const queued = await counter("grants");
  const calls = await counter("L4-calls");
  console.log(`queue run: grants ${queued}, L4 calls ${calls}, gave up ${await counter("gave-up")}, errors ${await counter("errors")}`);
  check(queued === SESSIONS * ROUNDS && (await counter("errors")) === 0, `queue: every acquisition granted (${queued})`);
  check(calls === queued, `queue: one L4 call per grant (${calls} calls)`);
  const queue = await fairness(page);
  console.log(`queue: ${queue.text}`);
  check(queue.overtakes === 0, `queue: grants in the order asked (${queue.overtakes} overtakes)`);
  check(queue.utilisationL7 >= 0.9, `queue: the key held ≥ 90 % of the run by L7 (${queue.utilisationL7})`);
  check(queue.bars > 0, `queue: the waits chart has bars (${queue.bars})`);
  console.log(`utilisation by the client's holds: full jitter ${jitter.utilisationClient}, queue ${queue.utilisationClient}`);
  await checkLedger(page, queued);
  await checkStream(page, "queue", queued);

  // Shared holds: readers and writers on the one key, the readers a semaphore of PERMITS.
  await page.fill("[data-testid=field-readerPercent]", String(READER_PERCENT));
  await page.fill("[data-testid=field-semaphoreLimit]", String(PERMITS));
  await page.fill("[data-testid=field-holdMillis]", "100");
  await page.click("[data-testid=run]");
  await page.waitForSelector("[data-testid=status][data-state=running]", { state: "attached", timeout: 30_000 });
  await page.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 120_000 });
  const mixedGrants = await counter("grants");
  console.log(`mixed run: grants ${mixedGrants}, L4 calls ${await counter("L4-calls")}, gave up ${await counter("gave-up")}, errors ${await counter("errors")}`);
  const mixedBanner = await page.$("[data-testid=error]");
  check(!mixedBanner, `mixed: no error banner${mixedBanner ? ` (shown: ${await mixedBanner.textContent()})` : ""}`);
  check(mixedGrants === SESSIONS * ROUNDS && (await counter("errors")) === 0, `mixed: every acquisition granted (${mixedGrants})`);
  check((await counter("fenced-out-writes")) === 0 && (await counter("lost-locks")) === 0, "mixed: nothing fenced out, no lock lost");
  const mixed = await page.$eval("[data-testid=timeline-verdict]", (p) => ({ ...p.dataset, text: p.textContent }));
  console.log(`mixed timeline: ${mixed.text}`);
  check(mixed.overlaps === "0", `mixed: no overlap that must not happen in L7 (${mixed.overlaps})`);
  check(mixed.clientOverlaps === "0", `mixed: none among the client's own holds (${mixed.clientOverlaps})`);
  const peak = Number(mixed.peakShared);
  await checkStream(page, "mixed", mixedGrants);
  check(peak >= 2, `mixed: shared holds seen overlapping (up to ${peak} at once)`);
  check(peak <= PERMITS, `mixed: never more shared holds than the ${PERMITS} permits (${peak})`);
  const sharedBars = await page.$$eval("svg[data-testid=timeline] rect.hold.shared:not(.swatch)", (rs) => rs.length);
  const exclusiveBars = await page.$$eval("svg[data-testid=timeline] rect.hold:not(.shared):not(.swatch)", (rs) => rs.length);
  check(sharedBars > 0 && exclusiveBars > 0, `mixed: shared and exclusive holds drawn apart (${sharedBars} shared, ${exclusiveBars} exclusive)`);
  const busiest = Number(await page.getAttribute("[data-testid=concurrency-verdict]", "data-peak-busiest"));
  check(busiest >= 2 && busiest <= PERMITS, `mixed: the concurrency plot's busiest key within the permits (${busiest})`);
  check((await page.$$("svg[data-testid=concurrency] polyline.conc-limit")).length === 1, "mixed: the permits drawn on the concurrency plot");
  const waits = await page.$eval("[data-testid=mode-waits]", (p) => ({ ...p.dataset, text: p.innerText }));
  console.log(`mixed waits: ${waits.text.replace(/\s+/g, " ")}`);
  const readerGrants = (SESSIONS * READER_PERCENT / 100) * ROUNDS;
  check(Number(waits.readers) === readerGrants, `mixed: ${readerGrants} shared grants (${waits.readers})`);
  const writerGrants = SESSIONS * ROUNDS - readerGrants;
  check(Number(waits.writers) === writerGrants, `mixed: ${writerGrants} exclusive grants (${waits.writers})`);
  const waitBars = await page.$$eval("svg[data-testid=mode-waits-chart] rect.wait-writers:not(.swatch)", (rs) => rs.length);
  check(waitBars > 0, `mixed: the writers' waits drawn beside the readers' (${waitBars} bins)`);
  // Readers write nothing: the ledger holds the writers' entries alone, in token order.
  await checkLedger(page, writerGrants);

  // The token lives in the page's memory only.
  const kept = await page.evaluate(() =>
    [location.href, document.cookie, JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage })].join(" "),
  );
  check(!kept.includes(token), "the token is not in the URL, cookies or web storage");

  check(!consoleErrors.some((e) => /panic/i.test(e)), "no panic in the console");
  check(consoleErrors.length === 0, `no console errors (${consoleErrors.join(" | ") || "none"})`);
  await page.screenshot({ path: screenshot, fullPage: true });

  // A browser without module workers: the page imports the experiment engine itself.
  const noWorker = await browser.newPage();
  const noWorkerErrors = watchConsole(noWorker);
  await noWorker.addInitScript(() => delete window.Worker);
  await noWorker.goto(`${base}/`);
  await noWorker.waitForSelector("[data-testid=run]", { timeout: 30_000 });
  await noWorker.fill("[data-testid=field-token]", token);
  await noWorker.fill("[data-testid=field-sessions]", "3");
  await noWorker.click("[data-testid=run]");
  await noWorker.waitForSelector("[data-testid=status][data-state=running]", { state: "attached", timeout: 30_000 });
  await noWorker.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 120_000 });
  const onPage = await noWorker.getAttribute("[data-testid=status]", "data-host");
  const pageGrants = await readCounter(noWorker, "grants");
  const pageErrors = await readCounter(noWorker, "errors");
  check(onPage === "page" && pageGrants === 3 * ROUNDS && pageErrors === 0, `without workers the run ran on the page, through the engine module (data-host ${onPage}, ${pageGrants} granted, ${pageErrors} errors)`);
  check(noWorkerErrors.length === 0, `without workers: no console errors (${noWorkerErrors.join(" | ") || "none"})`);
  console.log(`screenshot: ${screenshot}`);
} catch (err) {
  failures.push(String(err?.stack ?? err));
  console.error(err);
} finally {
  await browser?.close().catch(() => {});
  await stopServer(server);
}
finish("bench-ui e2e", failures, log, scratch);
