//! The database: its file, schema and connection settings, and [`Db`], the state every
//! operation runs on (on the writer thread, inside the current batch's transaction).

use std::collections::HashMap;
use std::path::Path;

use lock_api::{HoldKind, WatchEvent};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, Params, Row};

use super::fencing::TokenAllocator;
use super::queued_keys::QueuedKeys;
use crate::store::feeds::{Feeds, Pos};
use crate::store::holder_id::HolderIds;
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

/// Changes to [`SCHEMA`] (the first release's, kept as it was), applied in order to every
/// file whose `user_version` is below their number, each in one transaction with the version
/// bump: a fresh file and a data dir of any older release end with the same schema, and an
/// older one keeps its data.
const MIGRATIONS: [&str; 6] = [
    // 1: a session belongs to the auth-file client that opened it (NULL without an auth
    // file; sessions from before have none); `secrets` holds the holder-id key.
    "ALTER TABLE sessions ADD COLUMN client TEXT;
     CREATE TABLE secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL);",
    // 2: a lock handed to a queued session must be claimed by `claim_by` (NULL: claimed by
    // the request that got it, which every lock from before was).
    "ALTER TABLE locks ADD COLUMN claim_by INTEGER;",
    // 3: shared holds. A key may have several holders, so a row is one hold, keyed by
    // `(key, session_id)` (a session holds a key once); `mode` is 'exclusive' or 'shared',
    // `shared_limit` a shared hold's limit (NULL: none). SQLite cannot change a primary key
    // in place: the table is copied, every lock from before kept as an exclusive hold with
    // its token (its index goes with the old table and is made again).
    "CREATE TABLE locks_by_hold (
         key TEXT NOT NULL,
         session_id TEXT NOT NULL,
         token INTEGER NOT NULL,
         ttl_ms INTEGER NOT NULL,
         expires_at INTEGER NOT NULL,
         claim_by INTEGER,
         mode TEXT NOT NULL DEFAULT 'exclusive' CHECK (mode IN ('exclusive', 'shared')),
         shared_limit INTEGER,
         PRIMARY KEY (key, session_id)
     );
     INSERT INTO locks_by_hold (key, session_id, token, ttl_ms, expires_at, claim_by)
         SELECT key, session_id, token, ttl_ms, expires_at, claim_by FROM locks;
     DROP TABLE locks;
     ALTER TABLE locks_by_hold RENAME TO locks;
     CREATE INDEX locks_by_session ON locks(session_id);",
    // 4: a hold's value (L4 `value`, replaced by L9; NULL: none). Every hold from before has
    // none.
    "ALTER TABLE locks ADD COLUMN value TEXT;",
    // 5: the readiness probe's row: one row, rewritten by every probe (a real write through
    // the writer's batch, so it fails when requests' writes would).
    "CREATE TABLE probe (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL);",
    // 6: the unfenced demo ledger, beside the fenced one and of the same shape, but it
    // accepts a token below the key's highest and marks that entry `stale` (1).
    "CREATE TABLE unfenced_entries (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         key TEXT NOT NULL,
         token INTEGER NOT NULL,
         entry TEXT NOT NULL,
         stale INTEGER NOT NULL CHECK (stale IN (0, 1))
     );
     CREATE INDEX unfenced_by_key ON unfenced_entries(key, seq);
     CREATE TABLE unfenced_heads (key TEXT PRIMARY KEY, highest INTEGER NOT NULL);",
];

/// The `secrets` row of the holder-id key.
const HOLDER_ID_KEY: &str = "holder_id_key";

/// The wait queues: a TEMP table, so it lives in memory (`temp_store=MEMORY`), is gone after
/// a restart (tickets are not durable: waiters re-send) and still takes part in each batch's
/// transaction, so a rolled-back batch rolls its queue changes back too. `seq` orders each
/// key's tickets by arrival (a new rowid is larger than every existing one); `mode` and
/// `shared_limit` are what the ticket asks for, as the locks table spells a hold; `value` the
/// value its latest request carried, which a hand-off grants with the hold.
const QUEUE_SCHEMA: &str = "
CREATE TEMP TABLE IF NOT EXISTS tickets (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    ttl_ms INTEGER NOT NULL,
    open_until INTEGER NOT NULL,
    grace_ms INTEGER NOT NULL,
    mode TEXT NOT NULL,
    shared_limit INTEGER,
    value TEXT,
    UNIQUE (key, session_id)
);
CREATE INDEX IF NOT EXISTS temp.tickets_by_key ON tickets(key, seq);
CREATE INDEX IF NOT EXISTS temp.tickets_by_session ON tickets(session_id);
";

/// Everything the writer thread owns.
pub(super) struct Db {
    pub conn: Connection,
    pub tokens: TokenAllocator,
    /// Names holders in L7 answers.
    pub holder_ids: HolderIds,
    /// Grants are refused until this wall-clock millisecond (see `recovery`).
    pub holdback_until: u64,
    /// One clock reading per batch, so every job of a batch sees the same instant.
    pub now: u64,
    /// `(key, session, grant for an open request)` of every hand-off in this batch: those
    /// waiters are woken after the commit.
    pub granted: Vec<(String, String, Option<HandedOff>)>,
    /// Which keys may have tickets, so that a key without any reads none.
    pub queued: QueuedKeys,
    /// L8: the key feeds this store publishes to.
    pub feeds: Feeds,
    /// L8: events of this batch, published after its commit.
    pub events: Pending,
}

impl Db {
    /// Live tickets of `key`: its `waiterCount`. A key without tickets (known in memory)
    /// costs no read.
    pub fn live_ticket_count(&self, key: &str) -> Result<u32, StoreError> {
        if !self.queued.may_have(key) {
            return Ok(0);
        }
        self.conn
            .prepare_cached(
                "SELECT COUNT(*) FROM tickets t JOIN sessions s ON s.id = t.session_id
                 WHERE t.key = ?1 AND t.open_until + t.grace_ms > ?2 AND s.expires_at > ?2",
            )
            .map_err(sql)?
            .query_row(rusqlite::params![key, self.now], |r| r.get(0))
            .map_err(sql)
    }

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

/// L8: what the writer thread keeps between a change of a watched key and its publication
/// (see `events`).
#[derive(Default)]
pub(super) struct Pending {
    /// Recorded in this batch, in order.
    pub events: Vec<(String, Pos, WatchEvent)>,
    /// Watched keys whose tickets changed in the current job.
    pub touched: Vec<String>,
    /// The `waiterCount` watchers of a key last saw (its latest event or state read).
    pub last_waiters: HashMap<String, u32>,
}

/// A hold's kind as the `locks` and `tickets` rows spell it: `(mode, shared_limit)`.
pub(super) fn hold_columns(hold: HoldKind) -> (&'static str, Option<u32>) {
    (hold.mode().as_str(), hold.limit())
}

/// The kind of hold a row's `mode` (column `mode`) and `shared_limit` (column `limit`)
/// spell; anything but 'shared' is exclusive (the table's CHECK allows nothing else).
pub(super) fn hold_of_row(row: &Row, mode: usize, limit: usize) -> rusqlite::Result<HoldKind> {
    Ok(match row.get_ref(mode)?.as_str()? {
        "shared" => HoldKind::Shared {
            limit: row.get(limit)?,
        },
        _ => HoldKind::Exclusive,
    })
}

/// An SQLite failure: never the client's fault; a full, failing, read-only or locked
/// database is STORE_UNAVAILABLE (see `faults`).
pub(super) fn sql(err: rusqlite::Error) -> StoreError {
    super::faults::from_sqlite(err)
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
    migrate(&conn)?;
    conn.execute_batch(QUEUE_SCHEMA).map_err(sql)?;
    Ok(conn)
}

/// Applies the [`MIGRATIONS`] the file has not seen yet.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: usize = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql)?;
    for (done, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.unchecked_transaction().map_err(sql)?;
        tx.execute_batch(migration).map_err(sql)?;
        tx.pragma_update(None, "user_version", done + 1)
            .map_err(sql)?;
        tx.commit().map_err(sql)?;
    }
    Ok(())
}

/// The holder-id key, created on the first start. Its commit reaches the file before any
/// session could be named with it, and WAL commits are durable in order: whatever a crash
/// keeps of later sessions, it keeps this key too.
pub(super) fn holder_ids(conn: &Connection) -> Result<HolderIds, StoreError> {
    let stored: Option<Vec<u8>> = conn
        .query_row(
            "SELECT value FROM secrets WHERE name = ?1",
            [HOLDER_ID_KEY],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    if let Some(bytes) = stored {
        return HolderIds::from_stored(&bytes);
    }
    let ids = HolderIds::new(HolderIds::new_key()?);
    conn.execute(
        "INSERT INTO secrets (name, value) VALUES (?1, ?2)",
        rusqlite::params![HOLDER_ID_KEY, ids.key().as_slice()],
    )
    .map_err(sql)?;
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_from_before_the_migrations_opens_with_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        {
            // What the first release wrote: its schema, verbatim, and user_version 0.
            let old = Connection::open(&path).unwrap();
            old.execute_batch(SCHEMA).unwrap();
            old.execute_batch(
                "INSERT INTO sessions (id, owner, ttl_ms, expires_at) VALUES ('s1', 'w', 1000, 99);
                 INSERT INTO locks (key, session_id, token, ttl_ms, expires_at)
                 VALUES ('k', 's1', 7, 1000, 99);",
            )
            .unwrap();
        }
        let conn = open_connection(&path).unwrap();
        let session: (String, Option<String>, Option<String>) = conn
            .query_row("SELECT id, owner, client FROM sessions", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(session, ("s1".into(), Some("w".into()), None));
        let token: u64 = conn
            .query_row("SELECT token FROM locks WHERE key = 'k'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(token, 7);
        let ids = holder_ids(&conn).unwrap();
        drop(conn);
        // A second open migrates nothing and finds the same holder-id key.
        let again = open_connection(&path).unwrap();
        let version: usize = again
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len());
        assert_eq!(holder_ids(&again).unwrap().of("s1"), ids.of("s1"));
    }

    /// A data dir of the release before the unfenced ledger (every migration before it
    /// applied) keeps its fenced ledger, and gains the unfenced one, empty and separate.
    #[test]
    fn a_file_from_before_the_unfenced_ledger_keeps_its_ledger_and_gains_the_unfenced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(SCHEMA).unwrap();
            for migration in &MIGRATIONS[..5] {
                old.execute_batch(migration).unwrap();
            }
            old.pragma_update(None, "user_version", 5).unwrap();
            old.execute_batch(
                "INSERT INTO ledger_entries (key, token, entry) VALUES ('k', 7, 'before');
                 INSERT INTO ledger_heads (key, highest) VALUES ('k', 7);",
            )
            .unwrap();
        }
        let conn = open_connection(&path).unwrap();
        let version: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len());
        let fenced: (u64, String) = conn
            .query_row("SELECT token, entry FROM ledger_entries", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(fenced, (7, "before".into()));
        let unfenced: u32 = conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM unfenced_entries) + (SELECT COUNT(*) FROM unfenced_heads)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(unfenced, 0);
        assert!(conn
            .execute_batch(
                "INSERT INTO unfenced_entries (key, token, entry, stale) VALUES ('k', 1, 'x', 2);"
            )
            .is_err());
    }

    /// What the release before shared holds wrote: the first schema and the migrations
    /// before the third, one row per key; `rows` are its sessions and locks.
    fn exclusive_only_file(path: &Path, rows: &str) {
        let old = Connection::open(path).unwrap();
        old.execute_batch(SCHEMA).unwrap();
        for migration in &MIGRATIONS[..2] {
            old.execute_batch(migration).unwrap();
        }
        old.pragma_update(None, "user_version", 2).unwrap();
        old.execute_batch(rows).unwrap();
    }

    #[test]
    fn a_file_from_before_shared_holds_keeps_its_locks_as_exclusive_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        exclusive_only_file(
            &path,
            "INSERT INTO sessions (id, ttl_ms, expires_at) VALUES ('s1', 1000, 99);
             INSERT INTO locks (key, session_id, token, ttl_ms, expires_at, claim_by)
             VALUES ('k', 's1', 7, 1000, 99, NULL), ('handed', 's1', 9, 1000, 99, 120);",
        );
        let conn = open_connection(&path).unwrap();
        // Each row as `key token claim_by mode shared_limit`.
        let rows: Vec<String> = conn
            .prepare(
                "SELECT key || ' ' || token || ' ' || IFNULL(claim_by, '-') || ' ' || mode
                        || ' ' || IFNULL(shared_limit, '-')
                 FROM locks ORDER BY key",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, ["handed 9 120 exclusive -", "k 7 - exclusive -"]);
        // One row per hold now: another session may hold 'k' beside s1, s1 only once.
        conn.execute_batch(
            "INSERT INTO locks (key, session_id, token, ttl_ms, expires_at, mode, shared_limit)
             VALUES ('k', 's2', 10, 1000, 99, 'shared', 3);",
        )
        .unwrap();
        assert!(conn
            .execute_batch(
                "INSERT INTO locks (key, session_id, token, ttl_ms, expires_at)
                 VALUES ('k', 's1', 11, 1000, 99);"
            )
            .is_err());
        assert!(conn
            .execute_batch(
                "INSERT INTO locks (key, session_id, token, ttl_ms, expires_at, mode)
                 VALUES ('x', 's1', 12, 1000, 99, 'bogus');"
            )
            .is_err());
        let version: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len());
        let indexed: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'locks_by_session'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(indexed, "the session index is made again");
    }

    /// The whole store on a data dir of the release before shared holds (its database, its
    /// token reservation, stopped cleanly): the lock is served as an exclusive hold with its
    /// token, renewed and released, and the next grant's token is above it.
    #[tokio::test]
    async fn the_store_serves_a_lock_from_before_shared_holds() {
        use crate::store::sqlite::{SqliteOptions, SqliteStore};
        use crate::store::{AcquireCall, Acquired, SessionRef, Store};

        let dir = tempfile::tempdir().unwrap();
        let far = crate::store::lease::now_millis() + 120_000;
        exclusive_only_file(
            &dir.path().join(DB_FILE),
            &format!(
                "INSERT INTO sessions (id, ttl_ms, expires_at) VALUES ('s1', 120000, {far});
                 INSERT INTO sessions (id, ttl_ms, expires_at) VALUES ('s2', 120000, {far});
                 INSERT INTO locks (key, session_id, token, ttl_ms, expires_at)
                 VALUES ('k', 's1', 7, 60000, {far});"
            ),
        );
        let boot_id = dir.path().join("boot_id");
        std::fs::write(&boot_id, "boot\n").unwrap();
        std::fs::write(
            dir.path().join(super::super::fencing::FILE_NAME),
            r#"{"reservedUpto":65536,"bootId":"boot","holdbackUntilMillis":0}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join(super::super::recovery::CLEAN_MARKER), "").unwrap();
        let store = SqliteStore::open(&SqliteOptions {
            data_dir: dir.path().to_path_buf(),
            boot_id_path: boot_id,
            unclean_holdback_millis: 300_000,
            feed_limits: Default::default(),
        })
        .unwrap();

        let state = store.lock_state("k").await.unwrap();
        assert_eq!(state.hold, Some(HoldKind::Exclusive));
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.holders[0].fencing_token, 7);
        let beat = store.heartbeat(SessionRef::new("s1", None), None).await;
        let locks = beat.unwrap().locks.unwrap();
        assert_eq!(locks.len(), 1);
        assert_eq!(
            (locks[0].fencing_token, locks[0].mode),
            (7, lock_api::LockMode::Exclusive)
        );
        let call = |session_id, hold| AcquireCall {
            key: "k",
            session_id,
            client: None,
            ttl_millis: 10_000,
            hold,
            value: None,
            queue: None,
        };
        let shared = HoldKind::Shared { limit: None };
        assert!(matches!(
            store.acquire(call("s2", shared)).await.unwrap(),
            Acquired::Contended { .. }
        ));
        let Acquired::Granted(again) = store
            .acquire(call("s1", HoldKind::Exclusive))
            .await
            .unwrap()
        else {
            panic!("the holder's L4 is its grant");
        };
        assert_eq!(again.grant.fencing_token, 7);
        store.release("k", 7).await.unwrap();
        let Acquired::Granted(next) = store.acquire(call("s2", shared)).await.unwrap() else {
            panic!("a free key is granted");
        };
        assert!(next.grant.fencing_token > 65_536);
        store.close().await.unwrap();
    }
}
