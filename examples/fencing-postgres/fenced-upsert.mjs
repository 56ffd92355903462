// The fenced write for PostgreSQL: one statement that writes a row only if the writer's
// fencing token is at least the token that wrote the row last. Copy this.
import { FencedOutError } from "lock-wasm";

// The token lives next to the data it guards. Every writer of a row holds the same lock
// key (here: the row's own key), so the tokens compared are always of one key.
export const SCHEMA = `
  CREATE TABLE IF NOT EXISTS documents (
    key           text   PRIMARY KEY,
    value         text   NOT NULL,
    fencing_token bigint NOT NULL
  )`;

// One statement, so check and write are atomic: ON CONFLICT DO UPDATE takes the existing
// row's lock and evaluates WHERE against its latest committed version, and a concurrent
// writer of the same key waits for that lock. A new key has nothing to check: the INSERT
// wins (or, racing another INSERT, turns into the guarded UPDATE). No row affected means
// a higher token wrote first: the write is refused.
const FENCED_UPSERT = `
  INSERT INTO documents (key, value, fencing_token) VALUES ($1, $2, $3)
  ON CONFLICT (key) DO UPDATE
    SET value = EXCLUDED.value, fencing_token = EXCLUDED.fencing_token
    WHERE documents.fencing_token <= EXCLUDED.fencing_token`;

/** Writes `value` under `key` with `fencingToken`; a FencedOutError if a higher token wrote. */
export async function fencedUpsert(db, key, fencingToken, value) {
  const { rowCount } = await db.query(FENCED_UPSERT, [key, value, fencingToken]);
  if (rowCount === 0) {
    throw new FencedOutError(`${key}: fencing token ${fencingToken} is below the one that wrote last`);
  }
}
