// The fenced upsert against a real PostgreSQL (PG* environment variables) and a real
// lock-server (LOCK_URL): scripts/test-examples.sh starts both.
import { test, before, after } from "node:test";
import pg from "pg";
import { FencedOutError } from "lock-wasm";
import { checkFenceRule, pausedWorkerScenario, uniqueKey } from "../scenario/scenario.mjs";
import { SCHEMA, fencedUpsert } from "./fenced-upsert.mjs";

const db = new pg.Client();
before(async () => {
  await db.connect();
  await db.query(SCHEMA);
});
after(() => db.end());

async function read(key) {
  const { rows } = await db.query("SELECT value, fencing_token FROM documents WHERE key = $1", [key]);
  return rows.length === 0 ? undefined : { value: rows[0].value, fencingToken: Number(rows[0].fencing_token) };
}

test("the upsert keeps the write of the highest token", () =>
  checkFenceRule({ write: (key, token, value) => fencedUpsert(db, key, token, value), read, FencedOutError }, uniqueKey("pg-rule")));

test("a paused worker's late write is refused; the newer holder's write stands", () =>
  pausedWorkerScenario({ worker: new URL("./worker.mjs", import.meta.url), read }, uniqueKey("pg-paused")));
