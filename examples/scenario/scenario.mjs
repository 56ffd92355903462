// The test side shared by the fencing examples: the fencing rule checked against a resource,
// and the paused-worker scenario run through real worker processes (worker.mjs).
//
// Waits are driven by state (a message arrives, a process is seen stopped); their bounds
// only keep a broken run from hanging and are generous for a loaded machine.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const MESSAGE_BOUND_MS = 150_000; // above the workers' own acquire budget (two minutes)
const STOP_BOUND_MS = 30_000;

let counter = 0;
/** A key no other run uses, so runs can share servers. */
export function uniqueKey(prefix) {
  counter += 1;
  return `${prefix}/${process.pid}-${Date.now()}-${counter}`;
}

/**
 * The rule, straight against the resource: a write is accepted iff its token is at least the
 * highest accepted for the key (equal is accepted: one holder may write more than once).
 * `write(key, fencingToken, value)` rejects with `FencedOutError` when refused;
 * `read(key)` → `{ value, fencingToken }` of the write that stands.
 */
export async function checkFenceRule({ write, read, FencedOutError }, key) {
  await write(key, 5, "five");
  await write(key, 7, "seven");
  await assert.rejects(write(key, 6, "six"), (err) => {
    assert.ok(err instanceof FencedOutError, `a FencedOutError, got ${err}`);
    assert.equal(err.code, "FENCED_OUT");
    return true;
  });
  assert.deepEqual(await read(key), { value: "seven", fencingToken: 7 }, "the refused write left no trace");
  await write(key, 7, "seven again");
  assert.deepEqual(await read(key), { value: "seven again", fencingToken: 7 }, "an equal token is accepted");
  const other = `${key}/other`;
  await write(other, 1, "one");
  assert.deepEqual(await read(other), { value: "one", fencingToken: 1 }, "keys are fenced independently");
}

/**
 * Worker A takes the lock and is frozen (SIGSTOP) past its lease; worker B takes the lock
 * and writes; A is thawed (SIGCONT) and writes too. A's write must be refused, B's must
 * stand, and A's handle must report the loss. `worker`: the example's worker.mjs (URL);
 * `env`: what it needs to reach the resource; `read(key)` as in `checkFenceRule`.
 */
export async function pausedWorkerScenario({ worker, env, read }, key) {
  const a = new WorkerProcess(worker, env, key, "A");
  let b;
  try {
    const grantA = await a.next();
    assert.deepEqual(grantA, { event: "acquired", fencingToken: grantA.fencingToken, isLost: false }, "A holds the lock");
    await a.pause();

    b = new WorkerProcess(worker, env, key, "B");
    const grantB = await b.next(); // granted once A's lease has run out
    assert.equal(grantB.event, "acquired", "B gets the lock once A's lease ran out");
    assert.ok(grantB.fencingToken > grantA.fencingToken, "B's token is higher");
    assert.deepEqual(await b.ask({ do: "write", value: "written by B" }), { event: "written" });
    await b.finish();

    a.resume();
    assert.deepEqual(
      await a.ask({ do: "write", value: "written by A" }),
      { event: "fencedOut", code: "FENCED_OUT" },
      "A's late write is refused",
    );
    assert.deepEqual(await a.ask({ do: "awaitLoss" }), { event: "loss", lostEvent: true, isLost: true }, "A's handle reports the loss");
    await a.finish();

    assert.deepEqual(await read(key), { value: "written by B", fencingToken: grantB.fencingToken }, "B's write stands");
  } finally {
    a.kill();
    b?.kill();
  }
}

/** A worker process and its line protocol. */
class WorkerProcess {
  #child;
  #lines;
  #stderr = "";
  #exit;
  constructor(script, env, key, name) {
    this.name = name;
    this.#child = spawn(process.execPath, [fileURLToPath(script)], {
      env: { ...process.env, ...env, LOCK_KEY: key },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#child.stderr.on("data", (chunk) => (this.#stderr += chunk));
    this.#exit = new Promise((resolve) => this.#child.on("exit", (code, signal) => resolve(signal ?? code)));
    this.#lines = createInterface({ input: this.#child.stdout })[Symbol.asyncIterator]();
  }
  #context() {
    return `worker ${this.name}${this.#stderr ? `, stderr:\n${this.#stderr}` : ""}`;
  }
  /** The next message (a JSON line). */
  async next() {
    const timeout = delay(MESSAGE_BOUND_MS, "timeout", { ref: false });
    const line = await Promise.race([this.#lines.next(), timeout]);
    if (line === "timeout") assert.fail(`no message within ${MESSAGE_BOUND_MS} ms from ${this.#context()}`);
    if (line.done) assert.fail(`exited (${await this.#exit}) without a message: ${this.#context()}`);
    return JSON.parse(line.value);
  }
  /** Sends a command and returns its answer. */
  ask(command) {
    this.#child.stdin.write(`${JSON.stringify(command)}\n`);
    return this.next();
  }
  /** SIGSTOP, then waits until the kernel reports the process stopped. */
  async pause() {
    this.#child.kill("SIGSTOP");
    const until = Date.now() + STOP_BOUND_MS;
    while ((await this.#state()) !== "T") {
      if (Date.now() > until) assert.fail(`not stopped: ${this.#context()}`);
      await delay(10);
    }
  }
  resume() {
    this.#child.kill("SIGCONT");
  }
  /** Closes stdin (the worker releases, closes its session and exits) and awaits exit 0. */
  async finish() {
    this.#child.stdin.end();
    assert.equal(await this.#exit, 0, `exit status of ${this.#context()}`);
  }
  /** SIGKILL (it ends stopped processes too) unless already gone. */
  kill() {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGKILL");
  }
  // The state letter of /proc/PID/stat (after the parenthesised command name).
  async #state() {
    const stat = await readFile(`/proc/${this.#child.pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  }
}
