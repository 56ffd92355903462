// What the browser suites share: flags, a check list, polling, headless Chromium through
// playwright-core, the page's console errors and the dashboard's counters.
import { readFileSync, rmSync } from "node:fs";
import { chromium } from "playwright-core";

import { CHROMIUM_FLAGS, chromiumBinary, launchBare, watchPageErrors } from "./cdp.mjs";

// `--name value` pairs of the command line, as an object.
export function flags(argv = process.argv.slice(2)) {
  return Object.fromEntries(argv.flatMap((a, i) => (a.startsWith("--") ? [[a.slice(2), argv[i + 1]]] : [])));
}

// Each check prints one line; `failures` collects what did not hold.
export function checker() {
  const failures = [];
  const check = (ok, what) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
    if (!ok) failures.push(what);
  };
  return { failures, check };
}

// The base URL from a lock-server's `listening` line (C4) in its log file, or null before it.
export function listeningUrl(logPath) {
  for (const line of readFileSync(logPath, "utf8").split("\n")) {
    try {
      const event = JSON.parse(line);
      if (event.event === "listening") return `${event.scheme}://${event.addr}`;
    } catch {
      // not a JSON line
    }
  }
  return null;
}

// Stops a lock-server child with SIGTERM and resolves once it has exited (it removes its
// SQLite side files as it stops, so its data dir can be removed only after).
export async function stopServer(proc) {
  const exited = new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once("exit", r)));
  proc.kill("SIGTERM");
  await exited;
}

export async function waitFor(what, fn, { tries = 300, everyMs = 100 } = {}) {
  for (let i = 0; i < tries; i++) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Headless Chromium with a fresh profile in `profileDir`, with the flags it needs as root.
// `ignoreHTTPSErrors` accepts a test server's self-signed certificate.
export async function launchChromium(profileDir, { viewport = { width: 1360, height: 1500 }, ignoreHTTPSErrors = false } = {}) {
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: chromiumBinary(),
    headless: true,
    viewport,
    ignoreHTTPSErrors,
    args: CHROMIUM_FLAGS,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return { context, page };
}

// The page's console errors and uncaught errors, collected as they happen. Chromium logs
// every non-2xx fetch ("Failed to load resource: ... 409"): contention answers are the
// experiment's data, not errors of the page, so those lines are skipped.
export function watchConsole(page) {
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

// The value of one of the dashboard's counters (`data-testid=counter-<id>`).
export async function readCounter(page, id) {
  return Number(await page.textContent(`[data-testid=counter-${id}] .value`));
}

// Ends a browser test: on failures, the server log's last lines and exit 1; else the scratch
// dir removed (Chromium may still be writing its profile just after it closed: retried; a dir
// left behind is not a failure of the test) and `what`'s success line.
export function finish(what, failures, log, scratch) {
  if (failures.length) {
    console.error(`--- server log (last lines)\n${readFileSync(log, "utf8").trimEnd().split("\n").slice(-20).join("\n")}`);
    console.error(`${what}: ${failures.length} failure(s)`);
    process.exit(1);
  }
  try {
    rmSync(scratch, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (err) {
    console.warn(`scratch dir ${scratch} left behind: ${err.message}`);
  }
  console.log(`${what}: all checks passed`);
}

// Keeps every Blob the page offers for download, so an export's file can be read back
// (evaluate it in the page before the page's own scripts run).
export const KEEP_DOWNLOADS = `window.__downloads = [];
{ const create = URL.createObjectURL; URL.createObjectURL = (blob) => { window.__downloads.push(blob); return create.call(URL, blob); }; }`;

// A bare DevTools page (cdp.mjs; TLS errors ignored, for --tls-self-signed) that keeps its
// downloads (KEEP_DOWNLOADS), with its console errors collected.
export async function launchKeepingDownloads(profileDir) {
  const page = await launchBare(profileDir, { ignoreHTTPSErrors: true });
  const consoleErrors = await watchPageErrors(page);
  await page.send("Page.enable");
  await page.send("Page.addScriptToEvaluateOnNewDocument", { source: KEEP_DOWNLOADS });
  return { page, consoleErrors };
}

// The dashboard as a test drives it, by `data-testid`, through `page.evaluate` (a bare
// DevTools page or playwright's): fields set as typing would, clicks, reads, and `until`
// polling every `everyMs`.
export function pageDriver(page, everyMs) {
  const q = (testid) => `document.querySelector(${JSON.stringify(`[data-testid=${testid}]`)})`;
  return {
    q,
    // Waits (polling) until `ready()` resolves truthy.
    until: (what, ready, timeoutMs) => waitFor(what, ready, { tries: Math.ceil(timeoutMs / everyMs), everyMs }),
    // Sets a form field as typing would (the form listens to input events).
    fill: (testid, value) =>
      page.evaluate(`(() => { const e = ${q(testid)}; e.value = ${JSON.stringify(String(value))}; e.dispatchEvent(new Event("input", { bubbles: true })); })()`),
    click: (testid) => page.evaluate(`${q(testid)}.click()`),
    value: (testid) => page.evaluate(`${q(testid)}?.value`),
    checked: (testid) => page.evaluate(`${q(testid)}?.checked`),
    attribute: (testid, name) => page.evaluate(`${q(testid)}?.getAttribute(${JSON.stringify(name)})`),
    exists: (testid) => page.evaluate(`Boolean(${q(testid)})`),
    text: (testid) => page.evaluate(`${q(testid)}?.textContent`),
    count: (selector) => page.evaluate(`document.querySelectorAll(${JSON.stringify(selector)}).length`),
  };
}
