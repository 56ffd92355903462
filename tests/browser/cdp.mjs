// Headless Chromium driven over a bare DevTools pipe (--remote-debugging-pipe), for timing
// runs: only the page's Runtime and Page domains are used, never Network or Log.
//
// Why not playwright-core here: it enables the Network domain on every page, so each fetch
// reports its request and response to the driver, and each refused L4 (409) adds a console
// message. Measured with 50-wide bursts of fetches against a lock-server over HTTP/2: 500
// took 2.5 s on a bare pipe and 3.9–7.1 s under playwright, and the dashboard's sweep at
// N = 50 spent 30 s of main-thread time instead of 13–20 s. A sweep timed under that load
// measures the instrumentation, not the dashboard.
import { spawn } from "node:child_process";

// Headless Chromium's flags as root, for this driver and for launchChromium (harness.mjs).
export const CHROMIUM_FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--no-first-run",
];

// The binary, by absolute path (CHROMIUM overrides), never looked up on PATH.
export const chromiumBinary = () => process.env.CHROMIUM ?? "/usr/bin/chromium";

// Starts Chromium with a fresh profile in `profileDir` and attaches to its page. Returns
// { evaluate, send, onEvent, close }. `ignoreHTTPSErrors` accepts a self-signed certificate.
export async function launchBare(profileDir, { ignoreHTTPSErrors = false } = {}) {
  const args = [...CHROMIUM_FLAGS, "--window-size=1360,1500", "--remote-debugging-pipe", `--user-data-dir=${profileDir}`];
  if (ignoreHTTPSErrors) args.push("--ignore-certificate-errors");
  const proc = spawn(chromiumBinary(), [...args, "about:blank"], {
    stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"],
  });
  const [toBrowser, fromBrowser] = [proc.stdio[3], proc.stdio[4]];
  const pending = new Map();
  const listeners = [];
  let nextId = 0;
  let buffered = "";
  fromBrowser.on("data", (chunk) => {
    buffered += chunk.toString();
    // Messages are JSON, each ended by a NUL byte.
    for (let end; (end = buffered.indexOf("\0")) >= 0; buffered = buffered.slice(end + 1)) {
      const message = JSON.parse(buffered.slice(0, end));
      const waiter = pending.get(message.id);
      if (waiter) {
        pending.delete(message.id);
        if (message.error) waiter.reject(new Error(`${waiter.method}: ${message.error.message}`));
        else waiter.resolve(message.result);
      } else if (message.method) {
        for (const listener of listeners) listener(message.method, message.params);
      }
    }
  });
  const call = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve, reject, method });
      toBrowser.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });

  const { targetInfos } = await call("Target.getTargets");
  const target = targetInfos.find((t) => t.type === "page");
  const { sessionId } = await call("Target.attachToTarget", { targetId: target.targetId, flatten: true });
  const send = (method, params) => call(method, params, sessionId);
  // The value of a JS expression in the page (promises awaited); a thrown error rejects.
  const evaluate = async (expression) => {
    const r = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  };
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  // Ends Chromium and waits for it, so its profile directory can be removed.
  const close = async () => {
    await Promise.race([call("Browser.close").catch(() => {}), exited]);
    proc.kill("SIGTERM");
    await exited;
  };
  return { evaluate, send, onEvent: (listener) => listeners.push(listener), close };
}

// The page's console errors and uncaught exceptions, collected as they happen (Runtime
// domain only: console.error calls, such as the dashboard's panic hook, and exceptions).
export async function watchPageErrors(page) {
  const errors = [];
  page.onEvent((method, params) => {
    if (method === "Runtime.consoleAPICalled" && params.type === "error") {
      errors.push(params.args.map((a) => a.value ?? a.description ?? "").join(" "));
    } else if (method === "Runtime.exceptionThrown") {
      errors.push(`pageerror: ${params.exceptionDetails.exception?.description ?? params.exceptionDetails.text}`);
    }
  });
  await page.send("Runtime.enable");
  return errors;
}
