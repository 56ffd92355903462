//! The database: its file, schema and connection settings, and [`Db`], the state every
//! operation runs on (on the writer thread, inside the current batch's transaction).

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, Params};

use super::fencing::TokenAllocator;
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
    expires_at INTEGER NOT NULL
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

/// Everything the writer thread owns.
pub(super) struct Db {
    pub conn: Connection,
    pub tokens: TokenAllocator,
    /// Grants are refused until this wall-clock millisecond (see `recovery`).
    pub holdback_until: u64,
    /// One clock reading per batch, so every job of a batch sees the same instant.
    pub now: u64,
    /// Keys whose holder changed in this batch, woken after the commit.
    pub changed: Vec<String>,
}

impl Db {
    /// Runs a `DELETE FROM locks ... RETURNING key` and notes the keys, whose waiters are
    /// woken after the commit.
    pub fn delete_locks(&mut self, statement: &str, params: impl Params) -> Result<(), StoreError> {
        let keys: Vec<String> = self
            .conn
            .prepare_cached(statement)
            .map_err(sql)?
            .query_map(params, |r| r.get(0))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        self.changed.extend(keys);
        Ok(())
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
    Ok(conn)
}
