// Smoke test of the run command as the README gives it: `scripts/run.sh`, configured only
// through its environment (LOCK_LISTEN with port 0, so the server picks a free port and names
// it in its `listening` line; LOCK_DATA_DIR in a temp dir, never the repo's ./data), driven
// from the outside. scripts/test-run.sh runs it under a PATH without the test set-up's tools.
//
//   node tests/browser/run-smoke.mjs --work DIR
//
// Checks, in order:
// - run.sh ends in `exec`: its process becomes lock-server, so signals reach the server;
// - /healthz answers; the served wasm is the optimised build (under 1,500 KB), sent as Brotli
//   or gzip by Accept-Encoding and revalidated with a 304; the dashboard mounts in headless
//   Chromium, and that first visit transferred at most 300 KB (as the browser counted it),
//   without the experiment engine, which the first job fetches; the page names an icon that
//   is served, loads nothing that fails, and a small experiment runs to the end without error;
// - SIGINT: the server exits 0 within 10 s and logs a clean stop;
// - the next start over the same data dir is clean. Between the two starts the boot id is
//   changed (a faked reboot: after an unclean stop, grants would then be held back with
//   503 NOT_LEADER), yet the restarted server logs a clean open and grants an acquire at
//   once, with a fencing token above the last one granted before the stop;
// - `LOCK_TLS=self-signed scripts/run.sh` (the documented way to run over TLS) serves https
//   with the certificate it made in the data dir and announced: /healthz answers a client
//   that trusts only that file; SIGINT stops it cleanly.
// Exits non-zero on any failure, printing the end of run.sh's output.
import { spawn } from "node:child_process";
import { openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checker, flags, launchChromium, readCounter, watchConsole } from "./harness.mjs";

const args = flags();
if (!args.work) {
  console.error("usage: node tests/browser/run-smoke.mjs --work DIR");
  process.exit(2);
}
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const work = resolve(args.work);
const dataDir = join(work, "data");
const bootIdFile = join(work, "boot-id");
const SESSIONS = 3;
const ROUNDS = 2; // the form's default
// wasm-opt -Oz brings the release page's wasm from about 1,440 KB to about 720 KB (the
// experiment engine is a module of its own): a limit between the two tells them apart.
const WASM_LIMIT_KB = 1000;
// What a first visit may transfer, compressed, as the browser counts it (the page, its
// stylesheet and icon, the page's wasm and JS): 222 KB measured (docs/BENCHMARKS.md,
// "bench-ui").
const FIRST_LOAD_LIMIT_KB = 300;
// The engine's files, fetched by the worker (or the page) at the first job.
const ENGINE_DIR = "pkg/engine/";
const STOP_LIMIT_MS = 10_000;
// A first start builds everything in release: on a fresh 2-core machine that takes a while.
const START_LIMIT_MS = 25 * 60_000;

const { failures, check } = checker();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const runs = [];

// One start of scripts/run.sh; its whole output (set-up, builds, server log) goes to `log`.
// It leads a process group of its own, so that a failed run can be killed with whatever it
// started (a build, a server left behind by a missing `exec`).
function startRun(name, extraEnv = {}) {
  const log = join(work, `${name.replace(/\W+/g, "-")}.log`);
  const fd = openSync(log, "w");
  const child = spawn("scripts/run.sh", [], {
    cwd: root,
    detached: true,
    stdio: ["ignore", fd, fd],
    env: { ...process.env, LOCK_LISTEN: "127.0.0.1:0", LOCK_DATA_DIR: dataDir, LOCK_BOOT_ID_PATH: bootIdFile, ...extraEnv },
  });
  const run = { name, log, child, status: null };
  run.exited = new Promise((r) => child.once("exit", (code, signal) => r((run.status = { code, signal }))));
  runs.push(run);
  return run;
}

function killAll() {
  for (const run of runs) {
    try {
      process.kill(-run.child.pid, "SIGKILL");
    } catch {
      // the group is gone already
    }
  }
}
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAll();
    process.exit(1);
  });
}

// The JSON lines of the server's log (one flat object per event, C4), among run.sh's other
// output.
function events(run) {
  return readFileSync(run.log, "utf8")
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line)];
      } catch {
        return [];
      }
    });
}

async function listening(run) {
  const started = Date.now();
  while (Date.now() - started < START_LIMIT_MS) {
    const line = events(run).find((e) => e.event === "listening");
    if (line) {
      console.log(`${run.name}: listening on ${line.addr} after ${((Date.now() - started) / 1000).toFixed(0)} s`);
      return `${line.scheme ?? "http"}://${line.addr}`;
    }
    if (run.status) throw new Error(`${run.name}: scripts/run.sh exited (${JSON.stringify(run.status)}) before the server listened`);
    await sleep(250);
  }
  throw new Error(`${run.name}: no "listening" line within ${START_LIMIT_MS / 60_000} min`);
}

function checkExec(run) {
  let exe = "(gone)";
  try {
    exe = readlinkSync(`/proc/${run.child.pid}/exe`);
  } catch {
    // the process is gone: the check fails below
  }
  check(exe.endsWith("/lock-server"), `${run.name}: scripts/run.sh's process is lock-server itself (exec), so signals reach it (${exe})`);
}

async function checkServed(base) {
  const health = await fetch(`${base}/healthz`);
  check(health.ok, `/healthz answers ${health.status}`);
  const wasm = await fetch(`${base}/pkg/bench_ui_bg.wasm`);
  const kb = (await wasm.arrayBuffer()).byteLength / 1024;
  check(wasm.ok && kb < WASM_LIMIT_KB, `the served dashboard wasm is the optimised build (${kb.toFixed(0)} KB, limit ${WASM_LIMIT_KB} KB)`);
  await checkCompressed(base);
}

// One GET over plain HTTP with `headers`, the body as sent (node's fetch would decompress it).
function rawGet(url, headers) {
  return new Promise((done, fail) => {
    httpGet(url, { headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => done({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on("error", fail);
  });
}

// The static files are served like a web app: Brotli or gzip by Accept-Encoding (made at
// build time, decompressing to the built file), revalidated with a 304, and a first visit
// within FIRST_LOAD_LIMIT_KB.
async function checkCompressed(base) {
  const built = readFileSync(join(root, "www/pkg/bench_ui_bg.wasm"));
  const url = `${base}/pkg/bench_ui_bg.wasm`;
  const br = await rawGet(url, { "accept-encoding": "br, gzip" });
  const brOk = br.headers["content-encoding"] === "br" && brotliDecompressSync(br.body).equals(built);
  check(br.status === 200 && brOk, `Accept-Encoding: br, gzip gets the wasm as Brotli that decompresses to the built file (${br.status} ${br.headers["content-encoding"] ?? "identity"}, ${(br.body.length / 1024).toFixed(0)} KB of ${(built.length / 1024).toFixed(0)} KB)`);
  check(/accept-encoding/i.test(br.headers.vary ?? "") && br.headers["cache-control"] === "no-cache", `the answer varies by Accept-Encoding and is revalidated (vary: ${br.headers.vary}, cache-control: ${br.headers["cache-control"]})`);
  const gz = await rawGet(url, { "accept-encoding": "gzip" });
  const gzOk = gz.headers["content-encoding"] === "gzip" && gunzipSync(gz.body).equals(built);
  check(gz.status === 200 && gzOk, `Accept-Encoding: gzip gets gzip that decompresses to the built file (${gz.status} ${gz.headers["content-encoding"] ?? "identity"})`);
  const plain = await rawGet(url, {});
  check(plain.status === 200 && !plain.headers["content-encoding"] && plain.body.equals(built), `no Accept-Encoding gets the file itself (${plain.status} ${plain.headers["content-encoding"] ?? "identity"})`);
  const since = br.headers["last-modified"];
  const again = await rawGet(url, { "accept-encoding": "br, gzip", "if-modified-since": since ?? "" });
  check(since && again.status === 304 && again.body.length === 0, `a reload only revalidates: If-Modified-Since gets 304 with no body (last-modified ${since}: ${again.status})`);
  let engine = 0;
  for (const file of readdirSync(join(root, "www", ENGINE_DIR), { recursive: true }).filter((f) => /\.(wasm|js)$/.test(f))) {
    engine += (await rawGet(`${base}/${ENGINE_DIR}${file}`, { "accept-encoding": "br, gzip" })).body.length;
  }
  console.log(`the experiment engine (${ENGINE_DIR}, fetched at the first job) transfers ${(engine / 1024).toFixed(0)} KB`);
}

// What the first visit (a fresh profile) transferred until the dashboard mounted, compressed
// bodies as the browser counted them: within FIRST_LOAD_LIMIT_KB, and not the engine.
async function checkFirstVisit(page) {
  const loads = await page.evaluate(() =>
    [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
      .map((e) => ({ path: new URL(e.name).pathname, bytes: e.encodedBodySize })));
  const total = loads.reduce((sum, l) => sum + l.bytes, 0);
  const files = loads.map((l) => `${l.path} ${(l.bytes / 1024).toFixed(1)} KB`).join(", ");
  check(loads.some((l) => l.path.endsWith("/bench_ui_bg.wasm")) && total <= FIRST_LOAD_LIMIT_KB * 1024, `a first visit transfers ${(total / 1024).toFixed(0)} KB (${files}), limit ${FIRST_LOAD_LIMIT_KB} KB`);
  check(!loads.some((l) => l.path.includes(`/${ENGINE_DIR}`)), "a first visit does not fetch the experiment engine");
}

// Loads the dashboard, checks it mounted with its icon, runs a small experiment.
async function checkDashboard(base) {
  const { context, page } = await launchChromium(join(work, "profile"));
  try {
    const consoleErrors = watchConsole(page);
    // Answers of the API (409 contended, ...) are the experiment's data; anything else the
    // page loads must succeed.
    const failedLoads = [];
    const isPageAsset = (url) => !new URL(url).pathname.startsWith("/v1/");
    page.on("response", (r) => r.status() >= 400 && isPageAsset(r.url()) && failedLoads.push(`${r.status()} ${r.url()}`));
    page.on("requestfailed", (r) => isPageAsset(r.url()) && failedLoads.push(`${r.failure()?.errorText} ${r.url()}`));

    await page.goto(`${base}/`);
    await page.waitForSelector("[data-testid=run]", { timeout: 30_000 });
    console.log("ok   the dashboard mounted");
    await checkFirstVisit(page);
    const icon = await page.$eval("link[rel=icon]", (l) => l.href).catch(() => null);
    const iconAnswer = icon ? await fetch(icon) : null;
    const iconType = iconAnswer?.headers.get("content-type") ?? "";
    check(iconAnswer?.ok && iconType.startsWith("image/"), `the page names an icon that is served (${icon ?? "no <link rel=icon>"}: ${iconAnswer?.status ?? "-"} ${iconType})`);

    await page.fill("[data-testid=field-sessions]", String(SESSIONS));
    await page.click("[data-testid=run]");
    await page.waitForSelector("svg[data-testid=timeline] rect.hold:not(.swatch)", { timeout: 60_000 });
    await page.waitForSelector("[data-testid=status][data-state=idle]", { state: "attached", timeout: 120_000 });
    const grants = await readCounter(page, "grants");
    const gaveUp = await readCounter(page, "gave-up");
    const errors = await readCounter(page, "errors");
    check(grants > 0 && grants + gaveUp === SESSIONS * ROUNDS && errors === 0, `a ${SESSIONS}-session experiment ran to the end (${grants} granted, ${gaveUp} gave up, ${errors} errors)`);
    const banner = await page.$("[data-testid=error]");
    check(!banner, `no error banner${banner ? ` (shown: ${await banner.textContent()})` : ""}`);
    check(failedLoads.length === 0, `nothing the page loads fails (${failedLoads.join(" | ") || "none"})`);
    check(consoleErrors.length === 0, `no console errors (${consoleErrors.join(" | ") || "none"})`);
  } finally {
    await context.close().catch(() => {});
  }
}

// L1 open a session, L4 acquire `key`, L3 close the session (releasing the lock). Returns
// the fencing token, or 0 when the acquire was refused.
async function acquireOnce(base, key, what) {
  const post = (path, body) =>
    fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const { sessionId, holderId } = await (await post("/v1/sessions", {})).json();
  const answer = await post(`/v1/locks/${encodeURIComponent(key)}/acquire`, { sessionId });
  const body = await answer.json();
  check(answer.status === 200, `${what}: an acquire is granted (${answer.status}${body.code ? ` ${body.code}` : ""})`);
  await fetch(`${base}/v1/sessions/${holderId}`, { method: "DELETE", headers: { "lock-session-id": sessionId } });
  return answer.status === 200 ? body.fencingToken : 0;
}

// The status of GET `url` from a client that trusts only the certificate in `caFile`.
function statusTrusting(url, caFile) {
  return new Promise((res) => {
    httpsGet(url, { ca: readFileSync(caFile) }, (r) => {
      r.resume();
      res(r.statusCode);
    }).on("error", (e) => res(e.message));
  });
}

async function stop(run) {
  const sent = Date.now();
  run.child.kill("SIGINT");
  const status = await Promise.race([run.exited, sleep(STOP_LIMIT_MS).then(() => null)]);
  const took = `${((Date.now() - sent) / 1000).toFixed(1)} s`;
  if (!status) {
    process.kill(-run.child.pid, "SIGKILL");
    await run.exited;
  }
  check(status?.code === 0, `${run.name}: SIGINT stops the server with exit 0 within ${STOP_LIMIT_MS / 1000} s (${status ? `${JSON.stringify(status)} after ${took}` : "still running"})`);
  const stopped = events(run).find((e) => e.event === "stopped");
  check(stopped?.clean === true, `${run.name}: the server logged a clean stop`);
}

try {
  writeFileSync(bootIdFile, "run-smoke-boot-a\n");
  const first = startRun("first start");
  const base = await listening(first);
  checkExec(first);
  await checkServed(base);
  await checkDashboard(base);
  const before = await acquireOnce(base, "run-smoke", "first start");
  await stop(first);

  // A faked reboot: were the stop unclean, this start would hold grants back.
  writeFileSync(bootIdFile, "run-smoke-boot-b\n");
  const second = startRun("second start");
  const base2 = await listening(second);
  const opened = events(second).find((e) => e.event === "store_opened");
  check(opened?.clean === true && opened?.holdback_until_millis === 0, `second start: the data dir opened clean (clean=${opened?.clean}, holdback_until_millis=${opened?.holdback_until_millis})`);
  const after = await acquireOnce(base2, "run-smoke", "second start, right after the restart");
  check(after > before, `the fencing token went on increasing across the restart (${before} then ${after})`);
  await stop(second);

  const tls = startRun("TLS start", { LOCK_TLS: "self-signed" });
  const base3 = await listening(tls);
  const made = events(tls).find((e) => e.event === "tls_self_signed");
  const cert = join(dataDir, "self-signed-cert.pem");
  check(base3.startsWith("https://") && made?.cert === cert && /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/.test(made?.sha256 ?? ""), `LOCK_TLS=self-signed: https with the certificate made in the data dir, path and fingerprint announced (${base3}, ${made?.cert}, ${made?.sha256})`);
  const health = await statusTrusting(`${base3}/healthz`, cert);
  check(health === 200, `LOCK_TLS=self-signed: /healthz answers a client trusting only that certificate (${health})`);
  await stop(tls);
} catch (err) {
  failures.push(String(err?.stack ?? err));
  console.error(err);
} finally {
  killAll();
  await Promise.all(runs.map((run) => run.exited));
}
if (failures.length) {
  for (const run of runs) {
    const lines = readFileSync(run.log, "utf8").trimEnd().split("\n");
    console.error(`\n--- ${run.name}: last lines of scripts/run.sh's output\n${lines.slice(-40).join("\n")}`);
  }
  console.error(`run smoke: ${failures.length} failure(s)`);
  process.exit(1);
}
console.log("run smoke: all checks passed");
