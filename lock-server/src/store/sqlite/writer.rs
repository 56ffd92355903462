//! The writer thread: it owns the only connection and runs every operation, reads included
//! (they are microseconds; a second connection would only add locking). It drains the job
//! queue in batches and commits each batch as one transaction (group commit), answering each
//! request only after its batch committed. A batch's L8 events are published after its
//! commit (see `events`), before its answers.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::db::{sql, Db};
use super::{events, recovery};
use crate::store::lease;
use crate::store::wakeup::KeyWakeups;
use crate::store::StoreError;

/// Most jobs committed in one transaction.
const MAX_BATCH: usize = 512;

type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A job: runs on the writer thread, returns an error that must abort the batch (if any)
/// and the reply to send once the batch's fate is known. Given no `Db` (its batch's
/// transaction could not begin), it runs nothing and only hands its reply back.
type Work = Box<dyn FnOnce(Option<&mut Db>) -> (Option<StoreError>, Reply) + Send>;

/// A job run between two batches, outside any transaction (a backup's `VACUUM INTO`).
type Between = Box<dyn FnOnce(&mut Db) + Send>;

enum Job {
    Work(Work),
    Between(Between),
    Close(oneshot::Sender<Result<(), StoreError>>),
}

/// The handle to the writer thread; the thread ends after [`Writer::close`].
#[derive(Clone)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    /// Starts the thread on `db`. After each commit it wakes the waiters that batch's
    /// hand-offs granted; `dir` receives the clean-shutdown marker on close.
    pub(super) fn spawn(
        db: Db,
        wakeups: Arc<KeyWakeups>,
        dir: PathBuf,
    ) -> Result<Writer, StoreError> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(db, rx, wakeups, dir))
            .map_err(|e| StoreError::Internal(format!("writer thread: {e}")))?;
        Ok(Writer { jobs: tx })
    }

    /// Runs `f` on the writer thread inside the current batch's transaction; answers after
    /// the commit. `f` must check its preconditions before writing; an `Internal` or
    /// `StoreUnavailable` error (a write that failed half-way) rolls the whole batch back.
    pub(super) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.send(f, move |result| {
            let _ = tx.send(result);
        })?;
        rx.await.map_err(|_| closed())?
    }

    /// Like [`Writer::run`] without waiting for the answer (nobody is left to read it).
    pub(super) fn submit<F>(&self, f: F)
    where
        F: FnOnce(&mut Db) -> Result<(), StoreError> + Send + 'static,
    {
        let _ = self.send(f, |_| {});
    }

    fn send<T, F, A>(&self, f: F, answer: A) -> Result<(), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
        A: FnOnce(Result<T, StoreError>) + Send + 'static,
    {
        let work: Work = Box::new(move |db| {
            let Some(db) = db else {
                // Not run: the reply is always given the batch's error.
                let reply: Reply = Box::new(move |commit| answer(commit.and(Err(closed()))));
                return (None, reply);
            };
            let result = f(db);
            let abort = match &result {
                Err(e @ (StoreError::Internal(_) | StoreError::StoreUnavailable { .. })) => {
                    Some(e.clone())
                }
                _ => None,
            };
            let reply: Reply = Box::new(move |commit| answer(commit.and(result)));
            (abort, reply)
        });
        self.jobs.send(Job::Work(work)).map_err(|_| closed())
    }

    /// Runs `f` on the writer thread after the current batch committed and before the next
    /// begins, outside any transaction: it sees exactly the committed state, and no grant
    /// happens while it runs.
    pub(super) async fn run_between<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Between = Box::new(move |db| {
            let _ = tx.send(f(db));
        });
        self.jobs.send(Job::Between(job)).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())?
    }

    /// Finishes the queued jobs, checkpoints and closes the database, writes the clean
    /// marker; every later job is answered 503.
    pub(super) async fn close(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.jobs.send(Job::Close(tx)).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())?
    }
}

/// Whether `err` says the writer has closed (the reaper stops on it, and on nothing else).
pub(super) fn is_closed(err: &StoreError) -> bool {
    *err == closed()
}

fn closed() -> StoreError {
    StoreError::Unavailable {
        reason: "store is shutting down".into(),
        leader: None,
        retry_after_millis: Some(1_000),
    }
}

fn writer_loop(mut db: Db, rx: mpsc::Receiver<Job>, wakeups: Arc<KeyWakeups>, dir: PathBuf) {
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::with_capacity(16);
        let mut close = None;
        let mut between = None;
        match first {
            Job::Work(w) => batch.push(w),
            Job::Between(b) => between = Some(b),
            Job::Close(reply) => close = Some(reply),
        }
        while close.is_none() && between.is_none() && batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(Job::Work(w)) => batch.push(w),
                Ok(Job::Between(b)) => between = Some(b),
                Ok(Job::Close(reply)) => close = Some(reply),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            let committed = run_batch(&mut db, batch);
            for (key, session_id, handed) in db.granted.drain(..) {
                if committed {
                    wakeups.wake(&key, &session_id, handed);
                }
            }
        }
        if let Some(between) = between {
            between(&mut db);
        }
        if let Some(reply) = close {
            let result = shut_down(db, &dir);
            wakeups.wake_all();
            let _ = reply.send(result);
            return;
        }
    }
}

/// Runs and commits one batch; whether it committed.
fn run_batch(db: &mut Db, batch: Vec<Work>) -> bool {
    db.now = lease::now_millis();
    if let Err(e) = transaction_statement(db, "BEGIN IMMEDIATE") {
        // Nothing ran: each caller gets the cause (a full or failing disk, a database
        // locked by another process: 503 STORE_UNAVAILABLE; anything else 500).
        let error = sql(e);
        for work in batch {
            let (_, reply) = work(None);
            reply(Err(error.clone()));
        }
        return false;
    }
    db.queued.reload_if_unknown(&db.conn);
    let mut replies = Vec::with_capacity(batch.len());
    let mut failed = None;
    for work in batch {
        // Jobs check every precondition before their first write, so a job's logical error
        // (`SessionNotFound`, `LockLost`, ...) leaves nothing behind. Only an `Internal` or
        // `StoreUnavailable` error (a write the disk refused) can strike mid-job; then the
        // whole batch is rolled back (no per-job savepoint: it would cost three statements
        // per request on the hot path), and every job of it answers that error: nothing of
        // the batch was applied, so each may be retried.
        if failed.is_some() {
            // Not run: SQLite may already have ended the transaction (SQLITE_FULL and
            // SQLITE_IOERR can roll it back whole), and a job run after that would commit
            // each of its statements on its own, outside the batch.
            let (_, reply) = work(None);
            replies.push(reply);
            continue;
        }
        let (outcome, reply) = work(Some(db));
        replies.push(reply);
        if let Some(e) = outcome {
            failed = Some(e);
            continue;
        }
        // The job's ticket changes, as watchers of its keys see them (`waiters`).
        if let Err(e) = events::finish_job(db) {
            failed = Some(e);
            continue;
        }
        if db.conn.is_autocommit() {
            // A job that swallowed the error of a statement that ended the transaction.
            failed = Some(StoreError::Internal(
                "the batch's transaction ended under a job".into(),
            ));
        }
    }
    let commit = match failed {
        Some(e) => Err(e),
        None => transaction_statement(db, "COMMIT").map_err(sql),
    };
    if commit.is_err() {
        // SQLite may have rolled back already (SQLITE_FULL can end the transaction); a
        // ROLLBACK without one fails harmlessly.
        let _ = db.conn.execute_batch("ROLLBACK");
        db.queued.rolled_back();
        events::rolled_back(&mut db.events);
    } else {
        // Before the answers: a client that sees its change answered finds its event in
        // the key's window when it resumes right after.
        events::publish(&mut db.events, &db.feeds);
    }
    let committed = commit.is_ok();
    for reply in replies {
        reply(commit.clone());
    }
    committed
}

/// `BEGIN` or `COMMIT` as a cached statement: `execute_batch` would parse it anew for every
/// batch, about 5 % of an uncontended cycle's instructions (docs/BENCHMARKS.md).
fn transaction_statement(db: &Db, statement: &str) -> rusqlite::Result<()> {
    db.conn.prepare_cached(statement)?.execute([]).map(drop)
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
