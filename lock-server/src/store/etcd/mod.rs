//! The scale-out backend: [`Store`] on an etcd v3 cluster, shared by any number of stateless
//! lock-server replicas.
//!
//! Layout:
//! - `keys`: the key layout under the configured prefix.
//! - `batch`: group commit of L4/L6 transactions of different keys when the replica is busy.
//! - `cache`: per-replica hints (session records, holders) that save round trips, always
//!   verified by the transactions that use them.
//! - `creating`: one free-key create per key in flight from this replica; a crowd asking
//!   for a free key waits for it, then reads the key and queues together.
//! - `connect`: TLS and etcd auth of the connection, and the start-up check that the
//!   credentials can read and write the prefix.
//! - `records`: the JSON values, millisecond deadlines and lease rounding.
//! - `epoch`: the token epoch (`token = (epoch << 40) + revision`), raised by
//!   `lock-server etcd-restored` after a restore from a snapshot, and the replica's watch for
//!   a rewound cluster (no grants until the epoch is raised).
//! - `error`: etcd failures → [`StoreError`] (out of space, no quorum, unreachable → 503
//!   STORE_UNAVAILABLE with the cause, never 500).
//! - `session`: L1 open, L2 heartbeat, L3 close, L5 status.
//! - `holds`: the keys of one hold (exclusive or shared), the key's stamp, and the compares
//!   that keep two grants from racing.
//! - `writes`: the writes of one transaction, one per etcd key.
//! - `lock`: L4 acquire, L6 release, L7 read, R1 revoke.
//! - `queue`: the wait queue per key (tickets, the hand-off of `settle`, the watch behind
//!   `waitMillis`).
//! - `ledger`: the demo ledgers, the fenced one and its unfenced twin, each written by a
//!   compare on its per-key head.
//! - `watch`: L8, one etcd watch per replica feeding every watched key's events, and why a
//!   hold ended (the cause markers).
//!
//! Design in one paragraph (docs/etcd.md has the long form): a session is an etcd lease; every
//! key a session owns (its record, its locks, its lock index) is attached to that lease, so
//! when heartbeats stop, etcd deletes them all, whichever replicas are alive. No replica holds
//! a keep-alive stream: the client's L2 heartbeat, at any replica, sends one keep-alive for the
//! lease and rewrites the millisecond deadlines. Replicas therefore keep no state and a session
//! survives the loss of the replica that opened it. Each hold (an exclusive one, or each of
//! a key's shared holders) is its own key, and its fencing token is that key's etcd
//! `create_revision` (a queued ticket's, on a hand-off): the cluster-wide revision of the
//! transaction that created it, strictly increasing, replicated, and so never reused across
//! failovers. Every grant compares the key's stamp, which every grant that others depend on
//! rewrites, so replicas granting at once never put an exclusive hold beside another or go
//! past a shared limit; readers without a limit beside each other do not race on it.

mod batch;
mod cache;
mod connect;
mod creating;
mod epoch;
mod error;
mod holds;
mod keys;
mod ledger;
mod lock;
mod queue;
mod records;
mod session;
mod watch;
mod writes;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use lock_api::{HeartbeatResponse, LedgerEntries, SessionOpened, SessionStatus};
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use self::batch::Batcher;
use self::cache::Hints;
pub use self::connect::{AccessError, AccessReport, Credentials};
use self::creating::Creating;
use self::error::from_etcd;
use self::keys::Keys;
use self::ledger::Ledger;
use crate::store::holder_id::HolderIds;
use crate::store::queue::acquire_with;
use crate::store::{
    AcquireCall, Acquired, KeyState, NewSession, SessionRef, Store, StoreCounts, StoreError,
};

/// Default key prefix (`--etcd-prefix`).
pub const DEFAULT_PREFIX: &str = "/lock-server/";
/// Default per-request timeout (`--etcd-timeout-ms`, ASSUMPTION: 2 s, longer than an etcd
/// election at default settings so a request survives one, shorter than the SDK budget).
pub const DEFAULT_TIMEOUT_MILLIS: u64 = 2_000;

/// HTTP/2 keep-alive ping interval (ASSUMPTION: above etcd's default 5 s minimum).
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs of the members, e.g. `http://10.0.0.1:2379`; requests are balanced over
    /// the reachable ones.
    pub endpoints: Vec<String>,
    /// Prefix of every key this deployment writes.
    pub prefix: String,
    /// Bound on every etcd request; past it the request is a 503 NOT_LEADER.
    pub timeout: Duration,
    /// L8: the window, linger and caps of the keys' event feeds.
    pub feed_limits: crate::store::feeds::FeedLimits,
    /// TLS and etcd auth (none: plain `http://`, no auth).
    pub credentials: Credentials,
}

impl EtcdOptions {
    /// Options with the default prefix and timeout.
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdOptions {
            endpoints,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MILLIS),
            feed_limits: Default::default(),
            credentials: Credentials::default(),
        }
    }
}

/// [`Store`] on etcd. Cheap to clone; holds only connections.
///
/// One client per endpoint, and requests go to one "pinned" endpoint at a time, as etcd's
/// own Go client does. A balanced channel over all endpoints is not used: it keeps picking a
/// dead member (it looks least loaded because its calls fail at once), so a replica would
/// answer 503 long after the cluster recovered.
#[derive(Clone)]
pub struct EtcdStore {
    clients: Arc<Vec<Client>>,
    pinned: Arc<AtomicUsize>,
    hints: Arc<Hints>,
    batcher: Arc<Batcher>,
    /// The free-key creates in flight from this replica, one per key.
    creating: Arc<Creating>,
    keys: Keys,
    timeout: Duration,
    /// The deployment's holder-id key, once read (see [`EtcdStore::holder_ids`]).
    holder_ids: Arc<OnceCell<HolderIds>>,
    /// L8: the keys' event feeds and the watch behind them.
    watching: Arc<watch::Watching>,
    /// The token epoch this replica grants in, and whether etcd was rewound under it.
    epochs: Arc<epoch::Epochs>,
    /// A re-read of the epoch is under way (at most one at a time).
    rereading_epoch: Arc<AtomicBool>,
}

impl EtcdStore {
    /// Builds the clients. Without etcd auth, connections are made lazily, so this succeeds
    /// while etcd is down (the server's start-up check, [`EtcdStore::check_access`], is
    /// what refuses to start then). With a user, each endpoint authenticates here.
    pub async fn connect(options: EtcdOptions) -> Result<Self, AccessError> {
        if options.endpoints.is_empty() {
            return Err(AccessError::Config("no etcd endpoints configured".into()));
        }
        let base = ConnectOptions::new()
            .with_connect_timeout(options.timeout)
            .with_timeout(options.timeout)
            // HTTP/2 pings find a dead member while a watch is open. etcd closes connections
            // that ping more often than `--grpc-keepalive-min-time` (5 s by default) with
            // "too many pings", which would cancel every call in flight on it.
            .with_keep_alive(KEEPALIVE_INTERVAL, options.timeout)
            // A member cut off from its leader answers at once instead of hanging.
            .with_require_leader(true);
        let secured = connect::apply(&options.credentials, &options.endpoints, base)?;
        let clients = connect::connect_all(&options.endpoints, &secured).await?;
        Ok(EtcdStore {
            clients: Arc::new(clients),
            pinned: Arc::new(AtomicUsize::new(0)),
            hints: Arc::new(Hints::default()),
            batcher: Arc::new(Batcher::default()),
            creating: Arc::new(Creating::default()),
            keys: Keys::new(&options.prefix),
            timeout: options.timeout,
            holder_ids: Arc::new(OnceCell::new()),
            watching: Arc::new(watch::Watching::new(options.feed_limits)),
            epochs: Arc::new(epoch::Epochs::default()),
            rereading_epoch: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The epoch to grant in: read first when unread or while etcd is rewound (then 503
    /// until it has been raised).
    async fn epoch_now(&self) -> Result<epoch::EpochNow, StoreError> {
        if self.epochs.needs_read() {
            self.read_epoch().await?;
        }
        self.epochs.now()
    }

    /// Reads the epoch key (`epoch::Epochs::read`).
    async fn read_epoch(&self) -> Result<(), StoreError> {
        let key = self.keys.epoch();
        let response = self
            .call_read(|mut client| {
                let key = key.clone();
                async move { client.get(key, None).await }
            })
            .await
            .map_err(from_etcd)?;
        let value = match response.kvs().first() {
            Some(kv) => Some((decode::<epoch::EpochRecord>(kv)?, kv.mod_revision())),
            None => None,
        };
        self.epochs.read(value, response.header())
    }

    /// `lock-server etcd-restored`: raises the stored epoch by one (to `at_least` if that is
    /// higher), with a compare-and-put, so two runs at once raise it once each. Every token
    /// granted after it is above every token of the epochs before.
    pub async fn raise_epoch(&self, at_least: u64) -> Result<RaisedEpoch, StoreError> {
        let key = self.keys.epoch();
        loop {
            let (kv, _) = self.get(&key).await?;
            let (before, mod_revision) = match &kv {
                Some(kv) => (decode::<epoch::EpochRecord>(kv)?.epoch, kv.mod_revision()),
                None => (0, 0),
            };
            let epoch = (before + 1).max(at_least);
            if epoch > crate::store::epoch::MAX_EPOCH {
                return Err(StoreError::Internal(
                    crate::store::epoch::EpochsExhausted(before).to_string(),
                ));
            }
            let record = serde_json::to_vec(&epoch::EpochRecord { epoch })
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            let txn = Txn::new()
                .when(vec![Compare::mod_revision(
                    key.clone(),
                    CompareOp::Equal,
                    mod_revision,
                )])
                .and_then(vec![TxnOp::put(key.clone(), record, None)]);
            let response = self.txn(txn).await?;
            if response.succeeded() {
                let revision = response.header().map_or(0, |h| h.revision());
                return Ok(RaisedEpoch {
                    before,
                    epoch,
                    revision,
                });
            }
        }
    }

    /// After a failed grant compare: the epoch is read again in the background, so the next
    /// attempt grants in the stored epoch.
    fn refresh_epoch_soon(&self) {
        if self.rereading_epoch.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            let _ = store.read_epoch().await;
            store.rereading_epoch.store(false, Ordering::Release);
        });
    }

    /// Before a transaction that may hand a key on: the epoch, if it can be read (a release
    /// that hands nothing on needs none).
    async fn epoch_for_hand_off(&self) {
        if self.epochs.needs_read() {
            let _ = self.read_epoch().await;
        }
    }

    /// The deployment's holder-id key: read once per replica, created by the first replica
    /// that finds none (the put compares `create_revision` = 0, so replicas starting together
    /// all end with the first key written). Read lazily, like the connections are made: a
    /// replica started while etcd is down answers 503 until it can read it.
    async fn holder_ids(&self) -> Result<&HolderIds, StoreError> {
        self.holder_ids
            .get_or_try_init(|| async {
                let key = self.keys.holder_id_key();
                let fresh = HolderIds::new_key()?;
                let txn = Txn::new()
                    .when(vec![Compare::create_revision(
                        key.clone(),
                        CompareOp::Equal,
                        0,
                    )])
                    .and_then(vec![TxnOp::put(key.clone(), fresh.to_vec(), None)])
                    .or_else(vec![TxnOp::get(key, None)]);
                let response = self.txn(txn).await?;
                if response.succeeded() {
                    return Ok(HolderIds::new(fresh));
                }
                match range_results(&response).into_iter().flatten().next() {
                    Some(kv) => HolderIds::from_stored(kv.value()),
                    None => Err(StoreError::Internal("holder-id key vanished".into())),
                }
            })
            .await
    }

    /// Runs one etcd call on the pinned endpoint under the per-request timeout. When the
    /// endpoint failed, the next one is pinned; when the request provably never reached
    /// etcd's log (connection refused, member without leader), it is re-sent there at once,
    /// which is safe for every call, transactions included. A timeout becomes an I/O error so
    /// that callers have a single error type to classify.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, etcd_client::Error>
    where
        T: epoch::Headed,
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut last_error = None;
        let floor = self.epochs.floor();
        for _ in 0..self.clients.len() {
            let index = self.pinned.load(Ordering::Relaxed) % self.clients.len();
            let result =
                match tokio::time::timeout(self.timeout, op(self.clients[index].clone())).await {
                    Ok(result) => result,
                    Err(_) => Err(etcd_client::Error::IoError(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "etcd request timed out",
                    ))),
                };
            let error = match result {
                Ok(value) => {
                    // Every answer: a rewound cluster is noticed at its first answer.
                    self.epochs.observe(value.response_header(), floor);
                    return Ok(value);
                }
                Err(error) => error,
            };
            if !error::is_endpoint_failure(&error) {
                return Err(error);
            }
            // Only the first of several concurrent failures moves the pin.
            let _ = self.pinned.compare_exchange(
                index,
                (index + 1) % self.clients.len(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            if !error::never_applied(&error) {
                return Err(error);
            }
            last_error = Some(error);
        }
        Err(last_error.expect("at least one endpoint"))
    }

    /// [`EtcdStore::call`] for a read, re-sent once when its connection broke under it
    /// ([`error::is_connection_lost`]; the client opens a fresh connection for the second
    /// try). A read applies nothing, so it may always be re-sent; a write may not, as a broken
    /// connection does not say whether etcd applied it.
    async fn call_read<T, F, Fut>(&self, op: F) -> Result<T, etcd_client::Error>
    where
        T: epoch::Headed,
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        match self.call(&op).await {
            Err(error) if error::is_connection_lost(&error) => self.call(op).await,
            result => result,
        }
    }

    /// One transaction, raw error kept (callers look for a vanished lease).
    async fn txn_raw(&self, txn: Txn) -> Result<TxnResponse, etcd_client::Error> {
        self.call(|mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
        .await
    }

    /// One transaction.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse, StoreError> {
        self.txn_raw(txn).await.map_err(from_etcd)
    }

    /// Several reads at one revision; returns each read's key-values and that revision.
    async fn read(&self, ops: Vec<TxnOp>) -> Result<(Vec<Vec<KeyValue>>, i64), StoreError> {
        let txn = Txn::new().and_then(ops);
        let response = self
            .call_read(|mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await
            .map_err(from_etcd)?;
        let revision = response.header().map_or(0, |h| h.revision());
        Ok((range_results(&response), revision))
    }

    /// One key, with the revision the read was served at.
    async fn get(&self, key: &str) -> Result<(Option<KeyValue>, i64), StoreError> {
        let mut response = self
            .call_read(|mut client| {
                let key = key.to_owned();
                async move { client.get(key, None).await }
            })
            .await
            .map_err(from_etcd)?;
        let revision = response.header().map_or(0, |h| h.revision());
        Ok((response.take_kvs().into_iter().next(), revision))
    }
}

/// What `lock-server etcd-restored` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaisedEpoch {
    /// The epoch found (0: none stored yet).
    pub before: u64,
    /// The epoch now stored.
    pub epoch: u64,
    /// The etcd revision of the write.
    pub revision: i64,
}

/// The key-values of every read in a transaction's answer, in order.
fn range_results(response: &TxnResponse) -> Vec<Vec<KeyValue>> {
    response
        .op_responses()
        .into_iter()
        .filter_map(|op| match op {
            TxnOpResponse::Get(mut get) => Some(get.take_kvs()),
            _ => None,
        })
        .collect()
}

/// Forgets the hint of the request's ticket when the request ends, however it ends.
struct ForgetTicket<'a> {
    store: &'a EtcdStore,
    key: &'a str,
    session_id: &'a str,
}

impl Drop for ForgetTicket<'_> {
    fn drop(&mut self) {
        self.store.hints.forget_ticket(self.key, self.session_id);
    }
}

/// Parses a stored JSON value; a value we cannot read is corruption, hence Internal.
///
/// The error names the record type and revision, not the key: session keys hold session
/// ids, and this message is logged.
fn decode<T: DeserializeOwned>(kv: &KeyValue) -> Result<T, StoreError> {
    serde_json::from_slice(kv.value()).map_err(|e| {
        let record = std::any::type_name::<T>().rsplit("::").next().unwrap_or("");
        StoreError::Internal(format!(
            "corrupt {record} at revision {}: {e}",
            kv.mod_revision()
        ))
    })
}

/// Serialises a record. Records are plain structs, so this cannot fail.
fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialise")
}

fn prefix() -> Option<GetOptions> {
    Some(GetOptions::new().with_prefix())
}

/// Compare-and-swap loops give up after this many lost races and answer 503, which the SDK
/// retries with backoff (ASSUMPTION: races on one session's keys are rare).
const CAS_ATTEMPTS: usize = 16;

#[async_trait]
impl Store for EtcdStore {
    async fn proclaim(
        &self,
        key: &str,
        session: SessionRef<'_>,
        fencing_token: u64,
        value: &str,
    ) -> Result<(), StoreError> {
        self.proclaim_value(key, session, fencing_token, value)
            .await
    }

    fn feeds(&self) -> &crate::store::feeds::Feeds {
        self.watching.feeds()
    }

    async fn watch(
        &self,
        key: &str,
        after: Option<&str>,
    ) -> Result<crate::store::Subscription, StoreError> {
        self.subscribe(key, after).await
    }

    async fn watch_state(
        &self,
        key: &str,
    ) -> Result<(KeyState, crate::store::feeds::Pos), StoreError> {
        self.state_at_now(key).await
    }

    async fn open_session(&self, new: NewSession<'_>) -> Result<SessionOpened, StoreError> {
        self.open(new.ttl_millis, new.owner, new.client).await
    }

    async fn heartbeat(
        &self,
        session: SessionRef<'_>,
        since: Option<&str>,
    ) -> Result<HeartbeatResponse, StoreError> {
        self.renew(session.id, session.client, since).await
    }

    async fn close_session(&self, session: SessionRef<'_>) -> Result<(), StoreError> {
        self.epoch_for_hand_off().await;
        self.close(session.id, session.client).await
    }

    async fn session_status(&self, session: SessionRef<'_>) -> Result<SessionStatus, StoreError> {
        self.status(session.id, session.client).await
    }

    async fn acquire(&self, call: AcquireCall<'_>) -> Result<Acquired, StoreError> {
        let AcquireCall {
            key,
            session_id,
            queue,
            ..
        } = call;
        self.epoch_for_hand_off().await;
        let cancel = || {
            if let Some(queue) = queue {
                self.end_wait(key, session_id, queue.open_until);
            }
        };
        // No reaper runs here: a waiter also looks again at least once per grace period,
        // which is how an unclaimed hand-off running out (or a lock handed to someone else
        // since its last look, then expiring) is noticed.
        let recheck = Duration::from_millis(queue.map_or(0, |q| q.grace));
        let _forget = ForgetTicket {
            store: self,
            key,
            session_id,
        };
        acquire_with(
            queue,
            cancel,
            |queue| self.attempt(AcquireCall { queue, ..call }),
            |bound, seen| self.wait_for_hand_off(key, session_id, seen, bound.min(recheck)),
        )
        .await
    }

    async fn holder_id(&self, session_id: &str) -> Result<String, StoreError> {
        Ok(self.holder_ids().await?.of(session_id))
    }

    async fn release(&self, key: &str, fencing_token: u64) -> Result<(), StoreError> {
        self.epoch_for_hand_off().await;
        self.release_token(key, fencing_token).await
    }

    async fn lock_state(&self, key: &str) -> Result<KeyState, StoreError> {
        self.read_state(key).await
    }

    async fn revoke(&self, key: &str, fencing_token: Option<u64>) -> Result<Vec<u64>, StoreError> {
        self.epoch_for_hand_off().await;
        self.revoke_key(key, fencing_token).await
    }

    async fn ledger_append(&self, key: &str, token: u64, entry: String) -> Result<(), StoreError> {
        self.append(Ledger::Fenced, key, token, entry)
            .await
            .map(drop)
    }

    async fn ledger_read(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        self.entries(Ledger::Fenced, key).await
    }

    async fn unfenced_append(
        &self,
        key: &str,
        token: u64,
        entry: String,
    ) -> Result<bool, StoreError> {
        self.append(Ledger::Unfenced, key, token, entry).await
    }

    async fn unfenced_read(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        self.entries(Ledger::Unfenced, key).await
    }

    /// Counts keys by prefix. Records past their millisecond deadline but not yet deleted by
    /// their lease (at most about a second) are still counted: these are gauges.
    async fn probe(&self) -> Result<(), StoreError> {
        // A put, not a read: a cluster out of space or without quorum still answers reads
        // (serializable ones, from a member's own copy), but refuses this.
        let key = self.keys.probe();
        self.call(|mut client| {
            let key = key.clone();
            async move { client.put(key, b"1".to_vec(), None).await }
        })
        .await
        .map(drop)
        .map_err(from_etcd)
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        let count = || Some(GetOptions::new().with_prefix().with_count_only());
        let response = self
            .txn(Txn::new().and_then(vec![
                TxnOp::get(self.keys.all_sessions(), count()),
                TxnOp::get(self.keys.all_holds(), count()),
                TxnOp::get(self.keys.all_shared_markers(), count()),
            ]))
            .await?;
        let counts: Vec<u64> = response
            .op_responses()
            .into_iter()
            .filter_map(|op| match op {
                TxnOpResponse::Get(get) => Some(get.count().max(0) as u64),
                _ => None,
            })
            .collect();
        Ok(StoreCounts {
            sessions: counts.first().copied().unwrap_or(0),
            locks: counts.get(1).copied().unwrap_or(0),
            shared_holds: counts.get(2).copied().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    /// Answers `errors` in turn, then `Ok` with the number of calls before it.
    struct Script {
        errors: Vec<std::io::ErrorKind>,
        calls: AtomicU32,
    }

    impl Script {
        fn new(errors: &[std::io::ErrorKind]) -> Self {
            Script {
                errors: errors.to_vec(),
                calls: AtomicU32::new(0),
            }
        }

        async fn answer(&self) -> Result<u32, etcd_client::Error> {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            match self.errors.get(n as usize) {
                Some(kind) => Err(etcd_client::Error::IoError((*kind).into())),
                None => Ok(n),
            }
        }

        fn calls(&self) -> u32 {
            self.calls.load(Ordering::Relaxed)
        }
    }

    /// A store whose one endpoint nothing listens on (clients connect lazily); the scripted
    /// calls below never use it.
    async fn store() -> EtcdStore {
        EtcdStore::connect(EtcdOptions::new(vec!["http://127.0.0.1:9".into()]))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_read_whose_connection_broke_is_re_sent_once_and_a_write_is_not() {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset, TimedOut};
        let store = store().await;

        let read = Script::new(&[BrokenPipe]);
        assert_eq!(store.call_read(|_| read.answer()).await.unwrap(), 1);
        assert_eq!(read.calls(), 2, "re-sent once");

        let twice = Script::new(&[BrokenPipe, ConnectionReset]);
        assert!(store.call_read(|_| twice.answer()).await.is_err());
        assert_eq!(twice.calls(), 2, "only once");

        let slow = Script::new(&[TimedOut]);
        assert!(store.call_read(|_| slow.answer()).await.is_err());
        assert_eq!(slow.calls(), 1, "a timed-out read is not re-sent");

        let write = Script::new(&[BrokenPipe]);
        assert!(store.call(|_| write.answer()).await.is_err());
        assert_eq!(write.calls(), 1, "a write is not re-sent");
    }
}
