//! The database: its file, schema and connection settings, and [`Db`], the state every
//! operation runs on (on the writer thread, inside the current batch's transaction).

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, Params};

use super::fencing::TokenAllocator;
use crate::store::wakeup::HandedOff;
use crate::store::StoreError;

/// Database file name inside the data dir.
pub const DB_FILE: &str = "lock.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    owner TEXT,
    ttl_ms INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS locks (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    token INTEGER NOT NULL,
    ttl_ms INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    claim_by INTEGER
);
CREATE INDEX IF NOT EXISTS locks_by_session ON locks(session_id);
CREATE TABLE IF NOT EXISTS ledger_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    token INTEGER NOT NULL,
    entry TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_by_key ON ledger_entries(key, seq);
CREATE TABLE IF NOT EXISTS ledger_heads (
    key TEXT PRIMARY KEY,
    highest INTEGER NOT NULL
);
";

/// The wait queues: a TEMP table, so it lives in memory (`temp_store=MEMORY`), is gone after
/// a restart (tickets are not durable: waiters re-send) and still takes part in each batch's
/// transaction, so a rolled-back batch rolls its queue changes back too. `seq` orders each
/// key's tickets by arrival (a new rowid is larger than every existing one).
const QUEUE_SCHEMA: &str = "
CREATE TEMP TABLE IF NOT EXISTS tickets (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    ttl_ms INTEGER NOT NULL,
    open_until INTEGER NOT NULL,
    grace_ms INTEGER NOT NULL,
    UNIQUE (key, session_id)
);
CREATE INDEX IF NOT EXISTS temp.tickets_by_key ON tickets(key, seq);
CREATE INDEX IF NOT EXISTS temp.tickets_by_session ON tickets(session_id);
";

/// Everything the writer thread owns.
pub(super) struct Db {
    pub conn: Connection,
    pub tokens: TokenAllocator,
    /// Grants are refused until this wall-clock millisecond (see `recovery`).
    pub holdback_until: u64,
    /// One clock reading per batch, so every job of a batch sees the same instant.
    pub now: u64,
    /// `(key, session, grant for an open request)` of every hand-off in this batch: those
    /// waiters are woken after the commit.
    pub granted: Vec<(String, String, Option<HandedOff>)>,
}

impl Db {
    /// Runs a statement `... RETURNING key` and returns the keys, deduplicated.
    pub fn returning_keys(
        &mut self,
        statement: &str,
        params: impl Params,
    ) -> Result<Vec<String>, StoreError> {
        let mut keys: Vec<String> = self
            .conn
            .prepare_cached(statement)
            .map_err(sql)?
            .query_map(params, |r| r.get(0))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}

/// An SQLite failure: never the client's fault.
pub(super) fn sql(err: rusqlite::Error) -> StoreError {
    StoreError::Internal(format!("sqlite: {err}"))
}

/// Opens the file with the hot-path settings and creates the schema.
pub(super) fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sql)?;
    // Hot-path settings, both found by profiling (docs/BENCHMARKS.md, "Profiling"):
    // - QPSG: the bundled SQLite has STAT4, which makes a cached statement re-prepare itself
    //   (parse and plan again) whenever a bound value might change its plan; our plans are
    //   fixed primary-key lookups, so planning once is right.
    // - EXCLUSIVE locking, set before WAL is entered: this connection is the file's only
    //   user, so the fcntl lock/unlock pairs around every transaction and the shared-memory
    //   WAL index are pure overhead. (Another process cannot open the file meanwhile.)
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(sql)?;
    conn.execute_batch(
        "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; \
         PRAGMA temp_store=MEMORY;",
    )
    .map_err(sql)?;
    conn.execute_batch(SCHEMA).map_err(sql)?;
    add_claim_by(&conn)?;
    conn.execute_batch(QUEUE_SCHEMA).map_err(sql)?;
    Ok(conn)
}

/// Files written before the wait queue have no `locks.claim_by`; every lock in them was
/// claimed by the request that got it, which is what NULL says.
fn add_claim_by(conn: &Connection) -> Result<(), StoreError> {
    let has_it: bool = conn
        .prepare("SELECT COUNT(*) FROM pragma_table_info('locks') WHERE name = 'claim_by'")
        .map_err(sql)?
        .query_row([], |r| r.get(0))
        .map_err(sql)?;
    if !has_it {
        conn.execute_batch("ALTER TABLE locks ADD COLUMN claim_by INTEGER")
            .map_err(sql)?;
    }
    Ok(())
}
