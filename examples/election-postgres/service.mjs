// One instance of a service of which exactly one instance may write the ledger at a time: it
// campaigns for the election, and once elected appends to the ledger with its term as the
// fencing token (fenced-ledger.mjs). Run two or more; the test (test.mjs) drives them.
//
// Environment: LOCK_URL (lock-server), PG* (PostgreSQL, as libpq reads them), SERVICE_NAME
// (what the leader announces: a name or an address), ELECTION (default
// "election/ledger-writer").
//
// Driven over stdin/stdout, one JSON object per line, so the test can decide when each step
// happens. Messages out:
//   {event: "following", leader: {value, term} | null}  while campaigning, each leader change
//   {event: "elected", term, value, holderId}            once it leads
// Commands in (once elected), each answered by one message:
//   {do: "check"}         → {event: "checked", leading, term}: a leader's check before a write
//   {do: "write", entry}  → {event: "written", term} or {event: "fencedOut", code, term}: the
//                           write that follows the check (a pause can fall between the two)
//   {do: "awaitLoss"}     → {event: "loss", lost, reason}
//   {do: "stats"}         → {event: "stats", written, fencedOut}
// End of input: resign (if still leading), close the session, exit.
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";
import { FencedOutError, LockClient } from "lock-wasm";
import pg from "pg";
import { appendEntry } from "./fenced-ledger.mjs";

// A short session keeps the failover quick: a frozen leader's term ends one TTL after its
// last heartbeat (heartbeats go every TTL/3). ASSUMPTION for the example, not a default.
const TTL_MS = 3000;
// How long `awaitLoss` waits for the leadership's signal: a bound against hanging, not a
// timing assertion (the loss is seen at the first heartbeat after the pause).
const LOSS_BOUND_MS = 60_000;

const election = process.env.ELECTION ?? "election/ledger-writer";
const name = process.env.SERVICE_NAME ?? `ledger-writer-${process.pid}`;

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const client = new LockClient({ baseUrl: process.env.LOCK_URL });
const session = await client.openSession({ ttlMs: TTL_MS, owner: name });
const db = new pg.Client();
await db.connect();

// Who leads while this one waits: what a follower would show on its status page, or use to
// forward requests to the leader's address (its announced value).
const following = new AbortController();
const followed = (async () => {
  for await (const leader of client.observe(election, { signal: following.signal })) {
    send({ event: "following", leader: leader && { value: leader.value, term: leader.term } });
  }
})().catch((err) => {
  if (!following.signal.aborted) throw err;
});

// Waits as long as it takes: campaigning has no budget. The term is this leader's fencing
// token: strictly higher than every earlier leader's.
const leadership = await session.campaign(election, { value: name, ttlMs: TTL_MS });
following.abort();
await followed;
send({ event: "elected", term: leadership.term, value: leadership.value, holderId: session.holderId });

const stats = { written: 0, fencedOut: 0 };
for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.do === "check") {
    // Checking the leadership before a write stops most late writes early, but not all: a
    // pause can fall right after it. The fence in the database stops the rest.
    send({ event: "checked", leading: !leadership.signal.aborted, term: leadership.term });
  } else if (command.do === "write") {
    send(await write(command.entry));
  } else if (command.do === "awaitLoss") {
    send({ event: "loss", ...(await awaitLoss()) });
  } else if (command.do === "stats") {
    send({ event: "stats", ...stats });
  } else {
    throw new Error(`unknown command ${line}`);
  }
}
if (!leadership.signal.aborted) await leadership.resign();
await session.close();
await db.end();

async function write(entry) {
  try {
    await appendEntry(db, election, leadership.term, name, entry);
    stats.written += 1;
    return { event: "written", term: leadership.term };
  } catch (err) {
    // Fenced out: a newer leader writes the ledger now. Stop writing; never retry.
    if (!(err instanceof FencedOutError)) throw err;
    stats.fencedOut += 1;
    return { event: "fencedOut", code: err.code, term: leadership.term };
  }
}

async function awaitLoss() {
  const { signal } = leadership;
  if (!signal.aborted) {
    const aborted = new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    await Promise.race([aborted, delay(LOSS_BOUND_MS, undefined, { ref: false })]);
  }
  return { lost: signal.aborted, reason: signal.reason?.reason ?? signal.reason?.code ?? null };
}
