// A job that locks a key and writes the row of that key through the fenced upsert; the
// test drives it (../scenario/worker.mjs). PostgreSQL from the PG* environment variables.
import * as sdk from "lock-wasm";
import pg from "pg";
import { runWorker } from "../scenario/worker.mjs";
import { fencedUpsert } from "./fenced-upsert.mjs";

const db = new pg.Client();
await db.connect();
try {
  await runWorker(sdk, (handle, value) => fencedUpsert(db, handle.key, handle.fencingToken, value));
} finally {
  await db.end();
}
