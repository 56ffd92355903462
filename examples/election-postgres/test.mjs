// A leader election whose term fences the ledger, against a real PostgreSQL (PG* environment
// variables) and a real lock-server (LOCK_URL): scripts/test-examples.sh starts both.
//
// Waits are driven by state (a message arrives, a process is seen stopped, a leader is
// observed); their bounds only keep a broken run from hanging and are generous for a loaded
// machine. Nothing asserts on how long a step took.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { FencedOutError, LockClient } from "lock-wasm";
import { checkFenceRule, uniqueKey } from "../scenario/scenario.mjs";
import { SCHEMA, appendEntry, fenceTerm, fencedTransaction, readLedger } from "./fenced-ledger.mjs";

const MESSAGE_BOUND_MS = 150_000;
const STOP_BOUND_MS = 30_000;
const SERVICE = new URL("./service.mjs", import.meta.url);
// The message kinds that answer each command of service.mjs.
const ANSWERS = { check: "checked", write: ["written", "fencedOut"], awaitLoss: "loss", stats: "stats" };

const db = new pg.Client();
const client = new LockClient({ baseUrl: process.env.LOCK_URL });
before(async () => {
  await db.connect();
  await db.query(SCHEMA);
});
after(async () => {
  await client.close();
  await db.end();
});

test("the fence row admits a term at least the highest seen, atomically with the write", async () => {
  // The rule of docs/fencing.md, straight against the ledger: the write that stands is the
  // last entry appended.
  const read = async (key) => {
    const entries = await readLedger(db, key);
    const last = entries.at(-1);
    return last && { value: last.entry, fencingToken: last.term };
  };
  const write = (key, term, entry) => appendEntry(db, key, term, "rule", entry);
  await checkFenceRule({ write, read, FencedOutError }, uniqueKey("election-rule"));
});

test("a refused write leaves nothing of its transaction behind", async () => {
  const election = uniqueKey("election-rollback");
  await appendEntry(db, election, 9, "new leader", "kept");
  await assert.rejects(appendEntry(db, election, 8, "old leader", "dropped"), FencedOutError);
  assert.deepEqual(await readLedger(db, election), [{ entry: "kept", writer: "new leader", term: 9 }]);
  assert.equal(await fenceTerm(db, election), 9);
});

test("a lower term that races a higher one's open transaction waits for its commit, then is refused", async () => {
  const election = uniqueKey("election-race");
  const newer = new pg.Client();
  const older = new pg.Client();
  await newer.connect();
  await older.connect();
  try {
    let commit;
    const gate = new Promise((resolve) => (commit = resolve));
    let fenced;
    const fenceTaken = new Promise((resolve) => (fenced = resolve));
    // Term 11 takes the fence and holds its transaction open until the gate opens.
    const newWrite = fencedTransaction(newer, election, 11, async (tx) => {
      fenced();
      await tx.query("INSERT INTO ledger_entries (election, entry, writer, term) VALUES ($1, 'new', 'newer', 11)", [election]);
      await gate;
    });
    await fenceTaken;
    // Term 10 blocks on the fence row's lock; it must not get past it before 11 commits.
    let settled = false;
    const oldWrite = appendEntry(older, election, 10, "older", "old").finally(() => (settled = true));
    await waitUntilBlocked(older);
    assert.equal(settled, false, "the lower term waits for the open transaction");
    commit();
    await newWrite;
    await assert.rejects(oldWrite, FencedOutError);
    assert.deepEqual(await readLedger(db, election), [{ entry: "new", writer: "newer", term: 11 }]);
  } finally {
    await newer.end();
    await older.end();
  }
});

// Waits until `client`'s backend waits for a lock (pg_stat_activity), within a bound.
async function waitUntilBlocked(client) {
  const pid = client.processID;
  const until = Date.now() + STOP_BOUND_MS;
  for (;;) {
    const { rows } = await db.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid]);
    if (rows[0]?.wait_event_type === "Lock") return;
    if (Date.now() > until) assert.fail(`backend ${pid} never waited for a lock`);
    await delay(10);
  }
}

test("a frozen leader's late write is refused by the database; the new leader's stands", async () => {
  const election = uniqueKey("election/ledger-writer");
  const observer = observe(election);
  const a = new Service(election, "ledger-writer-a (10.0.0.1:8080)");
  let b;
  try {
    // A is elected: the first term. Everyone sees who leads, by the value A announced.
    const electedA = await a.waitFor("elected");
    assert.equal(electedA.value, a.name);
    assert.deepEqual(await client.leader(election), leaderOf(electedA), "client.leader() names A");

    // B campaigns and follows A meanwhile.
    b = new Service(election, "ledger-writer-b (10.0.0.2:8080)");
    const following = await b.waitFor("following", (m) => m.leader?.value === a.name);
    assert.equal(following.leader.term, electedA.term, "B sees A's term");

    assert.deepEqual(await a.ask({ do: "write", entry: "A: first" }), { event: "written", term: electedA.term });

    // A checks that it still leads, and freezes right after (a GC pause, a stopped VM)
    // until its session has expired.
    assert.deepEqual(await a.ask({ do: "check" }), { event: "checked", leading: true, term: electedA.term });
    await a.pause();

    // B takes over once A's session (and with it A's term) ran out: a higher term.
    const electedB = await b.waitFor("elected");
    assert.ok(electedB.term > electedA.term, `B's term ${electedB.term} is above A's ${electedA.term}`);
    assert.deepEqual(await client.leader(election), leaderOf(electedB), "client.leader() names B");
    assert.deepEqual(await b.ask({ do: "write", entry: "B: first" }), { event: "written", term: electedB.term });

    // A wakes up and sends the write it had checked for, under its old term.
    a.resume();
    assert.deepEqual(
      await a.ask({ do: "write", entry: "A: late" }),
      { event: "fencedOut", code: "FENCED_OUT", term: electedA.term },
      "the database refuses A's late write",
    );
    assert.deepEqual(await a.ask({ do: "stats" }), { event: "stats", written: 1, fencedOut: 1 });
    const loss = await a.ask({ do: "awaitLoss" });
    assert.equal(loss.lost, true, "A's leadership reports the loss");

    assert.deepEqual(await readLedger(db, election), [
      { entry: "A: first", writer: a.name, term: electedA.term },
      { entry: "B: first", writer: b.name, term: electedB.term },
    ]);
    assert.equal(await fenceTerm(db, election), electedB.term, "the fence holds B's term");

    // An observer saw A lead, then B, each under its own term.
    const leaders = await observer.until((seen) => seen.some((l) => l?.value === b.name));
    const named = leaders.filter(Boolean).map((l) => `${l.value}@${l.term}`);
    assert.deepEqual(
      named.filter((x, i) => x !== named[i - 1]),
      [`${a.name}@${electedA.term}`, `${b.name}@${electedB.term}`],
    );

    await a.finish();
    await b.finish();
    assert.equal(await client.leader(election), null, "B resigned: nobody leads");
  } finally {
    observer.stop();
    a.kill();
    b?.kill();
  }
});

// What `client.leader()` answers while `elected` (a service's message) leads.
function leaderOf(elected) {
  return { value: elected.value, term: elected.term, holderId: elected.holderId };
}

/** `client.observe` in the background: every leader it yields, in order. */
function observe(election) {
  const controller = new AbortController();
  const seen = [];
  let wake = () => {};
  const done = (async () => {
    for await (const leader of client.observe(election, { signal: controller.signal })) {
      seen.push(leader && { value: leader.value, term: leader.term });
      wake();
    }
  })().catch((err) => {
    if (!controller.signal.aborted) throw err;
  });
  return {
    async until(predicate) {
      const bound = Date.now() + MESSAGE_BOUND_MS;
      while (!predicate(seen)) {
        if (Date.now() > bound) assert.fail(`observe never saw the expected leader: ${JSON.stringify(seen)}`);
        await Promise.race([new Promise((resolve) => (wake = resolve)), delay(1000)]);
      }
      return seen;
    },
    stop() {
      controller.abort();
      return done;
    },
  };
}

/** A service process (service.mjs) and its line protocol. */
class Service {
  #child;
  #messages = [];
  #waiting = [];
  #stderr = "";
  #exit;
  constructor(election, name) {
    this.name = name;
    this.#child = spawn(process.execPath, [fileURLToPath(SERVICE)], {
      env: { ...process.env, ELECTION: election, SERVICE_NAME: name },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#child.stderr.on("data", (chunk) => (this.#stderr += chunk));
    this.#exit = new Promise((resolve) => this.#child.on("exit", (code, signal) => resolve(signal ?? code)));
    createInterface({ input: this.#child.stdout }).on("line", (line) => {
      this.#messages.push(JSON.parse(line));
      for (const wake of this.#waiting.splice(0)) wake();
    });
  }
  #context() {
    return `service ${this.name}${this.#stderr ? `, stderr:\n${this.#stderr}` : ""}`;
  }
  /** The first unread message whose `event` is one of `events` and for which `accept` holds. */
  async waitFor(events, accept = () => true) {
    const kinds = [events].flat();
    const match = (m) => kinds.includes(m.event) && accept(m);
    const bound = Date.now() + MESSAGE_BOUND_MS;
    const exited = this.#exit.then((status) => ({ status }));
    for (;;) {
      const i = this.#messages.findIndex(match);
      if (i >= 0) return this.#messages.splice(i, 1)[0];
      const woken = new Promise((resolve) => this.#waiting.push(resolve));
      const timeout = delay(Math.max(0, bound - Date.now()), "timeout", { ref: false });
      const outcome = await Promise.race([woken, exited, timeout]);
      if (outcome === "timeout") assert.fail(`no ${kinds} message within ${MESSAGE_BOUND_MS} ms from ${this.#context()}`);
      if (outcome?.status !== undefined && !this.#messages.some(match)) {
        assert.fail(`exited (${outcome.status}) before a ${kinds} message: ${this.#context()}`);
      }
    }
  }
  /** Sends a command and returns its answer. */
  ask(command) {
    this.#child.stdin.write(`${JSON.stringify(command)}\n`);
    return this.waitFor(ANSWERS[command.do]);
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
  /** Closes stdin (the service resigns, closes its session and exits) and awaits exit 0. */
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
