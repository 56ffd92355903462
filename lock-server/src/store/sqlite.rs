//! The embedded default backend: one SQLite file in the data directory.
//!
//! One writer thread owns the only connection and runs every operation, reads included
//! (they are microseconds; a second connection would only add locking). It drains the job
//! queue in batches and commits each batch as one transaction (group commit), answering each
//! request only after its batch committed. WAL + `synchronous=NORMAL`: a commit is a
//! `write(2)` into the page cache, so it survives kill -9; only an OS crash can lose it, and
//! `recovery` plus `fencing` make that safe (see ARCHITECTURE.md, "Durability").

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_api::{
    HeartbeatResponse, HeldLock, Holder, LedgerEntries, LedgerEntry, LockGrant, LockStatus,
    SessionOpened, SessionStatus,
};
use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::wakeup::KeyWakeups;
use super::{Acquired, Store, StoreCounts, StoreError};
use crate::fencing::TokenAllocator;
use crate::lease::{heartbeat_interval, now_millis, remaining};
use crate::recovery::{self, StartState};
use crate::session_id::new_session_id;

/// Database file name inside the data dir.
pub const DB_FILE: &str = "lock.db";
/// Most jobs committed in one transaction.
const MAX_BATCH: usize = 512;
/// How often expired sessions and locks are deleted (ASSUMPTION: 200 ms). Correctness does
/// not depend on it: reads filter on the deadline; the reaper frees rows and wakes waiters.
const REAP_INTERVAL: Duration = Duration::from_millis(200);

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

/// Options for [`SqliteStore::open`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The data directory (created if missing).
    pub data_dir: PathBuf,
    /// The kernel boot id file (`/proc/sys/kernel/random/boot_id`).
    pub boot_id_path: PathBuf,
    /// Hold-back after an unclean start across a reboot (the largest TTL).
    pub unclean_holdback_millis: u64,
}

type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A job: runs on the writer thread, returns an internal error that must abort the batch
/// (if any) and the reply to send once the batch's fate is known.
type Work = Box<dyn FnOnce(&mut Db) -> (Option<StoreError>, Reply) + Send>;

enum Job {
    Work(Work),
    Close(oneshot::Sender<Result<(), StoreError>>),
}

/// The SQLite [`Store`].
pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
    wakeups: Arc<KeyWakeups>,
    start: StartState,
}

/// Everything the writer thread owns.
struct Db {
    conn: Connection,
    tokens: TokenAllocator,
    holdback_until: u64,
    /// One clock reading per batch, so every job of a batch sees the same instant.
    now: u64,
    /// Keys whose holder changed in this batch, woken after the commit.
    changed: Vec<String>,
}

fn sql(err: rusqlite::Error) -> StoreError {
    StoreError::Internal(format!("sqlite: {err}"))
}

impl SqliteStore {
    /// Opens (or creates) the store in `options.data_dir`, classifies the start, reserves a
    /// token block and starts the writer thread and the reaper. Call inside a tokio runtime.
    pub fn open(options: &SqliteOptions) -> Result<Arc<SqliteStore>, StoreError> {
        let dir = &options.data_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Internal(format!("data dir {}: {e}", dir.display())))?;
        let db_file = dir.join(DB_FILE);
        let now = now_millis();
        let start = recovery::begin(
            dir,
            &db_file,
            &options.boot_id_path,
            options.unclean_holdback_millis,
            now,
        )
        .map_err(|e| StoreError::Internal(e.to_string()))?;
        let tokens = TokenAllocator::open(
            dir,
            start.previous.clone(),
            start.boot_id.clone(),
            start.holdback_until_millis,
        )
        .map_err(|e| StoreError::Internal(e.to_string()))?;
        let conn = open_connection(&db_file)?;
        let db = Db {
            conn,
            tokens,
            holdback_until: start.holdback_until_millis,
            now,
            changed: Vec::new(),
        };
        let (tx, rx) = mpsc::channel();
        let wakeups = Arc::new(KeyWakeups::default());
        let thread_wakeups = wakeups.clone();
        let thread_dir = dir.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(db, rx, thread_wakeups, thread_dir))
            .map_err(|e| StoreError::Internal(format!("writer thread: {e}")))?;
        let store = Arc::new(SqliteStore {
            jobs: tx,
            wakeups,
            start,
        });
        spawn_reaper(Arc::downgrade(&store));
        Ok(store)
    }

    /// What the start found (clean, rebooted, hold-back deadline).
    pub fn start_state(&self) -> &StartState {
        &self.start
    }

    /// Runs `f` on the writer thread inside the current batch's transaction; answers after
    /// the commit. `f` must check its preconditions before writing; an `Internal` error
    /// rolls the whole batch back.
    async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let work: Work = Box::new(move |db| {
            let result = f(db);
            let abort = match &result {
                Err(e @ StoreError::Internal(_)) => Some(e.clone()),
                _ => None,
            };
            let reply: Reply = Box::new(move |commit| {
                let _ = tx.send(commit.and(result));
            });
            (abort, reply)
        });
        self.jobs.send(Job::Work(work)).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())?
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable {
        reason: "store is shutting down".into(),
        leader: None,
        retry_after_millis: Some(1_000),
    }
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
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

fn writer_loop(mut db: Db, rx: mpsc::Receiver<Job>, wakeups: Arc<KeyWakeups>, dir: PathBuf) {
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::with_capacity(16);
        let mut close = None;
        match first {
            Job::Work(w) => batch.push(w),
            Job::Close(reply) => close = Some(reply),
        }
        while close.is_none() && batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(Job::Work(w)) => batch.push(w),
                Ok(Job::Close(reply)) => close = Some(reply),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            run_batch(&mut db, batch);
            for key in db.changed.drain(..) {
                wakeups.wake(&key);
            }
        }
        if let Some(reply) = close {
            let result = shut_down(db, &dir);
            wakeups.wake_all();
            let _ = reply.send(result);
            return;
        }
    }
}

fn run_batch(db: &mut Db, batch: Vec<Work>) {
    db.now = now_millis();
    if let Err(e) = db.conn.execute_batch("BEGIN IMMEDIATE") {
        // Nothing ran. Dropping the jobs drops their reply channels: each caller sees 503.
        tracing::error!(event = "store_error", message = %e);
        return;
    }
    let mut replies = Vec::with_capacity(batch.len());
    let mut failed = None;
    for work in batch {
        // Jobs check every precondition before their first write, so a job's logical error
        // (`SessionNotFound`, `LockLost`, ...) leaves nothing behind. Only an `Internal`
        // error can strike mid-job; then the whole batch is rolled back (no per-job
        // savepoint: it would cost three statements per request on the hot path).
        let (outcome, reply) = work(db);
        if let Some(e) = outcome {
            failed.get_or_insert(e);
        }
        replies.push(reply);
    }
    let commit = match failed {
        Some(e) => Err(e),
        None => db.conn.execute_batch("COMMIT").map_err(sql),
    };
    if commit.is_err() {
        let _ = db.conn.execute_batch("ROLLBACK");
    }
    for reply in replies {
        reply(commit.clone());
    }
}

fn shut_down(db: Db, dir: &Path) -> Result<(), StoreError> {
    // The checkpoint copies the WAL into the database file and fsyncs it, so after the
    // marker nothing depends on the page cache any more.
    db.conn
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .map_err(sql)?;
    db.conn.close().map_err(|(_, e)| sql(e))?;
    recovery::mark_clean(dir).map_err(|e| StoreError::Internal(format!("clean marker: {e}")))
}

fn spawn_reaper(store: std::sync::Weak<SqliteStore>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REAP_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(store) = store.upgrade() else { return };
            if store.run(reap).await.is_err() {
                return;
            }
        }
    });
}

/// Deletes expired locks (own TTL or session gone) and expired sessions.
fn reap(db: &mut Db) -> Result<(), StoreError> {
    let now = db.now;
    let keys: Vec<String> = {
        let mut stmt = db
            .conn
            .prepare_cached(
                "DELETE FROM locks WHERE expires_at <= ?1 OR session_id NOT IN
                 (SELECT id FROM sessions WHERE expires_at > ?1) RETURNING key",
            )
            .map_err(sql)?;
        let rows = stmt
            .query_map([now], |r| r.get(0))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        rows
    };
    db.conn
        .prepare_cached("DELETE FROM sessions WHERE expires_at <= ?1")
        .map_err(sql)?
        .execute([now])
        .map_err(sql)?;
    db.changed.extend(keys);
    Ok(())
}

/// A live session's `(ttl_ms, expires_at)`.
fn live_session(db: &Db, id: &str) -> Result<(u64, u64), StoreError> {
    db.conn
        .prepare_cached("SELECT ttl_ms, expires_at FROM sessions WHERE id = ?1 AND expires_at > ?2")
        .map_err(sql)?
        .query_row(params![id, db.now], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(sql)?
        .ok_or(StoreError::SessionNotFound)
}

/// The key's lock row if it is live: `(session_id, token, ttl_ms, effective deadline)`.
fn live_lock(db: &Db, key: &str) -> Result<Option<(String, u64, u64, u64)>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms, MIN(l.expires_at, s.expires_at)
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND l.expires_at > ?2 AND s.expires_at > ?2",
        )
        .map_err(sql)?
        .query_row(params![key, db.now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .map_err(sql)
}

fn session_locks(db: &Db, id: &str) -> Result<Vec<(String, u64, u64)>, StoreError> {
    let mut stmt = db
        .conn
        .prepare_cached(
            "SELECT key, token, expires_at FROM locks
             WHERE session_id = ?1 AND expires_at > ?2 ORDER BY key",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![id, db.now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(rows)
}

fn acquire(db: &mut Db, key: &str, session_id: &str, ttl: u64) -> Result<Acquired, StoreError> {
    if db.now < db.holdback_until {
        let wait = db.holdback_until - db.now;
        return Err(StoreError::Unavailable {
            reason: format!(
                "holding back grants for {wait} ms after an unclean restart: leases granted \
                 before it may still be live"
            ),
            leader: None,
            retry_after_millis: Some(wait.min(5_000)),
        });
    }
    live_session(db, session_id)?;
    if let Some((holder, token, held_ttl, _)) = live_lock(db, key)? {
        if holder != session_id {
            return Ok(Acquired::Contended);
        }
        // Idempotent retry: the same grant, renewed from now, so the server's deadline is
        // never earlier than the one the client computes from its (later) send time.
        db.conn
            .prepare_cached("UPDATE locks SET expires_at = ?2 WHERE key = ?1")
            .map_err(sql)?
            .execute(params![key, db.now + held_ttl])
            .map_err(sql)?;
        return Ok(Acquired::Granted(LockGrant {
            key: key.to_string(),
            session_id: session_id.to_string(),
            fencing_token: token,
            ttl_millis: held_ttl,
        }));
    }
    let token = db
        .tokens
        .next_token()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO locks (key, session_id, token, ttl_ms, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?
        .execute(params![key, session_id, token, ttl, db.now + ttl])
        .map_err(sql)?;
    Ok(Acquired::Granted(LockGrant {
        key: key.to_string(),
        session_id: session_id.to_string(),
        fencing_token: token,
        ttl_millis: ttl,
    }))
}

fn delete_lock(db: &mut Db, key: &str) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM locks WHERE key = ?1")
        .map_err(sql)?
        .execute([key])
        .map_err(sql)?;
    db.changed.push(key.to_string());
    Ok(())
}

fn ledger_append(db: &mut Db, key: &str, token: u64, entry: String) -> Result<(), StoreError> {
    if let Some(highest) = ledger_head(db, key)? {
        if token < highest {
            return Err(StoreError::FencedOut { highest });
        }
    }
    db.conn
        .prepare_cached("INSERT INTO ledger_entries (key, token, entry) VALUES (?1, ?2, ?3)")
        .map_err(sql)?
        .execute(params![key, token, entry])
        .map_err(sql)?;
    db.conn
        .prepare_cached("INSERT OR REPLACE INTO ledger_heads (key, highest) VALUES (?1, ?2)")
        .map_err(sql)?
        .execute(params![key, token])
        .map_err(sql)?;
    Ok(())
}

/// The highest token the ledger of `key` has accepted, if any.
fn ledger_head(db: &Db, key: &str) -> Result<Option<u64>, StoreError> {
    db.conn
        .prepare_cached("SELECT highest FROM ledger_heads WHERE key = ?1")
        .map_err(sql)?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(sql)
}

fn ledger_read(db: &Db, key: &str) -> Result<LedgerEntries, StoreError> {
    let mut stmt = db
        .conn
        .prepare_cached("SELECT token, entry FROM ledger_entries WHERE key = ?1 ORDER BY seq")
        .map_err(sql)?;
    let entries = stmt
        .query_map([key], |r| {
            Ok(LedgerEntry {
                fencing_token: r.get(0)?,
                entry: r.get(1)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let highest_token = ledger_head(db, key)?;
    Ok(LedgerEntries {
        key: key.to_string(),
        highest_token,
        entries,
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn open_session(
        &self,
        ttl_millis: u64,
        owner: Option<String>,
    ) -> Result<SessionOpened, StoreError> {
        self.run(move |db| {
            let id = new_session_id();
            db.conn
                .prepare_cached(
                    "INSERT INTO sessions (id, owner, ttl_ms, expires_at) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?
                .execute(params![id, owner, ttl_millis, db.now + ttl_millis])
                .map_err(sql)?;
            Ok(SessionOpened {
                session_id: id,
                ttl_millis,
                heartbeat_millis: heartbeat_interval(ttl_millis),
            })
        })
        .await
    }

    async fn heartbeat(&self, session_id: &str) -> Result<HeartbeatResponse, StoreError> {
        let id = session_id.to_string();
        self.run(move |db| {
            let (ttl, _) = live_session(db, &id)?;
            db.conn
                .prepare_cached("UPDATE sessions SET expires_at = ?2 WHERE id = ?1")
                .map_err(sql)?
                .execute(params![id, db.now + ttl])
                .map_err(sql)?;
            // Only live locks are renewed: one whose own TTL ran out stays dead.
            db.conn
                .prepare_cached(
                    "UPDATE locks SET expires_at = ?2 + ttl_ms
                     WHERE session_id = ?1 AND expires_at > ?2",
                )
                .map_err(sql)?
                .execute(params![id, db.now])
                .map_err(sql)?;
            let locks = session_locks(db, &id)?
                .into_iter()
                .map(|(key, fencing_token, _)| HeldLock { key, fencing_token })
                .collect();
            Ok(HeartbeatResponse {
                ttl_millis: ttl,
                locks,
            })
        })
        .await
    }

    async fn close_session(&self, session_id: &str) -> Result<(), StoreError> {
        let id = session_id.to_string();
        self.run(move |db| {
            live_session(db, &id)?;
            let keys: Vec<String> = {
                let mut stmt = db
                    .conn
                    .prepare_cached("DELETE FROM locks WHERE session_id = ?1 RETURNING key")
                    .map_err(sql)?;
                let keys = stmt
                    .query_map([&id], |r| r.get(0))
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                keys
            };
            db.conn
                .prepare_cached("DELETE FROM sessions WHERE id = ?1")
                .map_err(sql)?
                .execute([&id])
                .map_err(sql)?;
            db.changed.extend(keys);
            Ok(())
        })
        .await
    }

    async fn session_status(&self, session_id: &str) -> Result<SessionStatus, StoreError> {
        let id = session_id.to_string();
        self.run(move |db| {
            let (_, session_deadline) = live_session(db, &id)?;
            let locks = session_locks(db, &id)?
                .into_iter()
                .map(|(key, fencing_token, deadline)| LockStatus {
                    key,
                    fencing_token,
                    remaining_millis: remaining(deadline.min(session_deadline), db.now),
                })
                .collect();
            Ok(SessionStatus {
                session_id: id,
                remaining_millis: remaining(session_deadline, db.now),
                locks,
            })
        })
        .await
    }

    async fn try_acquire(
        &self,
        key: &str,
        session_id: &str,
        ttl_millis: u64,
    ) -> Result<Acquired, StoreError> {
        let (key, id) = (key.to_string(), session_id.to_string());
        self.run(move |db| acquire(db, &key, &id, ttl_millis)).await
    }

    async fn release(&self, key: &str, fencing_token: u64) -> Result<(), StoreError> {
        let key = key.to_string();
        self.run(move |db| match live_lock(db, &key)? {
            Some((_, token, _, _)) if token == fencing_token => delete_lock(db, &key),
            _ => Err(StoreError::LockLost),
        })
        .await
    }

    async fn holder(&self, key: &str) -> Result<Option<Holder>, StoreError> {
        let key = key.to_string();
        self.run(move |db| {
            Ok(
                live_lock(db, &key)?.map(|(session_id, fencing_token, _, deadline)| Holder {
                    session_id,
                    fencing_token,
                    remaining_millis: remaining(deadline, db.now),
                }),
            )
        })
        .await
    }

    async fn revoke(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let key = key.to_string();
        self.run(move |db| {
            let token = live_lock(db, &key)?.map(|(_, token, _, _)| token);
            delete_lock(db, &key)?;
            Ok(token)
        })
        .await
    }

    async fn wait_change(&self, key: &str, timeout: Duration) {
        let registration = self.wakeups.register(key);
        let notified = registration.notify.notified();
        tokio::pin!(notified);
        // Enabled before the re-check, so a release between the caller's attempt and here
        // is either seen by the re-check or wakes this future; none is missed.
        notified.as_mut().enable();
        let bound = match self.holder(key).await {
            Ok(None) => return,
            // Wake just after the holder's lease would run out, even if no reaper ran yet.
            Ok(Some(h)) => timeout.min(Duration::from_millis(h.remaining_millis + 1)),
            Err(_) => timeout,
        };
        let _ = tokio::time::timeout(bound, notified).await;
    }

    async fn ledger_append(
        &self,
        key: &str,
        fencing_token: u64,
        entry: String,
    ) -> Result<(), StoreError> {
        let key = key.to_string();
        self.run(move |db| ledger_append(db, &key, fencing_token, entry))
            .await
    }

    async fn ledger_read(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        let key = key.to_string();
        self.run(move |db| ledger_read(db, &key)).await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.run(|db| {
            let sessions: u64 = db
                .conn
                .prepare_cached("SELECT COUNT(*) FROM sessions WHERE expires_at > ?1")
                .map_err(sql)?
                .query_row([db.now], |r| r.get(0))
                .map_err(sql)?;
            let locks: u64 = db
                .conn
                .prepare_cached(
                    "SELECT COUNT(*) FROM locks l JOIN sessions s ON s.id = l.session_id
                     WHERE l.expires_at > ?1 AND s.expires_at > ?1",
                )
                .map_err(sql)?
                .query_row([db.now], |r| r.get(0))
                .map_err(sql)?;
            Ok(StoreCounts { sessions, locks })
        })
        .await
    }

    async fn close(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.jobs.send(Job::Close(tx)).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())?
    }
}
