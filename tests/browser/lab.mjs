// End-to-end test of the dashboard's fault lab: a real lock-server over TLS (--tls-self-signed,
// so the browser speaks HTTP/2; an admin token for R1) serving the built www/, headless
// Chromium driven over a bare DevTools pipe (cdp.mjs).
//
//   node tests/browser/lab.mjs --server target/debug/lock-server --web-root www
//
// Checks:
// - a URL with the lab's settings restores them in the form (scenario, TTLs, fault length,
//   the worker's choice, seed), and the form, edited, is written back into the URL;
// - "gc-pause" with its default settings: on the fenced side at least one write fenced out
//   and none corrupted; on the unfenced side at least one corrupted; the ledgers read back
//   (GET) list the stale entry on the unfenced side only; the lab timeline draws the pause,
//   the leases and the writes by outcome; the lab's JSON export carries the faults and the
//   outcomes;
// - "short-pause" (the control): nothing fenced out, nothing corrupted, every write accepted;
// - "revoke" with the admin token typed into the lab: the operator's R1 ends A's hold, and
//   A's late write is fenced out on one side and corrupts the other;
// - a fault injected by hand (a pause on the fenced side's B while the control runs) lands
//   on that contender's timeline row and in the export;
// - the admin token is nowhere but in the page's memory (not in the URL, web storage, or the
//   export); no error shown, no console error.
// Exits non-zero on any failure.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { checker, finish, flags, launchKeepingDownloads, listeningUrl, pageDriver, stopServer, waitFor } from "./harness.mjs";

const args = flags();
const serverBin = resolve(args.server ?? "target/debug/lock-server");
const webRoot = resolve(args["web-root"] ?? "www");
// A lab run takes a few seconds (its default pause is the longest part): a minute is generous.
const RUN_LIMIT_MS = 60_000;

const { failures, check } = checker();
const adminToken = randomBytes(16).toString("hex");
const scratch = mkdtempSync(join(tmpdir(), "bench-ui-lab-"));
const log = join(scratch, "server.log");
const server = spawn(
  serverBin,
  ["--listen", "127.0.0.1:0", "--data-dir", join(scratch, "data"), "--web-root", webRoot, "--tls-self-signed", "--admin-token", adminToken],
  { stdio: ["ignore", openSync(log, "w"), openSync(log, "a")] },
);

function lab(page) {
  const ui = pageDriver(page, 100);
  return {
    ...ui,
    counter: async (id, side) => Number(await page.evaluate(`${ui.q(`lab-${id}-${side}`)}?.dataset.value`)),
  };
}

async function open(page, ui, url) {
  await page.send("Page.navigate", { url });
  await ui.until("the fault lab", () => ui.exists("lab-run"), 30_000);
}

// Runs the lab as the form stands; returns the lab's JSON export.
async function runLab(page, ui, label) {
  const started = Date.now();
  await ui.click("lab-run");
  await ui.until(`${label}: the run to start`, async () => (await ui.attribute("lab-status", "data-state")) === "running", 10_000);
  await ui.until(`${label}: the run to end`, async () => (await ui.attribute("lab-status", "data-state")) === "done", RUN_LIMIT_MS);
  const before = await page.evaluate("window.__downloads.length");
  await ui.click("export-lab-json");
  const exported = JSON.parse(await page.evaluate(`window.__downloads[${before}].text()`));
  const tally = {};
  for (const side of ["fenced", "unfenced"]) {
    tally[side] = { fencedOut: await ui.counter("fenced-out", side), corrupted: await ui.counter("corrupted", side) };
  }
  const writes = exported.sides.map((s) => `${s.fenced ? "fenced" : "unfenced"}: ${s.writes.map((w) => `${s.contenders[w.contender].name}#${w.token} ${w.outcome}`).join(", ")}`);
  console.log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s; ${writes.join("; ")}; counters ${JSON.stringify(tally)}`);
  const error = (await ui.exists("lab-error")) ? await ui.text("lab-error") : null;
  check(!error && !exported.error, `${label}: no error shown (${error ?? exported.error ?? "none"})`);
  return { exported, tally };
}

let browser;
try {
  const base = await waitFor("the server's listening line", async () => listeningUrl(log));
  check(base.startsWith("https://"), `the server serves TLS (${base})`);
  const { page, consoleErrors } = await launchKeepingDownloads(join(scratch, "profile"));
  browser = page;
  const ui = lab(page);

  // A shared link restores the form.
  await open(page, ui, `${base}/?lab=partitioned&lockTtl=1500&sessionTtl=4500&fault=3300&honours=1&seed=99`);
  const restored = {
    scenario: await ui.checked("lab-scenario-partitioned"),
    lockTtl: await ui.value("field-labLockTtl"),
    sessionTtl: await ui.value("field-labSessionTtl"),
    fault: await ui.value("field-labFault"),
    honours: await ui.checked("field-labHonours"),
    seed: await ui.value("field-labSeed"),
  };
  check(
    restored.scenario && restored.lockTtl === "1500" && restored.sessionTtl === "4500" && restored.fault === "3300" && restored.honours && restored.seed === "99",
    `a URL with the lab's settings restores them in the form (${JSON.stringify(restored)})`,
  );
  await ui.fill("field-labSeed", 123);
  const edited = await page.evaluate("location.search");
  check(/[?&]seed=123(&|$)/.test(edited) && /lab=partitioned/.test(edited), `the edited form is written back into the URL (${edited})`);

  // gc-pause with its defaults.
  await open(page, ui, `${base}/`);
  check(await ui.checked("lab-scenario-gc-pause"), "the lab opens on gc-pause");
  await ui.fill("field-labAdminToken", adminToken);
  const gc = await runLab(page, ui, "gc-pause");
  check(gc.tally.fenced.fencedOut >= 1 && gc.tally.fenced.corrupted === 0, `gc-pause, fenced side: the stale write fenced out (${gc.tally.fenced.fencedOut} fenced out, ${gc.tally.fenced.corrupted} corrupted)`);
  check(gc.tally.unfenced.corrupted >= 1, `gc-pause, unfenced side: the stale write accepted (${gc.tally.unfenced.corrupted} corrupted)`);
  const [fenced, unfenced] = gc.exported.sides;
  check(fenced.ledger.every((l) => !l.stale) && fenced.ledger.length >= 1, `gc-pause: the fenced ledger read back holds no stale entry (${fenced.ledger.map((l) => l.token).join(", ")})`);
  check(unfenced.ledger.some((l) => l.stale), `gc-pause: the unfenced ledger read back marks the stale entry (${unfenced.ledger.map((l) => `${l.token}${l.stale ? " stale" : ""}`).join(", ")})`);
  const staleShown = await ui.count("[data-testid=lab-ledger-unfenced] li[data-stale=true]");
  check(staleShown >= 1, `gc-pause: the page lists the stale entry as stale (${staleShown})`);
  const a = fenced.contenders[0];
  check(a.faults.some((f) => f.kind === "pause" && f.end > f.start), `gc-pause: the export carries A's pause (${JSON.stringify(a.faults)})`);
  check(a.leaseEndAt !== undefined && a.leaseEndAt !== null && a.deadlineAt !== null, `gc-pause: A's lease end and deadline recorded (${a.leaseEndAt}, ${a.deadlineAt})`);
  check(fenced.writes.some((w) => w.outcome === "fencedOut") && unfenced.writes.some((w) => w.outcome === "corrupted"), "gc-pause: the export carries the write outcomes");
  const drawn = {
    pauses: await ui.count("svg[data-testid=lab-timeline] rect.fault.pause:not(.swatch)"),
    leases: await ui.count("svg[data-testid=lab-timeline] rect.hold:not(.swatch)"),
    fencedOut: await ui.count("svg[data-testid=lab-timeline] circle.write.fenced-out"),
    corrupted: await ui.count("svg[data-testid=lab-timeline] circle.write.corrupted"),
  };
  check(drawn.pauses >= 2 && drawn.leases >= 4 && drawn.fencedOut >= 1 && drawn.corrupted >= 1, `gc-pause: the timeline draws the pauses, leases and writes by outcome (${JSON.stringify(drawn)})`);
  const simulated = await ui.text("lab-simulated");
  console.log(`gc-pause simulated: ${simulated}`);

  // short-pause: the control.
  await ui.click("lab-scenario-short-pause");
  const control = await runLab(page, ui, "short-pause");
  const none = Object.values(control.tally).every((t) => t.fencedOut === 0 && t.corrupted === 0);
  check(none, `short-pause: nothing fenced out, nothing corrupted (${JSON.stringify(control.tally)})`);
  const accepted = control.exported.sides.every((s) => s.writes.length === 2 && s.writes.every((w) => w.outcome === "accepted"));
  check(accepted, "short-pause: both contenders' writes accepted on both sides");

  // revoke: the operator's R1, with the admin token typed into the lab.
  await ui.click("lab-scenario-revoke");
  const revoke = await runLab(page, ui, "revoke");
  check(revoke.tally.fenced.fencedOut >= 1 && revoke.tally.fenced.corrupted === 0, `revoke, fenced side: A's late write fenced out (${JSON.stringify(revoke.tally.fenced)})`);
  check(revoke.tally.unfenced.corrupted >= 1, `revoke, unfenced side: A's late write accepted (${JSON.stringify(revoke.tally.unfenced)})`);
  const revoked = revoke.exported.sides.every((s) => s.contenders[0].faults.some((f) => f.kind === "revoke"));
  check(revoked, "revoke: the export carries the revoke on A's row of each side");

  // A fault by hand: pause the fenced side's B while the control runs.
  await ui.click("lab-scenario-short-pause");
  await ui.click("lab-run");
  await ui.until("the control to start", async () => (await ui.attribute("lab-status", "data-state")) === "running", 10_000);
  await ui.click("lab-inject-0-1-pause");
  await ui.until("the control to end", async () => (await ui.attribute("lab-status", "data-state")) === "done", RUN_LIMIT_MS);
  const before = await page.evaluate("window.__downloads.length");
  await ui.click("export-lab-json");
  const byHand = JSON.parse(await page.evaluate(`window.__downloads[${before}].text()`));
  const bFaults = byHand.sides[0].contenders[1].faults;
  check(bFaults.some((f) => f.kind === "pause"), `a pause injected by hand lands on fenced B's row (${JSON.stringify(bFaults)})`);
  check(byHand.sides[1].contenders[1].faults.length === 0, "and on no other contender's");
  const handTally = byHand.sides.map((s) => s.writes.filter((w) => w.outcome !== "accepted").length);
  check(handTally.every((n) => n === 0), `a late B still writes the highest token: nothing stale (${handTally})`);

  // The admin token lives in the page's memory only.
  const kept = await page.evaluate(`[location.href, document.cookie, JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage })].join(" ")`);
  check(!kept.includes(adminToken), "the admin token is not in the URL, cookies or web storage");
  check(!JSON.stringify(gc.exported).includes(adminToken), "the admin token is not in the export");
  check(consoleErrors.length === 0, `no console errors (${consoleErrors.join(" | ") || "none"})`);
} catch (err) {
  failures.push(String(err?.stack ?? err));
  console.error(err);
} finally {
  await browser?.close().catch(() => {});
  await stopServer(server);
}
finish("fault lab", failures, log, scratch);
