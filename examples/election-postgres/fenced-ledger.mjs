// The leader's fenced write for PostgreSQL: a transaction whose first statement takes the
// election's fence row, refusing a term below the highest one seen. Copy this.
import { FencedOutError } from "lock-wasm";

// The ledger is append-only: a new entry has no row of its own to compare a token with, so
// the term lives in a row of its own, one per election (the lock key), next to the data it
// guards. Every writer of the ledger is the leader of that one election, so the terms compared
// are always of one key.
export const SCHEMA = `
  CREATE TABLE IF NOT EXISTS fences (
    lock_key text   PRIMARY KEY,
    token    bigint NOT NULL
  );
  CREATE TABLE IF NOT EXISTS ledger_entries (
    id       bigserial PRIMARY KEY,
    election text      NOT NULL,
    entry    text      NOT NULL,
    writer   text      NOT NULL,
    term     bigint    NOT NULL
  )`;

// The fenced upsert of fencing-postgres, on the fence row. ON CONFLICT DO UPDATE locks the
// existing row and evaluates WHERE against its latest committed version: a leader with a
// term at least the recorded one records its term and keeps the row locked until its
// transaction ends, so a writer with another term waits, then sees this one's. No row
// affected: a higher term was already recorded, a newer leader has written.
const TAKE_FENCE = `
  INSERT INTO fences (lock_key, token) VALUES ($1, $2)
  ON CONFLICT (lock_key) DO UPDATE
    SET token = EXCLUDED.token
    WHERE fences.token <= EXCLUDED.token`;

/**
 * Runs `work(db)` in a transaction fenced by `term` for `lockKey`: COMMIT if the fence
 * admitted the term, else ROLLBACK and a FencedOutError (never retry it: a newer leader
 * owns the data now). `db`: one `pg.Client` (not a pool: the statements must share one
 * connection), used by nobody else meanwhile.
 */
export async function fencedTransaction(db, lockKey, term, work) {
  await db.query("BEGIN");
  try {
    const { rowCount } = await db.query(TAKE_FENCE, [lockKey, term]);
    if (rowCount === 0) {
      throw new FencedOutError(`${lockKey}: term ${term} is below the one that wrote last`);
    }
    const result = await work(db);
    await db.query("COMMIT");
    return result;
  } catch (err) {
    await db.query("ROLLBACK");
    throw err;
  }
}

/** Appends `entry` to the ledger of `election`, fenced by the leader's `term`. */
export function appendEntry(db, election, term, writer, entry) {
  return fencedTransaction(db, election, term, (tx) =>
    tx.query("INSERT INTO ledger_entries (election, entry, writer, term) VALUES ($1, $2, $3, $4)", [
      election,
      entry,
      writer,
      term,
    ]),
  );
}

/** The entries of `election` in the order they committed. */
export async function readLedger(db, election) {
  const { rows } = await db.query(
    "SELECT entry, writer, term FROM ledger_entries WHERE election = $1 ORDER BY id",
    [election],
  );
  return rows.map((row) => ({ entry: row.entry, writer: row.writer, term: Number(row.term) }));
}

/** The term the fence of `lockKey` holds now (undefined before the first write). */
export async function fenceTerm(db, lockKey) {
  const { rows } = await db.query("SELECT token FROM fences WHERE lock_key = $1", [lockKey]);
  return rows.length === 0 ? undefined : Number(rows[0].token);
}
