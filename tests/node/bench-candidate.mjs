// One candidate of the failover benchmark (bench-watch.mjs starts two per round): campaigns
// for ELECTION on a session of TTL_MS and prints one JSON line once elected,
// `{event: "elected", term, at}` (`at`: Date.now() at the grant, compared with the time the
// benchmark froze the other candidate). End of stdin: resign, close, exit.
import { createInterface } from "node:readline";
import { LockClient } from "lock-wasm";

const { LOCK_URL, ELECTION, CANDIDATE } = process.env;
const ttlMs = Number(process.env.TTL_MS);
const session = await new LockClient({ baseUrl: LOCK_URL }).openSession({ ttlMs, owner: `candidate-${CANDIDATE}` });
const leadership = await session.campaign(ELECTION, { value: CANDIDATE, ttlMs });
process.stdout.write(`${JSON.stringify({ event: "elected", term: leadership.term, at: Date.now() })}\n`);
for await (const _ of createInterface({ input: process.stdin }));
if (!leadership.signal.aborted) await leadership.resign();
await session.close();
