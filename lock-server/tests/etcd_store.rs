//! The etcd [`Store`] against real etcd processes, through the trait (no HTTP): the
//! semantics every route relies on, failure mapping, and replicas sharing one cluster.
//! Waiting for real expiry is done by polling with generous bounds, never by timing.
#![cfg(feature = "etcd")]

// The e2e crate's harness, shared by path; this test uses only part of it.
#[allow(dead_code)]
#[path = "../../tests/src/etcd.rs"]
mod etcd_harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_harness::EtcdCluster;
use lock_api::Unavailability;
use lock_server::store::etcd::{EtcdOptions, EtcdStore};
use lock_server::store::{
    AcquireCall, Acquired, NewSession, Queueing, SessionRef, Store, StoreError,
};

/// A 503 of either kind: the store cannot write (STORE_UNAVAILABLE), or this replica lost
/// too many races (NOT_LEADER). Both are retried; nothing else is expected during an outage.
macro_rules! unavailable {
    () => {
        StoreError::StoreUnavailable { .. } | StoreError::Unavailable { .. }
    };
}

/// Upper bound for anything that waits on a real expiry (lease TTLs are whole seconds).
const EXPIRY_BOUND: Duration = Duration::from_secs(10);

async fn store_on(cluster: &EtcdCluster, prefix: &str) -> EtcdStore {
    let mut options = EtcdOptions::new(cluster.endpoints());
    options.prefix = prefix.to_owned();
    options.timeout = Duration::from_millis(1_000);
    EtcdStore::connect(options).await.expect("connect")
}

/// A session of `ttl_millis` opened on `store`.
async fn open(store: &EtcdStore, ttl_millis: u64) -> lock_api::SessionOpened {
    store
        .open_session(NewSession::with_ttl(ttl_millis))
        .await
        .unwrap()
}

/// Closes `session` on `store`.
async fn close(store: &EtcdStore, session: &lock_api::SessionOpened) {
    store
        .close_session(SessionRef::new(&session.session_id, None))
        .await
        .unwrap();
}

fn granted(outcome: Acquired) -> lock_api::LockGrant {
    match outcome {
        Acquired::Granted(granted) => granted.grant,
        Acquired::Contended { .. } => panic!("expected a grant, got Contended"),
    }
}

/// The store-level L4 with `waitMillis` 0, as most of these checks use it.
trait TryAcquire {
    async fn try_acquire(&self, key: &str, session: &str, ttl: u64)
        -> Result<Acquired, StoreError>;
    async fn holder(&self, key: &str) -> Result<Option<lock_api::Holder>, StoreError>;
}

/// An L4 for [`Store::acquire`].
fn ask<'a>(
    key: &'a str,
    session_id: &'a str,
    client: Option<&'a str>,
    ttl_millis: u64,
    queue: Option<Queueing>,
) -> AcquireCall<'a> {
    AcquireCall {
        value: None,
        key,
        session_id,
        client,
        ttl_millis,
        hold: lock_api::HoldKind::Exclusive,
        queue,
    }
}

impl<S: Store> TryAcquire for S {
    async fn try_acquire(
        &self,
        key: &str,
        session: &str,
        ttl: u64,
    ) -> Result<Acquired, StoreError> {
        self.acquire(ask(key, session, None, ttl, None)).await
    }

    async fn holder(&self, key: &str) -> Result<Option<lock_api::Holder>, StoreError> {
        Ok(self.lock_state(key).await?.exclusive_holder().cloned())
    }
}

fn contended(outcome: Result<Acquired, StoreError>) -> bool {
    matches!(outcome, Ok(Acquired::Contended { .. }))
}

/// Polls `check` until it holds or the bound passes.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + EXPIRY_BOUND;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within {EXPIRY_BOUND:?}: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_member_semantics() {
    let etcd = EtcdCluster::single();
    let store = store_on(&etcd, "/t1/").await;
    sessions_and_idempotent_acquire(&store).await;
    lock_ttl_expires_and_is_not_revived(&store).await;
    session_expiry_frees_its_locks(&store).await;
    a_release_hands_the_lock_to_the_waiter(&store).await;
    revoke_and_ledger(&store).await;
    bad_session_ids_are_not_found(&store).await;
}

async fn sessions_and_idempotent_acquire(store: &EtcdStore) {
    let a = store
        .open_session(NewSession {
            ttl_millis: 5_000,
            owner: Some("a".into()),
            client: None,
        })
        .await
        .unwrap();
    let b = open(store, 5_000).await;
    assert_eq!(a.session_id.len(), 32);
    assert_ne!(a.session_id, b.session_id);

    let first = granted(
        store
            .try_acquire("k/1", &a.session_id, 4_000)
            .await
            .unwrap(),
    );
    let again = granted(
        store
            .try_acquire("k/1", &a.session_id, 4_000)
            .await
            .unwrap(),
    );
    assert_eq!(first, again, "L4 is idempotent for the holding session");
    assert!(contended(
        store.try_acquire("k/1", &b.session_id, 4_000).await
    ));
    let holder = store.holder("k/1").await.unwrap().expect("held");
    assert_eq!(holder.fencing_token, first.fencing_token);
    assert!(holder.remaining_millis <= 4_000);

    let beat = store
        .heartbeat(SessionRef::new(&a.session_id, None), None)
        .await
        .unwrap();
    assert_eq!(beat.ttl_millis, 5_000);
    assert_eq!(beat.locks.as_ref().unwrap().len(), 1);
    assert_eq!(
        beat.locks.as_ref().unwrap()[0].fencing_token,
        first.fencing_token
    );
    let status = store
        .session_status(SessionRef::new(&a.session_id, None))
        .await
        .unwrap();
    assert_eq!(status.locks.len(), 1);
    assert!(status.remaining_millis <= 5_000 && status.remaining_millis > 0);
    assert_eq!(store.counts().await.unwrap().locks, 1);

    assert_eq!(
        store.release("k/1", first.fencing_token + 1).await,
        Err(StoreError::LockLost),
        "the token is the predicate"
    );
    store.release("k/1", first.fencing_token).await.unwrap();
    assert_eq!(
        store.release("k/1", first.fencing_token).await,
        Err(StoreError::LockLost)
    );
    let second = granted(
        store
            .try_acquire("k/1", &b.session_id, 4_000)
            .await
            .unwrap(),
    );
    assert!(second.fencing_token > first.fencing_token);
    assert!(store
        .heartbeat(SessionRef::new(&a.session_id, None), None)
        .await
        .unwrap()
        .locks
        .unwrap()
        .is_empty());

    close(store, &b).await;
    assert_eq!(
        store.holder("k/1").await.unwrap(),
        None,
        "L3 releases its locks"
    );
    assert_eq!(
        store
            .heartbeat(SessionRef::new(&b.session_id, None), None)
            .await,
        Err(StoreError::SessionNotFound)
    );
    assert_eq!(
        store
            .close_session(SessionRef::new(&b.session_id, None))
            .await,
        Err(StoreError::SessionNotFound)
    );
    close(store, &a).await;
}

async fn lock_ttl_expires_and_is_not_revived(store: &EtcdStore) {
    let a = open(store, 10_000).await;
    let b = open(store, 10_000).await;
    let short = granted(store.try_acquire("ttl", &a.session_id, 300).await.unwrap());
    eventually("a 300 ms lock expires", || async {
        store.holder("ttl").await.unwrap().is_none()
    })
    .await;
    assert!(
        store
            .heartbeat(SessionRef::new(&a.session_id, None), None)
            .await
            .unwrap()
            .locks
            .unwrap()
            .is_empty(),
        "a heartbeat after the lock's TTL must not revive it"
    );
    assert_eq!(
        store.release("ttl", short.fencing_token).await,
        Err(StoreError::LockLost)
    );
    let next = granted(
        store
            .try_acquire("ttl", &b.session_id, 5_000)
            .await
            .unwrap(),
    );
    assert!(next.fencing_token > short.fencing_token);
    close(store, &a).await;
    close(store, &b).await;
}

async fn session_expiry_frees_its_locks(store: &EtcdStore) {
    let a = open(store, 500).await;
    let b = open(store, 10_000).await;
    let lost = granted(
        store
            .try_acquire("sess", &a.session_id, 60_000)
            .await
            .unwrap(),
    );
    eventually("the session's lock dies with the session", || async {
        store.holder("sess").await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        store
            .heartbeat(SessionRef::new(&a.session_id, None), None)
            .await,
        Err(StoreError::SessionNotFound)
    );
    assert_eq!(
        store.try_acquire("other", &a.session_id, 1_000).await,
        Err(StoreError::SessionNotFound)
    );
    let next = granted(
        store
            .try_acquire("sess", &b.session_id, 5_000)
            .await
            .unwrap(),
    );
    assert!(next.fencing_token > lost.fencing_token);
    // The lease backstop deletes the records too (within about a second of the deadline).
    eventually("the expired session's lease deletes its keys", || async {
        store.counts().await.unwrap().sessions == 1
    })
    .await;
    close(store, &b).await;
}

async fn a_release_hands_the_lock_to_the_waiter(store: &EtcdStore) {
    let a = open(store, 10_000).await;
    let b = open(store, 10_000).await;
    let grant = granted(store.try_acquire("w", &a.session_id, 30_000).await.unwrap());
    let waiter = {
        let (store, id) = (store.clone(), b.session_id.clone());
        tokio::spawn(async move {
            let queue = Queueing {
                open_until: lock_server::store::lease::now_millis() + 25_000,
                grace: 1_000,
                cap: 64,
            };
            store.acquire(ask("w", &id, None, 5_000, Some(queue))).await
        })
    };
    eventually("the waiter's ticket is in the queue", || async {
        store.lock_state("w").await.unwrap().waiters == 1
    })
    .await;
    store.release("w", grant.fencing_token).await.unwrap();
    let handed = store
        .holder("w")
        .await
        .unwrap()
        .expect("handed on, not free");
    assert_eq!(handed.holder_id, b.holder_id);
    let won = granted(
        tokio::time::timeout(EXPIRY_BOUND, waiter)
            .await
            .expect("the hand-off answered the waiter, long before its 25 s wait")
            .unwrap()
            .unwrap(),
    );
    assert_eq!(won.fencing_token, handed.fencing_token);
    assert!(won.fencing_token > grant.fencing_token);
    close(store, &a).await;
    close(store, &b).await;
}

async fn revoke_and_ledger(store: &EtcdStore) {
    let a = open(store, 10_000).await;
    let grant = granted(store.try_acquire("r", &a.session_id, 10_000).await.unwrap());
    assert_eq!(
        store.revoke("r", None).await.unwrap(),
        vec![grant.fencing_token]
    );
    assert_eq!(store.revoke("r", None).await.unwrap(), Vec::<u64>::new());
    assert!(store
        .heartbeat(SessionRef::new(&a.session_id, None), None)
        .await
        .unwrap()
        .locks
        .unwrap()
        .is_empty());

    store
        .ledger_append("led/x", 5, "five".into())
        .await
        .unwrap();
    store
        .ledger_append("led/x", 5, "five again".into())
        .await
        .unwrap();
    assert_eq!(
        store.ledger_append("led/x", 4, "stale".into()).await,
        Err(StoreError::FencedOut { highest: 5 })
    );
    store
        .ledger_append("led/x", 9, "nine".into())
        .await
        .unwrap();
    store
        .ledger_append("led", 1, "other key".into())
        .await
        .unwrap();
    let entries = store.ledger_read("led/x").await.unwrap();
    assert_eq!(entries.highest_token, Some(9));
    let texts: Vec<&str> = entries.entries.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(texts, ["five", "five again", "nine"]);
    assert_eq!(store.ledger_read("none").await.unwrap().highest_token, None);

    // The unfenced ledger: its own keys, every token accepted, the stale ones marked, the
    // highest left as it was.
    for (token, entry, stale) in [(5, "five", false), (3, "stale", true), (5, "five", false)] {
        let appended = store.unfenced_append("led/x", token, entry.into()).await;
        assert_eq!(appended, Ok(stale), "{token} {entry}");
    }
    assert_eq!(
        store.unfenced_append("led/x", 7, "seven".into()).await,
        Ok(false)
    );
    assert_eq!(
        store.unfenced_append("led/x", 6, "six".into()).await,
        Ok(true)
    );
    let unfenced = store.unfenced_read("led/x").await.unwrap();
    assert_eq!(unfenced.highest_token, Some(7));
    let seen: Vec<(u64, Option<bool>)> = unfenced
        .entries
        .iter()
        .map(|e| (e.fencing_token, e.stale))
        .collect();
    assert_eq!(
        seen,
        [
            (5, Some(false)),
            (3, Some(true)),
            (5, Some(false)),
            (7, Some(false)),
            (6, Some(true))
        ]
    );
    // The fenced ledger is as it was, and has no `stale` on its entries.
    let fenced = store.ledger_read("led/x").await.unwrap();
    assert_eq!(fenced.entries.len(), 3);
    assert!(fenced.entries.iter().all(|e| e.stale.is_none()));
    assert_eq!(
        store.unfenced_read("led").await.unwrap().highest_token,
        None
    );
    close(store, &a).await;
}

async fn bad_session_ids_are_not_found(store: &EtcdStore) {
    for id in ["", "nope", "../../s", "0123456789abcdef0123456789abcdef"] {
        assert_eq!(
            store.heartbeat(SessionRef::new(id, None), None).await,
            Err(StoreError::SessionNotFound)
        );
        assert_eq!(
            store.session_status(SessionRef::new(id, None)).await,
            Err(StoreError::SessionNotFound)
        );
        assert_eq!(
            store.try_acquire("k", id, 1_000).await,
            Err(StoreError::SessionNotFound)
        );
    }
}

/// Two stores are two replicas: a session opened on one lives on through the other after
/// the first is gone, because no replica holds state or keep-alive streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_the_replica_that_opened_them() {
    let etcd = EtcdCluster::single();
    let replica_a = store_on(&etcd, "/t2/").await;
    let replica_b = store_on(&etcd, "/t2/").await;
    let session = open(&replica_a, 1_500).await;
    let grant = granted(
        replica_a
            .try_acquire("k", &session.session_id, 1_500)
            .await
            .unwrap(),
    );
    drop(replica_a);
    // Heartbeat through B for longer than both TTLs: the session and lock must stay.
    let until = Instant::now() + Duration::from_millis(3_500);
    while Instant::now() < until {
        let beat = replica_b
            .heartbeat(SessionRef::new(&session.session_id, None), None)
            .await
            .unwrap();
        assert_eq!(beat.locks.as_ref().unwrap().len(), 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let holder = replica_b.holder("k").await.unwrap().expect("still held");
    assert_eq!(holder.fencing_token, grant.fencing_token);
}

/// Each replica keeps hints (last session record seen, holder of its grants) to save round
/// trips; another replica's writes make them stale, and a stale hint must never change an
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_replica_hints_never_change_answers() {
    let etcd = EtcdCluster::single();
    let a = store_on(&etcd, "/t5/").await;
    let b = store_on(&etcd, "/t5/").await;
    let s1 = open(&a, 10_000).await.session_id;
    let s2 = open(&b, 10_000).await.session_id;
    // A's session hint goes stale (B renewed it); A's acquire must still grant.
    b.heartbeat(SessionRef::new(&s1, None), None).await.unwrap();
    let first = granted(a.try_acquire("h", &s1, 10_000).await.unwrap());
    // A's holder hint goes stale: B releases and B's session takes the key.
    b.release("h", first.fencing_token).await.unwrap();
    let second = granted(b.try_acquire("h", &s2, 10_000).await.unwrap());
    assert_eq!(
        a.release("h", first.fencing_token).await,
        Err(StoreError::LockLost),
        "an old token stays dead"
    );
    assert_eq!(
        a.holder("h").await.unwrap().map(|h| h.fencing_token),
        Some(second.fencing_token),
        "the stale release touched nothing"
    );
    assert!(contended(a.try_acquire("h", &s1, 10_000).await));
    // A session closed through B is gone for A too, whatever A remembers.
    b.close_session(SessionRef::new(&s1, None)).await.unwrap();
    assert_eq!(
        a.try_acquire("other", &s1, 10_000).await,
        Err(StoreError::SessionNotFound)
    );
    a.release("h", second.fencing_token).await.unwrap();
}

/// A busy replica sends L4/L6 transactions of different keys as one etcd transaction
/// (`batch`). Many sessions hammer one replica: every key stays exclusive, its tokens rise
/// in grant order, releases of live grants succeed, and sessions closed by another replica
/// (this one's hint still says live) are refused without failing the batches they ride in.
/// Writes of one batch share a revision, so two keys granted the same token prove batches
/// formed: without them this test cannot pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_replica_groups_transactions_without_changing_answers() {
    const TASKS: usize = 24;
    const KEYS: usize = 12;
    const ROUNDS: usize = 40;
    let etcd = EtcdCluster::single();
    let busy = store_on(&etcd, "/t6/").await;
    let other = store_on(&etcd, "/t6/").await;
    // Per key: the task holding it and its tokens in grant order.
    type Held = (Option<usize>, Vec<u64>);
    let keys = Arc::new(std::sync::Mutex::new(vec![Held::default(); KEYS]));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (busy, other, keys) = (busy.clone(), other.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            let session = open(&busy, 30_000).await.session_id;
            for round in 0..ROUNDS {
                let key = (task + round) % KEYS;
                // Every sixth task loses its session halfway, closed through the other replica.
                if task % 6 == 0 && round == ROUNDS / 2 {
                    other
                        .close_session(SessionRef::new(&session, None))
                        .await
                        .unwrap();
                }
                let outcome = busy.try_acquire(&format!("k{key}"), &session, 30_000).await;
                if task % 6 == 0 && round >= ROUNDS / 2 {
                    assert_eq!(outcome, Err(StoreError::SessionNotFound), "task {task}");
                    continue;
                }
                let grant = match outcome.unwrap() {
                    Acquired::Granted(granted) => granted.grant,
                    Acquired::Contended { .. } => continue,
                };
                {
                    let mut keys = keys.lock().unwrap();
                    let (holder, tokens) = &mut keys[key];
                    assert_eq!(*holder, None, "k{key} granted to {task} while held");
                    assert!(
                        tokens.last() < Some(&grant.fencing_token),
                        "k{key}: token {} after {tokens:?}",
                        grant.fencing_token
                    );
                    *holder = Some(task);
                    tokens.push(grant.fencing_token);
                }
                tokio::task::yield_now().await;
                keys.lock().unwrap()[key].0 = None;
                busy.release(&format!("k{key}"), grant.fencing_token)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let keys = keys.lock().unwrap();
    let mut all: Vec<u64> = keys.iter().flat_map(|(_, tokens)| tokens.clone()).collect();
    let grants = all.len();
    all.sort_unstable();
    all.dedup();
    assert!(grants > TASKS * ROUNDS / 4, "too few grants: {grants}");
    assert!(
        all.len() < grants,
        "no two keys ever shared a revision: no batch formed"
    );
}

/// A crowd of waiters on one key of one replica, each releasing at once and queueing again:
/// the key passes from holder to holder faster than the crowd's joins reach etcd. Every
/// waiting L4 still ends in its grant (no lost race answered 503, no refusal), with one
/// holder at a time and strictly increasing tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_joining_one_queue_is_served_while_the_key_changes_hands() {
    const TASKS: usize = 40;
    const ROUNDS: usize = 3;
    let etcd = EtcdCluster::single();
    let store = store_on(&etcd, "/t9/").await;
    // The holder and the tokens in grant order.
    let held = Arc::new(std::sync::Mutex::new((None::<usize>, Vec::<u64>::new())));
    let gate = Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, held, gate) = (store.clone(), held.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let session = open(&store, 30_000).await.session_id;
            gate.wait().await;
            for _ in 0..ROUNDS {
                let queue = Queueing {
                    open_until: lock_server::store::lease::now_millis() + 25_000,
                    grace: 1_000,
                    cap: 64,
                };
                let outcome = store
                    .acquire(ask("crowd", &session, None, 30_000, Some(queue)))
                    .await;
                let grant = granted(outcome.unwrap_or_else(|e| panic!("task {task}: {e:?}")));
                {
                    let (holder, tokens) = &mut *held.lock().unwrap();
                    assert_eq!(*holder, None, "granted to {task} while held");
                    assert!(tokens.last() < Some(&grant.fencing_token), "{tokens:?}");
                    *holder = Some(task);
                    tokens.push(grant.fencing_token);
                }
                tokio::task::yield_now().await;
                held.lock().unwrap().0 = None;
                store.release("crowd", grant.fencing_token).await.unwrap();
            }
            store
                .close_session(SessionRef::new(&session, None))
                .await
                .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(held.lock().unwrap().1.len(), TASKS * ROUNDS);
}

/// etcd down → StoreUnavailable `unreachable` (503), never Internal; and the same store recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_etcd_is_unavailable_and_recovers() {
    let mut etcd = EtcdCluster::single();
    let store = store_on(&etcd, "/t3/").await;
    let session = open(&store, 30_000).await;
    etcd.kill(0);
    for result in [
        store
            .open_session(NewSession::with_ttl(1_000))
            .await
            .map(|_| ()),
        store
            .heartbeat(SessionRef::new(&session.session_id, None), None)
            .await
            .map(|_| ()),
        store
            .try_acquire("k", &session.session_id, 1_000)
            .await
            .map(|_| ()),
        store.holder("k").await.map(|_| ()),
        store.ledger_append("k", 1, "x".into()).await,
        store.unfenced_append("k", 1, "x".into()).await.map(drop),
        store.unfenced_read("k").await.map(drop),
    ] {
        match result {
            Err(StoreError::StoreUnavailable {
                cause: Unavailability::Unreachable,
                ..
            }) => {}
            other => panic!("expected StoreUnavailable unreachable with etcd down, got {other:?}"),
        }
    }
    etcd.restart(0);
    eventually("the store recovers once etcd is back", || async {
        store
            .heartbeat(SessionRef::new(&session.session_id, None), None)
            .await
            .is_ok()
    })
    .await;
    granted(
        store
            .try_acquire("k", &session.session_id, 5_000)
            .await
            .unwrap(),
    );
}

/// Three members, two replicas, contention on one key while the etcd leader is killed:
/// during the election calls fail with a 503 (STORE_UNAVAILABLE or NOT_LEADER) only; grants resume; tokens strictly
/// increase; the ledger never accepts a stale token and never sees two holders interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_under_contention() {
    let mut etcd = EtcdCluster::start(3);
    let replicas = [store_on(&etcd, "/t4/").await, store_on(&etcd, "/t4/").await];
    let stop_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let mut workers = Vec::new();
    for w in 0..4 {
        let store = replicas[w % 2].clone();
        let stop_at = stop_at.clone();
        workers.push(tokio::spawn(
            async move { contend(store, w, stop_at).await },
        ));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let leader = etcd.leader().expect("a leader");
    let highest_before_kill = replicas[0]
        .ledger_read("hot")
        .await
        .unwrap()
        .highest_token
        .unwrap_or(0);
    etcd.kill(leader);
    // Let the workers run through the election and well past it.
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    *stop_at.lock().unwrap() = Some(Instant::now());
    let mut grants = Vec::new();
    let mut unavailable = 0;
    for worker in workers {
        let (mine, errors) = worker.await.unwrap();
        grants.extend(mine);
        unavailable += errors;
    }
    // A session whose release failed gets its own grant back (idempotent L4); two sessions
    // must never share a token.
    grants.sort_unstable();
    grants.dedup();
    let mut tokens: Vec<u64> = grants.iter().map(|(token, _)| *token).collect();
    let before = tokens.len();
    tokens.dedup();
    assert_eq!(
        before,
        tokens.len(),
        "two sessions were granted the same token"
    );
    let ledger = replicas[0].ledger_read("hot").await.unwrap();
    let accepted: Vec<u64> = ledger.entries.iter().map(|e| e.fencing_token).collect();
    assert!(
        accepted.windows(2).all(|w| w[0] <= w[1]),
        "the ledger accepted a stale token: {accepted:?}"
    );
    assert!(
        accepted.iter().all(|t| tokens.binary_search(t).is_ok()),
        "the ledger accepted a token that was never granted"
    );
    let resumed = tokens.iter().filter(|t| **t > highest_before_kill).count();
    assert!(resumed >= 2, "grants resumed after the failover: {resumed}");
    eprintln!(
        "grants: {}, unavailable answers: {unavailable}",
        tokens.len()
    );
}

/// One contender: open a session, acquire "hot", append twice to the ledger, release;
/// 503 answers are counted and retried; any other error fails the test.
async fn contend(
    store: EtcdStore,
    worker: usize,
    stop_at: Arc<std::sync::Mutex<Option<Instant>>>,
) -> (Vec<(u64, String)>, usize) {
    let mut tokens = Vec::new();
    let mut unavailable = 0;
    let mut session: Option<String> = None;
    while stop_at.lock().unwrap().is_none() {
        let id = match &session {
            Some(id) => id.clone(),
            None => match store
                .open_session(NewSession {
                    ttl_millis: 5_000,
                    owner: Some(format!("w{worker}")),
                    client: None,
                })
                .await
            {
                Ok(opened) => {
                    session = Some(opened.session_id.clone());
                    opened.session_id
                }
                Err(unavailable!()) => {
                    unavailable += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(other) => panic!("open: {other:?}"),
            },
        };
        // Keep the session alive as the SDK would; its errors surface on the acquire.
        let _ = store.heartbeat(SessionRef::new(&id, None), None).await;
        match store.try_acquire("hot", &id, 5_000).await {
            Ok(Acquired::Granted(lock_server::store::Grant { grant, .. })) => {
                tokens.push((grant.fencing_token, id.clone()));
                for n in 0..2 {
                    let entry = format!("w{worker} n{n}");
                    match store.ledger_append("hot", grant.fencing_token, entry).await {
                        Ok(()) | Err(unavailable!()) => {}
                        Err(other) => panic!("a holder was fenced out: {other:?}"),
                    }
                }
                match store.release("hot", grant.fencing_token).await {
                    Ok(()) | Err(StoreError::LockLost) => {}
                    Err(unavailable!()) => unavailable += 1,
                    Err(other) => panic!("release: {other:?}"),
                }
            }
            Ok(Acquired::Contended { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(unavailable!()) => {
                unavailable += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(StoreError::SessionNotFound) => session = None,
            Err(other) => panic!("acquire: {other:?}"),
        }
    }
    (tokens, unavailable)
}

/// A session belongs to the client that opened it: another client's requests, and
/// unauthenticated ones, find nothing on any replica, whether the replica remembers the
/// session (hint) or reads it; its owner is unaffected. Holder ids come from a key stored
/// once per deployment prefix: every replica, and a replica started later, agrees on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_belong_to_their_client_and_holder_ids_are_shared() {
    let etcd = EtcdCluster::single();
    let opener = store_on(&etcd, "/t7/").await;
    let other = store_on(&etcd, "/t7/").await;
    let opened = opener
        .open_session(NewSession {
            ttl_millis: 10_000,
            owner: Some("w".into()),
            client: Some("alice"),
        })
        .await
        .unwrap();
    let id = opened.session_id.as_str();
    for client in [Some("mallory"), None] {
        for store in [&opener, &other] {
            assert_eq!(
                store.heartbeat(SessionRef::new(id, client), None).await,
                Err(StoreError::SessionNotFound)
            );
            assert_eq!(
                store.session_status(SessionRef::new(id, client)).await,
                Err(StoreError::SessionNotFound)
            );
            assert_eq!(
                store.acquire(ask("own", id, client, 5_000, None)).await,
                Err(StoreError::SessionNotFound)
            );
            assert_eq!(
                store.close_session(SessionRef::new(id, client)).await,
                Err(StoreError::SessionNotFound)
            );
        }
    }
    let grant = granted(
        other
            .acquire(ask("own", id, Some("alice"), 5_000, None))
            .await
            .unwrap(),
    );
    assert_eq!(
        opener
            .heartbeat(SessionRef::new(id, Some("alice")), None)
            .await
            .unwrap()
            .locks
            .unwrap()[0]
            .fencing_token,
        grant.fencing_token
    );
    for store in [&opener, &other] {
        let holder = store.holder("own").await.unwrap().expect("held");
        assert_eq!(holder.holder_id, opened.holder_id);
        assert_eq!(holder.owner.as_deref(), Some("w"));
    }
    assert_ne!(opened.holder_id, opened.session_id);
    let later = store_on(&etcd, "/t7/").await;
    assert_eq!(later.holder_id(id).await.unwrap(), opened.holder_id);
    let elsewhere = store_on(&etcd, "/t8/").await;
    assert_ne!(elsewhere.holder_id(id).await.unwrap(), opened.holder_id);
    opener
        .close_session(SessionRef::new(id, Some("alice")))
        .await
        .unwrap();
}

// ---- Shared holds: read-write locks and counting semaphores on one queue per key ----

const READ: lock_api::HoldKind = lock_api::HoldKind::Shared { limit: None };
const WRITE: lock_api::HoldKind = lock_api::HoldKind::Exclusive;

fn shared(limit: u32) -> lock_api::HoldKind {
    lock_api::HoldKind::Shared { limit: Some(limit) }
}

/// A wait in the queue longer than any check here takes.
fn long_wait() -> Queueing {
    Queueing {
        open_until: lock_server::store::lease::now_millis() + 25_000,
        grace: 1_000,
        cap: 64,
    }
}

/// An L4 of `hold` with `waitMillis` 0.
async fn try_hold(
    store: &EtcdStore,
    key: &str,
    session: &str,
    hold: lock_api::HoldKind,
) -> Result<Acquired, StoreError> {
    store
        .acquire(AcquireCall {
            hold,
            ..ask(key, session, None, 10_000, None)
        })
        .await
}

/// An L4 of `hold` that waits in the queue, in the background.
fn queue_for(
    store: &EtcdStore,
    key: &str,
    session: &str,
    hold: lock_api::HoldKind,
) -> tokio::task::JoinHandle<Result<Acquired, StoreError>> {
    let (store, key, session) = (store.clone(), key.to_owned(), session.to_owned());
    tokio::spawn(async move {
        store
            .acquire(AcquireCall {
                hold,
                ..ask(&key, &session, None, 10_000, Some(long_wait()))
            })
            .await
    })
}

/// The grant a queued request answers (bounded: it must have been handed the key).
async fn handed(
    waiter: tokio::task::JoinHandle<Result<Acquired, StoreError>>,
) -> lock_api::LockGrant {
    granted(
        tokio::time::timeout(EXPIRY_BOUND, waiter)
            .await
            .expect("handed the key long before its wait ends")
            .unwrap()
            .unwrap(),
    )
}

async fn waiters_become(store: &EtcdStore, key: &str, count: u32) {
    eventually(&format!("{count} waiters on {key}"), || async {
        store.lock_state(key).await.unwrap().waiters == count
    })
    .await;
}

/// The tokens of the key's holders in L7, in its order.
async fn holder_tokens(store: &EtcdStore, key: &str) -> Vec<u64> {
    let state = store.lock_state(key).await.unwrap();
    state.holders.iter().map(|h| h.fencing_token).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_holds_on_one_queue() {
    let etcd = EtcdCluster::single();
    let store = store_on(&etcd, "/shared/").await;
    // A second replica of the deployment: waiters and readers are spread over both.
    let other = store_on(&etcd, "/shared/").await;
    readers_share_and_a_writer_is_refused(&store, &other).await;
    holders_agree_on_a_limit_and_never_upgrade(&store).await;
    a_writer_blocks_later_readers_and_readers_are_batched(&store, &other).await;
    revoke_ends_one_hold_or_every_hold(&store, &other).await;
    session_ends_and_expiry_end_one_hold_each(&store, &other).await;
}

async fn readers_share_and_a_writer_is_refused(store: &EtcdStore, other: &EtcdStore) {
    let (a, b, c) = (
        open(store, 10_000).await,
        open(other, 10_000).await,
        open(store, 10_000).await,
    );
    let ta = granted(try_hold(store, "rw/1", &a.session_id, READ).await.unwrap());
    let tb = granted(try_hold(other, "rw/1", &b.session_id, READ).await.unwrap());
    assert_eq!((ta.mode, ta.limit), (lock_api::LockMode::Shared, None));
    assert!(
        tb.fencing_token > ta.fencing_token,
        "every holder has its own token"
    );
    assert!(contended(
        try_hold(store, "rw/1", &c.session_id, WRITE).await
    ));
    // A key whose name extends this one's is another key.
    granted(
        try_hold(store, "rw/1/x", &c.session_id, WRITE)
            .await
            .unwrap(),
    );

    let state = other.lock_state("rw/1").await.unwrap();
    assert_eq!(state.hold, Some(READ));
    assert_eq!(state.exclusive_holder(), None);
    let ids: Vec<_> = state.holders.iter().map(|h| h.holder_id.clone()).collect();
    assert_eq!(ids, [a.holder_id.clone(), b.holder_id.clone()]);
    assert_eq!(
        holder_tokens(store, "rw/1").await,
        [ta.fencing_token, tb.fencing_token]
    );
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.locks, counts.shared_holds), (3, 2));

    // Idempotent per session, in its own mode; no upgrade.
    let again = granted(try_hold(other, "rw/1", &a.session_id, READ).await.unwrap());
    assert_eq!(again, ta);
    assert_eq!(
        try_hold(store, "rw/1", &a.session_id, WRITE).await,
        Err(StoreError::UpgradeNotAllowed)
    );
    let beat = store
        .heartbeat(SessionRef::new(&a.session_id, None), None)
        .await
        .unwrap();
    assert_eq!(beat.locks.as_ref().unwrap().len(), 1);
    assert_eq!(
        beat.locks.as_ref().unwrap()[0].mode,
        lock_api::LockMode::Shared
    );
    let status = other
        .session_status(SessionRef::new(&c.session_id, None))
        .await
        .unwrap();
    assert_eq!(status.locks.len(), 1);
    assert_eq!(status.locks[0].mode, lock_api::LockMode::Exclusive);

    // Each reader releases its own hold; the key is free after the last.
    store.release("rw/1", ta.fencing_token).await.unwrap();
    assert_eq!(
        store.release("rw/1", ta.fencing_token).await,
        Err(StoreError::LockLost)
    );
    assert_eq!(holder_tokens(other, "rw/1").await, [tb.fencing_token]);
    assert!(contended(
        try_hold(store, "rw/1", &c.session_id, WRITE).await
    ));
    other.release("rw/1", tb.fencing_token).await.unwrap();
    let tc = granted(try_hold(store, "rw/1", &c.session_id, WRITE).await.unwrap());
    assert!(tc.fencing_token > tb.fencing_token);
    assert!(contended(
        try_hold(other, "rw/1", &a.session_id, READ).await
    ));
    // A shared L4 of the exclusive holder answers its exclusive grant.
    let nested = granted(try_hold(other, "rw/1", &c.session_id, READ).await.unwrap());
    assert_eq!(nested, tc);
    assert_eq!(
        store
            .lock_state("rw/1")
            .await
            .unwrap()
            .exclusive_holder()
            .map(|h| h.fencing_token),
        Some(tc.fencing_token)
    );
    for session in [&a, &b, &c] {
        close(store, session).await;
    }
    assert_eq!(store.counts().await.unwrap().shared_holds, 0);
}

async fn holders_agree_on_a_limit_and_never_upgrade(store: &EtcdStore) {
    let sessions: Vec<_> = futures_join(store, 5).await;
    let id = |n: usize| sessions[n].session_id.as_str();
    let t0 = granted(try_hold(store, "sem", id(0), shared(2)).await.unwrap());
    assert_eq!(t0.limit, Some(2));
    assert_eq!(
        try_hold(store, "sem", id(1), shared(3)).await,
        Err(StoreError::LimitMismatch { in_force: Some(2) })
    );
    assert_eq!(
        try_hold(store, "sem", id(1), READ).await,
        Err(StoreError::LimitMismatch { in_force: Some(2) })
    );
    let t1 = granted(try_hold(store, "sem", id(1), shared(2)).await.unwrap());
    assert!(
        contended(try_hold(store, "sem", id(2), shared(2)).await),
        "the limit is reached"
    );
    assert!(contended(try_hold(store, "sem", id(2), WRITE).await));
    let state = store.lock_state("sem").await.unwrap();
    assert_eq!((state.hold, state.holders.len()), (Some(shared(2)), 2));
    store.release("sem", t0.fencing_token).await.unwrap();
    store.release("sem", t1.fencing_token).await.unwrap();
    // A free key with nobody queued takes any limit.
    let t2 = granted(try_hold(store, "sem", id(2), shared(5)).await.unwrap());
    store.release("sem", t2.fencing_token).await.unwrap();

    // While nobody holds it shared, the first queued shared request's limit is in force.
    let writer = granted(try_hold(store, "sem", id(0), WRITE).await.unwrap());
    let queued = queue_for(store, "sem", id(3), shared(3));
    waiters_become(store, "sem", 1).await;
    assert_eq!(
        try_hold(store, "sem", id(4), shared(4)).await,
        Err(StoreError::LimitMismatch { in_force: Some(3) })
    );
    store.release("sem", writer.fencing_token).await.unwrap();
    let got = handed(queued).await;
    assert_eq!((got.mode, got.limit), (lock_api::LockMode::Shared, Some(3)));
    assert!(got.fencing_token > writer.fencing_token);
    for session in &sessions {
        close(store, session).await;
    }
}

/// `count` sessions of 10 s.
async fn futures_join(store: &EtcdStore, count: usize) -> Vec<lock_api::SessionOpened> {
    let mut sessions = Vec::with_capacity(count);
    for _ in 0..count {
        sessions.push(open(store, 10_000).await);
    }
    sessions
}

async fn a_writer_blocks_later_readers_and_readers_are_batched(
    store: &EtcdStore,
    other: &EtcdStore,
) {
    let key = "batch";
    let s = futures_join(store, 6).await;
    let id = |n: usize| s[n].session_id.as_str();
    let w0 = granted(try_hold(store, key, id(0), WRITE).await.unwrap());
    // Queued in this order, on alternating replicas: r1 r2 w3 r4.
    let r1 = queue_for(other, key, id(1), READ);
    waiters_become(store, key, 1).await;
    let r2 = queue_for(store, key, id(2), READ);
    waiters_become(store, key, 2).await;
    let w3 = queue_for(other, key, id(3), WRITE);
    waiters_become(store, key, 3).await;
    let r4 = queue_for(store, key, id(4), READ);
    waiters_become(store, key, 4).await;
    // No barging: a reader with no wait is refused while others queue.
    assert!(contended(try_hold(other, key, id(5), READ).await));

    // The writer's release hands the key to both readers at the head, in one step.
    other.release(key, w0.fencing_token).await.unwrap();
    let (g1, g2) = (handed(r1).await, handed(r2).await);
    assert!(w0.fencing_token < g1.fencing_token && g1.fencing_token < g2.fencing_token);
    let state = store.lock_state(key).await.unwrap();
    assert_eq!(state.hold, Some(READ));
    assert_eq!(
        holder_tokens(store, key).await,
        [g1.fencing_token, g2.fencing_token]
    );
    assert_eq!(state.waiters, 2, "the writer blocks the reader behind it");

    // One reader leaving is not enough for the writer.
    store.release(key, g1.fencing_token).await.unwrap();
    assert_eq!(holder_tokens(other, key).await, [g2.fencing_token]);
    assert_eq!(other.lock_state(key).await.unwrap().waiters, 2);
    other.release(key, g2.fencing_token).await.unwrap();
    let g3 = handed(w3).await;
    assert_eq!(g3.mode, lock_api::LockMode::Exclusive);
    assert!(g3.fencing_token > g2.fencing_token);
    assert_eq!(
        store
            .lock_state(key)
            .await
            .unwrap()
            .exclusive_holder()
            .map(|h| h.fencing_token),
        Some(g3.fencing_token)
    );
    store.release(key, g3.fencing_token).await.unwrap();
    let g4 = handed(r4).await;
    assert!(g4.fencing_token > g3.fencing_token);
    other.release(key, g4.fencing_token).await.unwrap();
    assert_eq!(store.lock_state(key).await.unwrap().hold, None);
    for session in &s {
        close(store, session).await;
    }
}

async fn revoke_ends_one_hold_or_every_hold(store: &EtcdStore, other: &EtcdStore) {
    let key = "revoke/shared";
    let s = futures_join(store, 4).await;
    let id = |n: usize| s[n].session_id.as_str();
    let tokens: Vec<u64> = {
        let mut tokens = Vec::new();
        for n in 0..3 {
            tokens.push(granted(try_hold(store, key, id(n), READ).await.unwrap()).fencing_token);
        }
        tokens
    };
    let writer = queue_for(other, key, id(3), WRITE);
    waiters_become(store, key, 1).await;
    assert_eq!(
        other.revoke(key, Some(tokens[1])).await.unwrap(),
        [tokens[1]]
    );
    assert_eq!(
        other.revoke(key, Some(tokens[1])).await.unwrap(),
        Vec::<u64>::new()
    );
    assert_eq!(holder_tokens(store, key).await, [tokens[0], tokens[2]]);
    assert_eq!(store.lock_state(key).await.unwrap().waiters, 1);
    assert_eq!(
        store.release(key, tokens[1]).await,
        Err(StoreError::LockLost)
    );
    // Every hold, in token order; then the writer's turn.
    assert_eq!(
        store.revoke(key, None).await.unwrap(),
        [tokens[0], tokens[2]]
    );
    let w = handed(writer).await;
    assert!(w.fencing_token > tokens[2]);
    assert_eq!(other.revoke(key, None).await.unwrap(), [w.fencing_token]);
    assert_eq!(other.revoke(key, None).await.unwrap(), Vec::<u64>::new());
    for session in &s {
        close(store, session).await;
    }
}

async fn session_ends_and_expiry_end_one_hold_each(store: &EtcdStore, other: &EtcdStore) {
    let key = "ends";
    let (a, b, w) = (
        open(store, 10_000).await,
        open(other, 10_000).await,
        open(store, 10_000).await,
    );
    let ta = granted(try_hold(store, key, &a.session_id, READ).await.unwrap());
    // b's hold lives 300 ms and b never renews it.
    let tb = granted(
        other
            .acquire(AcquireCall {
                hold: READ,
                ..ask(key, &b.session_id, None, 300, None)
            })
            .await
            .unwrap(),
    );
    let writer = queue_for(other, key, &w.session_id, WRITE);
    waiters_become(store, key, 1).await;
    // Closing a ends its hold only: b's is still there (or expired), and the writer waits.
    close(store, &a).await;
    assert!(!holder_tokens(store, key).await.contains(&ta.fencing_token));
    // b's hold runs out without a release: the waiter notices and is served.
    let got = handed(writer).await;
    assert!(got.fencing_token > tb.fencing_token);
    assert_eq!(holder_tokens(other, key).await, [got.fencing_token]);
    store.release(key, got.fencing_token).await.unwrap();
    close(store, &b).await;
    close(store, &w).await;
}

/// Many shared L4s with a limit, and a few exclusive ones, race over two replicas, in rounds
/// that start together: some rounds without waiting (every replica sees the same
/// `limit − 1` holders and sends its grant at once), some waiting in the queue. A tally of
/// holds counted between the grant's answer and the release's request (so never more than
/// the server's holders at that instant) must never pass the limit or see an exclusive hold
/// beside any other, and neither may L7 through the other replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_racing_never_exceed_the_limit_or_mix_modes() {
    const LIMIT: u32 = 3;
    const READERS: usize = 14;
    const WRITERS: usize = 2;
    const ROUNDS: usize = 6;
    #[derive(Default)]
    struct Tally {
        shared: u32,
        exclusive: u32,
        most_shared: u32,
        tokens: Vec<u64>,
        violations: Vec<String>,
    }
    let etcd = EtcdCluster::single();
    let replicas = [
        store_on(&etcd, "/race/").await,
        store_on(&etcd, "/race/").await,
    ];
    let tally = Arc::new(std::sync::Mutex::new(Tally::default()));
    let gate = Arc::new(tokio::sync::Barrier::new(READERS + WRITERS));
    let mut tasks = Vec::new();
    for n in 0..READERS + WRITERS {
        let store = replicas[n % 2].clone();
        let observer = replicas[(n + 1) % 2].clone();
        let (tally, gate) = (tally.clone(), gate.clone());
        let hold = if n < WRITERS { WRITE } else { shared(LIMIT) };
        tasks.push(tokio::spawn(async move {
            let session = open(&store, 30_000).await.session_id;
            for round in 0..ROUNDS {
                gate.wait().await;
                let queue = (round % 2 == 1).then(long_wait);
                let call = AcquireCall {
                    hold,
                    ..ask("race", &session, None, 10_000, queue)
                };
                let grant = match store.acquire(call).await {
                    Ok(Acquired::Granted(grant)) => grant.grant,
                    Ok(Acquired::Contended { .. }) => continue,
                    // Noted, not panicked: a panicking contender would leave the others
                    // waiting at the gate.
                    Err(error) => {
                        let seen = format!("contender {n}, round {round}: {error:?}");
                        tally.lock().unwrap().violations.push(seen);
                        continue;
                    }
                };
                {
                    let tally = &mut *tally.lock().unwrap();
                    let clash = match hold {
                        WRITE => tally.shared + tally.exclusive > 0,
                        _ => tally.exclusive > 0 || tally.shared >= LIMIT,
                    };
                    if clash || grant.mode != hold.mode() || grant.limit != hold.limit() {
                        tally.violations.push(format!(
                            "round {round}: {grant:?} granted beside {} shared, {} exclusive",
                            tally.shared, tally.exclusive
                        ));
                    }
                    match hold {
                        WRITE => tally.exclusive += 1,
                        _ => tally.shared += 1,
                    }
                    tally.most_shared = tally.most_shared.max(tally.shared);
                    tally.tokens.push(grant.fencing_token);
                }
                let state = observer.lock_state("race").await.unwrap();
                let exclusive = state.hold == Some(WRITE);
                if state.holders.len() > LIMIT as usize || (exclusive && state.holders.len() != 1) {
                    tally
                        .lock()
                        .unwrap()
                        .violations
                        .push(format!("L7: {state:?}"));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                {
                    let tally = &mut *tally.lock().unwrap();
                    match hold {
                        WRITE => tally.exclusive -= 1,
                        _ => tally.shared -= 1,
                    }
                }
                if let Err(error) = store.release("race", grant.fencing_token).await {
                    let seen = format!("release of {grant:?}: {error:?}");
                    tally.lock().unwrap().violations.push(seen);
                }
            }
            store
                .close_session(SessionRef::new(&session, None))
                .await
                .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let tally = tally.lock().unwrap();
    assert_eq!(tally.violations, Vec::<String>::new());
    let mut tokens = tally.tokens.clone();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), tally.tokens.len(), "a token granted twice");
    // The race did happen: holders overlapped (every queued round serves a batch of readers).
    assert!(
        tally.most_shared >= 2,
        "never more than one shared holder at once"
    );
}

/// Readers without a limit cycling on one key over two replicas, with `waitMillis` 0: with
/// only compatible holders and nobody queued, every L4 is granted (never contended, never a
/// lost-race 503), each grant has a token of its own, and a writer gets the key after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_without_a_limit_on_one_key_are_all_granted() {
    let etcd = EtcdCluster::single();
    let stores = [
        store_on(&etcd, "/readers/").await,
        store_on(&etcd, "/readers/").await,
    ];
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let session = open(&store, 20_000).await;
            let mut tokens = Vec::new();
            for _ in 0..15 {
                let grant = granted(
                    try_hold(&store, "readers", &session.session_id, READ)
                        .await
                        .expect("a compatible reader is granted"),
                );
                tokens.push(grant.fencing_token);
                store.release("readers", grant.fencing_token).await.unwrap();
            }
            close(&store, &session).await;
            tokens
        }));
    }
    let mut tokens = Vec::new();
    for task in tasks {
        tokens.extend(task.await.unwrap());
    }
    let all = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), all, "a token granted twice");
    let writer = open(&stores[1], 20_000).await;
    let grant = granted(
        try_hold(&stores[0], "readers", &writer.session_id, WRITE)
            .await
            .unwrap(),
    );
    assert!(grant.fencing_token > *tokens.last().unwrap());
    assert_eq!(
        holder_tokens(&stores[1], "readers").await,
        vec![grant.fencing_token]
    );
}
