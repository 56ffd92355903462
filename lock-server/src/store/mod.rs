//! The storage seam. Routes speak only to [`Store`]; the embedded SQLite backend and the etcd
//! backend implement it, so the HTTP contract and its tests are the same for both.
//!
//! Every method is one atomic step against the backend (a waiting acquire is a series of
//! them: it waits between its attempts). Durations are milliseconds. Expiry
//! is the store's business: a store never reports a holder, session or lock whose TTL has run
//! out, whether or not a reaper has deleted it yet.
//!
//! Layout: this file (the trait, its outcomes and errors), what every backend shares
//! (`session`: ids and heartbeat cadence; `holder_id`: the public name of a session; `holds`:
//! exclusive and shared holds and when each is granted; `lease`:
//! wall-clock deadlines; `queue`: the rules of the wait queue per key; `wakeup`: waking
//! server-side waiters; `epoch`: token epochs, which restores move past), and one folder per backend with its private modules (`sqlite/`,
//! `etcd/`). Nothing here knows the server's configuration: `server.rs` picks the backend
//! and fills in its options.

pub mod epoch;
pub mod feeds;
pub mod holder_id;
pub mod holds;
pub mod lease;
pub mod queue;
pub mod session;
pub mod sqlite;
pub mod wakeup;

use async_trait::async_trait;
use lock_api::{
    HeartbeatResponse, HoldKind, Holder, LedgerEntries, LockGrant, LockMode, SessionOpened,
    SessionStatus, Unavailability,
};

/// The scale-out backend on etcd (`--backend etcd`), behind the default `etcd` feature.
#[cfg(feature = "etcd")]
pub mod etcd;

pub use self::feeds::Subscription;
pub use self::queue::Queueing;

/// How an L4 ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// A new grant, or the existing one, renewed, when this session already holds the key
    /// (L4 is idempotent per session: a retried request must not mint a second token).
    Granted(Grant),
    /// Another live session holds the key, or others queue for it, and the request's wait (if
    /// any) ended. `attempts`: store attempts this request made (for the log).
    Contended { attempts: u32 },
}

/// A grant as L4 answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The grant (`waitedMillis` is the route's to fill in, from `lease_start`).
    pub grant: LockGrant,
    /// Wall-clock millisecond from which the answered lease runs (`ttlMillis` from here): the
    /// grant's or renewal's instant, never before the request arrived.
    pub lease_start: u64,
    /// Store attempts this request made (for the log).
    pub attempts: u32,
}

/// The grant a backend answers for `key`'s hold of `session_id` of kind `hold` with its
/// token and TTL, built here once for both backends (`waitedMillis` 0: the route fills it
/// in).
pub fn lock_grant(
    key: &str,
    session_id: &str,
    hold: HoldKind,
    fencing_token: u64,
    ttl_millis: u64,
) -> LockGrant {
    LockGrant {
        key: key.to_owned(),
        session_id: session_id.to_owned(),
        fencing_token,
        ttl_millis,
        waited_millis: 0,
        mode: hold.mode(),
        limit: hold.limit(),
    }
}

/// L7's view of a key, read at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyState {
    /// How the key is held: `None` when free, else the mode and (shared) limit every holder
    /// holds it under.
    pub hold: Option<HoldKind>,
    /// Every live holder, in token order (one when exclusive).
    pub holders: Vec<Holder>,
    /// Live tickets in the key's queue (every replica's, on a shared backend).
    pub waiters: u32,
}

impl KeyState {
    /// L7's `mode`.
    pub fn mode(&self) -> Option<LockMode> {
        self.hold.map(HoldKind::mode)
    }

    /// L7's `holder`: the exclusive holder only, exactly the field from before shared holds.
    pub fn exclusive_holder(&self) -> Option<&Holder> {
        match self.hold {
            Some(HoldKind::Exclusive) => self.holders.first(),
            _ => None,
        }
    }
}

/// Failures a route maps to a contract error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// 404 SESSION_NOT_FOUND: unknown, closed or expired session.
    #[error("session not found")]
    SessionNotFound,
    /// 409 LOCK_LOST: L6 found no lock with that `(key, fencingToken)`.
    #[error("lock lost")]
    LockLost,
    /// 409 FENCED_OUT from the demo ledger: a higher token was already accepted.
    #[error("fenced out: highest token seen is {highest}")]
    FencedOut { highest: u64 },
    /// 409 LIMIT_MISMATCH: a shared L4's limit differs from `in_force`, the limit the key's
    /// shared holders (or, when none hold it, its first queued shared request) agreed on.
    #[error("the key's shared holds are under another limit")]
    LimitMismatch { in_force: Option<u32> },
    /// 409 UPGRADE_NOT_ALLOWED: an exclusive L4 of a session that holds the key shared.
    #[error("a shared hold cannot be upgraded to exclusive")]
    UpgradeNotAllowed,
    /// 429 CONTENTION_EXCEEDED: the key's queue already holds as many tickets as its cap.
    #[error("the key's wait queue is full")]
    QueueFull,
    /// 429 CONTENTION_EXCEEDED: the key already has as many watchers as its cap (L8).
    #[error("too many watchers of this key")]
    TooManyWatchers,
    /// 503 NOT_LEADER: this replica cannot serve the request now for a reason of its own
    /// (shutting down, or grants held back after a start that may have lost writes).
    /// Retry-safe.
    #[error("not serving: {reason}")]
    Unavailable {
        reason: String,
        leader: Option<String>,
        retry_after_millis: Option<u64>,
    },
    /// 503 STORE_UNAVAILABLE: the store could not write (or read) for `cause`, and nothing of
    /// the failed step was applied (a backend rolls the whole transaction back). Retry-safe
    /// after `retry_after_millis`.
    #[error("store unavailable: {cause}")]
    StoreUnavailable {
        cause: Unavailability,
        retry_after_millis: u64,
    },
    /// 500: a bug or an unexpected backend failure. Never caused by client input.
    #[error("internal store error: {0}")]
    Internal(String),
}

/// Gauges for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    pub sessions: u64,
    /// Live holds of every mode (a key held shared by three counts three).
    pub locks: u64,
    /// Those of them that are shared.
    pub shared_holds: u64,
}

/// An L1 as the store sees it: the session's TTL (validated), its owner label and the
/// authenticated client it will belong to.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// The session's TTL.
    pub ttl_millis: u64,
    /// The free-form owner label (validated).
    pub owner: Option<String>,
    /// The authenticated client, if auth is on.
    pub client: Option<&'a str>,
}

impl NewSession<'_> {
    /// A session of nobody in particular (no owner label, no auth).
    pub fn with_ttl(ttl_millis: u64) -> Self {
        NewSession {
            ttl_millis,
            owner: None,
            client: None,
        }
    }
}

/// A session as a request names it: its id and the client asking (`None` on a server
/// without an auth file). The store checks the pair in the step that finds the session.
#[derive(Debug, Clone, Copy)]
pub struct SessionRef<'a> {
    /// The session id.
    pub id: &'a str,
    /// The authenticated client, if auth is on.
    pub client: Option<&'a str>,
}

impl<'a> SessionRef<'a> {
    /// `id` as named by `client`.
    pub fn new(id: &'a str, client: Option<&'a str>) -> Self {
        SessionRef { id, client }
    }
}

/// An L4 as the store sees it: the key, the session asking (checked to belong to `client`
/// when auth is on), the lock's TTL, and how it may queue.
#[derive(Debug, Clone, Copy)]
pub struct AcquireCall<'a> {
    /// The key (validated).
    pub key: &'a str,
    /// The session asking.
    pub session_id: &'a str,
    /// The authenticated client, if auth is on.
    pub client: Option<&'a str>,
    /// The lock's TTL.
    pub ttl_millis: u64,
    /// Exclusive, or shared under a limit (validated).
    pub hold: HoldKind,
    /// The hold's value (validated); `None` keeps the value a renewed hold has.
    pub value: Option<&'a str>,
    /// `Some` when the request may wait in the key's queue.
    pub queue: Option<Queueing>,
}

/// A lock backend. Implementations: `sqlite::SqliteStore` (embedded default) and
/// `etcd::EtcdStore` (scale-out).
///
/// Sessions belong to clients. `client` is the auth-file client a request authenticated as
/// (`None` on a server without an auth file); it is stored with the session at L1, and every
/// operation naming a session checks it inside the same step that finds the session: a
/// session of another client is [`StoreError::SessionNotFound`], exactly as an unknown id,
/// so an id learnt somehow is worth nothing to anyone but its owner.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// L1: creates a session of `new.client` with a fresh 128-bit random id and its holder id.
    async fn open_session(&self, new: NewSession<'_>) -> Result<SessionOpened, StoreError>;

    /// L2: renews the session and every lock it holds; answers the session's hold version
    /// and, against `since` (the version the client last applied), nothing when it is the
    /// current one, what changed after it when the backend can say, else every lock it
    /// still holds. Never "unchanged" for a `since` the holds moved away from; any string
    /// the backend did not mint for this session's current holds gets the full list.
    async fn heartbeat(
        &self,
        session: SessionRef<'_>,
        since: Option<&str>,
    ) -> Result<HeartbeatResponse, StoreError>;

    /// L3: deletes the session and its tickets and releases all its locks (each to its
    /// queue's first live ticket).
    async fn close_session(&self, session: SessionRef<'_>) -> Result<(), StoreError>;

    /// L5: the session's remaining TTL and its locks.
    async fn session_status(&self, session: SessionRef<'_>) -> Result<SessionStatus, StoreError>;

    /// L4. If this session holds the key: the existing grant (same token, mode and the
    /// hold's own TTL), renewed to now + that TTL — except an exclusive L4 of a session that
    /// holds the key shared: [`StoreError::UpgradeNotAllowed`]. Else a shared L4 whose limit
    /// differs from the one in force is [`StoreError::LimitMismatch`]. Else, if the hold is
    /// grantable now (see [`queue`]: exclusive on a free key, shared beside shared holders
    /// under the limit) and no live ticket waits: a grant with a token strictly greater than
    /// every token ever issued for the key. Else, without `queue`: [`Acquired::Contended`] at
    /// once. With `queue`: take (or keep) this session's ticket and wait until a hand-off
    /// grants the hold to it or `queue.open_until` passes. Dropping the future ends the
    /// request's part in the ticket as if its wait had ended then.
    async fn acquire(&self, call: AcquireCall<'_>) -> Result<Acquired, StoreError>;

    /// The public holder id of `session_id` (see [`holder_id`]), for log lines. Any string
    /// has one; it says nothing about whether the session exists.
    async fn holder_id(&self, session_id: &str) -> Result<String, StoreError>;

    /// L6: compare-and-delete of the one hold `(key, fencing_token)` and nothing else; in the
    /// same transaction the queue's head tickets that are grantable now get the key.
    async fn release(&self, key: &str, fencing_token: u64) -> Result<(), StoreError>;

    /// L7: the live holders, named by their holder ids (never session ids), their mode and
    /// limit, and the queue's length, at one instant.
    async fn lock_state(&self, key: &str) -> Result<KeyState, StoreError>;

    /// R1: deletes every live hold of the key whoever holds it, or with `fencing_token` the
    /// one hold with that token (then hands the key on as L6 does); returns the revoked
    /// tokens in order (empty when nothing live matched).
    async fn revoke(&self, key: &str, fencing_token: Option<u64>) -> Result<Vec<u64>, StoreError>;

    /// L9: replaces the value of the hold `(key, fencing_token)` of `session`. A session that
    /// does not hold the key with that token now: [`StoreError::LockLost`]; an unknown
    /// session (or another client's): [`StoreError::SessionNotFound`]. Watchers get a
    /// `proclaimed` event.
    async fn proclaim(
        &self,
        key: &str,
        session: SessionRef<'_>,
        fencing_token: u64,
        value: &str,
    ) -> Result<(), StoreError>;

    /// The key's event feeds (ids, window, fan-out; see [`feeds`]).
    fn feeds(&self) -> &feeds::Feeds;

    /// L8: a watcher of `key` resuming after the event id `after` (`None`: from now, with a
    /// snapshot). The backend starts publishing the key's changes into [`Store::feeds`] if it
    /// was not already. [`StoreError::TooManyWatchers`] over the cap.
    async fn watch(&self, key: &str, after: Option<&str>) -> Result<Subscription, StoreError>;

    /// L8's `snapshot` and `reset`: the key now, and the position in the key's feed it is
    /// exact at (a watcher skips the live events at or before it).
    async fn watch_state(&self, key: &str) -> Result<(KeyState, feeds::Pos), StoreError>;

    /// Demo ledger: appends if the fencing `token` ≥ the highest token seen for `key`.
    async fn ledger_append(&self, key: &str, token: u64, entry: String) -> Result<(), StoreError>;

    /// Demo ledger: every accepted entry of `key`, in order.
    async fn ledger_read(&self, key: &str) -> Result<LedgerEntries, StoreError>;

    /// Unfenced demo ledger (a ledger of its own, beside the fenced one): appends whatever
    /// the token and returns whether it was stale, i.e. lower than the highest token this
    /// ledger had accepted for `key` (the highest stays the highest).
    async fn unfenced_append(
        &self,
        key: &str,
        token: u64,
        entry: String,
    ) -> Result<bool, StoreError>;

    /// Unfenced demo ledger: every entry of `key`, in order, each with its `stale`.
    async fn unfenced_read(&self, key: &str) -> Result<LedgerEntries, StoreError>;

    /// Live sessions and locks, for the gauges.
    async fn counts(&self) -> Result<StoreCounts, StoreError>;

    /// The readiness probe: one tiny real write, committed as every other write is, so that
    /// it fails exactly when they would ([`StoreError::StoreUnavailable`] with the cause).
    /// It touches nothing a request reads.
    async fn probe(&self) -> Result<(), StoreError>;

    /// Graceful shutdown: make everything durable and leave whatever marker tells the next
    /// start that nothing was lost. Called once, after the HTTP server stopped. Added after
    /// the first cut of the trait, hence the default (nothing to do for a remote backend).
    async fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
