//! The embedded default backend: one SQLite file in the data directory.
//!
//! One writer thread owns the only connection and runs every operation, reads included, and
//! commits batches of requests as one transaction each (group commit). WAL +
//! `synchronous=NORMAL`: a commit is a `write(2)` into the page cache, so it survives kill -9;
//! only an OS crash can lose it, and `recovery` plus `fencing` make that safe (see
//! ARCHITECTURE.md, "Durability").
//!
//! Layout:
//! - `db`: the file, schema and connection settings; `Db`, the state operations run on.
//! - `writer`: the writer thread, its batches and the shutdown checkpoint.
//! - `sessions` (L1 L2 L3 L5), `locks` (L4 L6 L7 R1, exclusive and shared holds, and the
//!   wait queue with its hand-off),
//!   `ledger` (the demo ledgers, fenced and unfenced): the operations, each a function of
//!   `&mut Db` run inside a batch.
//! - `queued_keys`: which keys may have tickets (in memory, so a key without any reads none).
//! - `reaper`: deletes expired rows and hands the freed keys to their queues.
//! - `faults`: SQLite and file failures → STORE_UNAVAILABLE with their cause, or 500.
//! - `fencing`: token allocation with durable reserved blocks (never a repeated token).
//! - `recovery`: start-up classification (clean marker, boot id, grant hold-back).
//! - `dir_lock`: the data dir's `flock`, held by the serving store (and by `backup` and
//!   `restore` offline), so a second server or a restore is refused before it writes.
//! - `control`: the data dir's control socket, through which `lock-server backup` has the
//!   serving writer thread copy the database between two batches.
//! - `backup`: `lock-server backup` and `restore` (a restore starts at the next token epoch).
//! - `events`: L8 events of watched keys, recorded in the transaction, published after its
//!   commit.
//! - `hold_changes`: L2's versions, what changed in each session's holds (TEMP triggers).

pub mod backup;
mod control;
mod db;
mod dir_lock;
mod events;
mod faults;
mod fencing;
mod hold_changes;
mod ledger;
mod locks;
mod queued_keys;
mod reaper;
mod recovery;
mod sessions;
#[cfg(test)]
mod test_store;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use lock_api::{HeartbeatResponse, LedgerEntries, SessionOpened, SessionStatus};

use self::db::{sql, Db};
use self::dir_lock::DirLock;
use self::fencing::TokenAllocator;
use self::sessions::SessionOf;
use self::writer::Writer;
use super::feeds::{FeedLimits, Feeds, Pos};
use super::holder_id::HolderIds;
use super::lease::now_millis;
use super::wakeup::KeyWakeups;
use super::{
    queue, session, AcquireCall, Acquired, KeyState, NewSession, SessionRef, Store, StoreCounts,
    StoreError, Subscription,
};

pub use self::db::DB_FILE;
pub use self::dir_lock::LOCK_FILE;
pub use self::recovery::StartState;

/// Options for [`SqliteStore::open`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The data directory (created if missing).
    pub data_dir: PathBuf,
    /// The kernel boot id file (`/proc/sys/kernel/random/boot_id`).
    pub boot_id_path: PathBuf,
    /// Hold-back after an unclean start across a reboot (the largest TTL).
    pub unclean_holdback_millis: u64,
    /// L8: what the key feeds keep and allow.
    pub feed_limits: FeedLimits,
}

/// The SQLite [`Store`].
pub struct SqliteStore {
    writer: Writer,
    wakeups: Arc<KeyWakeups>,
    start: StartState,
    /// The key stored in `lock.db`, kept here too so L1 and log lines need no writer job.
    holder_ids: HolderIds,
    /// L8: the keys' event feeds, under a random epoch per start: positions restart with
    /// the process, so an id from before a restart must not look like one of now.
    feeds: Feeds,
    /// The data dir is this store's until the process ends.
    _dir_lock: DirLock,
}

impl SqliteStore {
    /// Opens (or creates) the store in `options.data_dir`, classifies the start, reserves a
    /// token block and starts the writer thread and the reaper. Call inside a tokio runtime.
    pub fn open(options: &SqliteOptions) -> Result<Arc<SqliteStore>, StoreError> {
        let dir = &options.data_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Internal(format!("data dir {}: {e}", dir.display())))?;
        let dir_lock = take_dir(dir)?;
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
        let conn = db::open_connection(&db_file)?;
        hold_changes::create(&conn)?;
        let holder_ids = db::holder_ids(&conn)?;
        let feeds = Feeds::new(new_epoch()?, options.feed_limits);
        let db = Db {
            conn,
            tokens,
            holder_ids: holder_ids.clone(),
            holdback_until: start.holdback_until_millis,
            now,
            granted: Vec::new(),
            queued: Default::default(),
            feeds: feeds.clone(),
            events: Default::default(),
        };
        let wakeups = Arc::new(KeyWakeups::default());
        let writer = Writer::spawn(db, wakeups.clone(), dir.clone())?;
        control::spawn(dir, writer.clone());
        let store = Arc::new(SqliteStore {
            writer,
            wakeups,
            start,
            holder_ids,
            feeds,
            _dir_lock: dir_lock,
        });
        reaper::spawn(Arc::downgrade(&store));
        Ok(store)
    }

    /// What the start found (clean, rebooted, hold-back deadline).
    pub fn start_state(&self) -> &StartState {
        &self.start
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn proclaim(
        &self,
        key: &str,
        session: SessionRef<'_>,
        fencing_token: u64,
        value: &str,
    ) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        let session = SessionOf::new(session.id, session.client);
        self.writer
            .run(move |db| locks::proclaim(db, &key, &session, fencing_token, value))
            .await
    }

    fn feeds(&self) -> &Feeds {
        &self.feeds
    }

    async fn watch(&self, key: &str, after: Option<&str>) -> Result<Subscription, StoreError> {
        // The writer publishes a key's changes from the first commit that finds its feed.
        self.feeds
            .subscribe_counted(key, after)
            .map_err(|_| StoreError::TooManyWatchers)
    }

    async fn watch_state(&self, key: &str) -> Result<(KeyState, Pos), StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| {
                let state = locks::state(db, &key)?;
                events::state_read(db, &key, state.waiters);
                // On the writer thread, after every event recorded so far: exact here.
                Ok((state, db.feeds.current_pos()))
            })
            .await
    }

    async fn open_session(&self, new: NewSession<'_>) -> Result<SessionOpened, StoreError> {
        let id = session::new_id()?;
        let holder_id = self.holder_ids.of(&id);
        let opened = session::opened(id, holder_id, new.ttl_millis);
        let (owner, client) = (new.owner, new.client.map(str::to_string));
        self.writer
            .run(move |db| sessions::open(db, opened, owner, client))
            .await
    }

    async fn heartbeat(
        &self,
        session: SessionRef<'_>,
        since: Option<&str>,
    ) -> Result<HeartbeatResponse, StoreError> {
        let session = SessionOf::new(session.id, session.client);
        let since = since.map(str::to_owned);
        self.writer
            .run(move |db| {
                let freed = sessions::reap_dead_holds(db, &session)?;
                // Their keys go to their queues in the heartbeat's transaction, as the
                // reaper would hand them on.
                locks::settle_all(db, &freed)?;
                sessions::heartbeat(db, &session, since.as_deref())
            })
            .await
    }

    async fn close_session(&self, session: SessionRef<'_>) -> Result<(), StoreError> {
        let session = SessionOf::new(session.id, session.client);
        self.writer
            .run(move |db| {
                let freed = sessions::close(db, &session)?;
                // Each freed key goes to its grantable head tickets in the closing transaction.
                locks::settle_all(db, &freed)
            })
            .await
    }

    async fn session_status(&self, session: SessionRef<'_>) -> Result<SessionStatus, StoreError> {
        let session = SessionOf::new(session.id, session.client);
        self.writer
            .run(move |db| sessions::status(db, &session))
            .await
    }

    async fn acquire(&self, call: AcquireCall<'_>) -> Result<Acquired, StoreError> {
        let (key, session_id) = (call.key, call.session_id);
        // Registered for the whole request: a hand-off between an attempt and the wait
        // leaves a permit, so it is not missed. A request that may not queue never waits.
        let registration = call.queue.map(|_| self.wakeups.register(key, session_id));
        let cancel = || {
            if let Some(queue) = call.queue {
                let (key, id) = (key.to_string(), session_id.to_string());
                self.writer
                    .submit(move |db| locks::end_wait(db, &key, &id, queue.open_until));
            }
        };
        let registration = &registration;
        queue::acquire_with(
            call.queue,
            cancel,
            |queue| {
                let (key, session) = (key.to_string(), SessionOf::new(session_id, call.client));
                let (ttl_millis, hold) = (call.ttl_millis, call.hold);
                let value = call.value.map(str::to_string);
                self.writer.run(move |db| {
                    locks::acquire(db, &key, &session, ttl_millis, hold, value, queue)
                })
            },
            |bound, _| async move {
                match registration {
                    Some(registration) => registration.handed_off(bound).await,
                    None => None,
                }
            },
        )
        .await
    }

    async fn holder_id(&self, session_id: &str) -> Result<String, StoreError> {
        Ok(self.holder_ids.of(session_id))
    }

    async fn release(&self, key: &str, fencing_token: u64) -> Result<(), StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| locks::release(db, &key, fencing_token))
            .await
    }

    async fn lock_state(&self, key: &str) -> Result<KeyState, StoreError> {
        let key = key.to_string();
        self.writer.run(move |db| locks::state(db, &key)).await
    }

    async fn revoke(&self, key: &str, fencing_token: Option<u64>) -> Result<Vec<u64>, StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| locks::revoke(db, &key, fencing_token))
            .await
    }

    async fn ledger_append(&self, key: &str, token: u64, entry: String) -> Result<(), StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| ledger::append(db, &key, token, entry))
            .await
    }

    async fn ledger_read(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        let key = key.to_string();
        self.writer.run(move |db| ledger::read(db, &key)).await
    }

    async fn unfenced_append(
        &self,
        key: &str,
        token: u64,
        entry: String,
    ) -> Result<bool, StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| ledger::append_unfenced(db, &key, token, entry))
            .await
    }

    async fn unfenced_read(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        let key = key.to_string();
        self.writer
            .run(move |db| ledger::read_unfenced(db, &key))
            .await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.writer.run(counts).await
    }

    async fn probe(&self) -> Result<(), StoreError> {
        self.writer.run(probe).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.writer.close().await
    }
}

/// The readiness probe's write: the one `probe` row, rewritten in a batch like any request.
fn probe(db: &mut Db) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "INSERT INTO probe (id, at) VALUES (1, ?1)
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        )
        .map_err(sql)?
        .execute([db.now])
        .map_err(sql)?;
    Ok(())
}

/// The data dir's lock, before anything in it is read or written.
fn take_dir(dir: &std::path::Path) -> Result<DirLock, StoreError> {
    match DirLock::try_take(dir) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => Err(StoreError::Internal(format!(
            "data dir {} is in use by another lock-server (or a restore)",
            dir.display()
        ))),
        Err(e) => Err(StoreError::Internal(format!(
            "data dir {}: cannot lock {}: {e}",
            dir.display(),
            dir_lock::LOCK_FILE
        ))),
    }
}

/// Live sessions and holds (every mode, and the shared ones).
fn counts(db: &mut Db) -> Result<StoreCounts, StoreError> {
    let sessions: u64 = db
        .conn
        .prepare_cached("SELECT COUNT(*) FROM sessions WHERE expires_at > ?1")
        .map_err(sql)?
        .query_row([db.now], |r| r.get(0))
        .map_err(sql)?;
    let (locks, shared_holds): (u64, u64) = db
        .conn
        .prepare_cached(
            "SELECT COUNT(*), COUNT(CASE WHEN l.mode = 'shared' THEN 1 END)
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.expires_at > ?1 AND s.expires_at > ?1
               AND (l.claim_by IS NULL OR l.claim_by > ?1)",
        )
        .map_err(sql)?
        .query_row([db.now], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?;
    Ok(StoreCounts {
        sessions,
        locks,
        shared_holds,
    })
}

/// A start's feed epoch: 8 random hex digits (a resume from another start meets another
/// epoch and is a `reset`; 2^-32 is the chance two starts share one).
fn new_epoch() -> Result<String, StoreError> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Internal(format!("no randomness for a feed epoch: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
