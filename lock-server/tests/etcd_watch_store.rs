//! L8 on the etcd [`Store`] against a real etcd, through the trait: two stores on one prefix
//! are two replicas; a watch through one sees what the other (or a lease's end) did, every
//! kind in token order, and a resume on a fresh replica is complete, or a reset once etcd
//! compacted the history it needs.
#![cfg(feature = "etcd")]

#[allow(dead_code)]
#[path = "../../tests/src/etcd.rs"]
mod etcd_harness;

use std::time::Duration;

use etcd_harness::EtcdCluster;
use lock_api::{EventKind, HoldKind, WatchEvent};
use lock_server::store::etcd::{EtcdOptions, EtcdStore};
use lock_server::store::feeds::{FeedItem, Pos, Start};
use lock_server::store::{
    AcquireCall, Acquired, NewSession, Queueing, SessionRef, Store, Subscription,
};

/// Bound on waiting for one event (an expiry by lease takes a second or two).
const EVENT_BOUND: Duration = Duration::from_secs(10);

async fn store_on(cluster: &EtcdCluster, prefix: &str) -> EtcdStore {
    let mut options = EtcdOptions::new(cluster.endpoints());
    options.prefix = prefix.to_owned();
    options.timeout = Duration::from_millis(1_000);
    EtcdStore::connect(options).await.expect("connect")
}

async fn open(store: &EtcdStore, ttl_millis: u64) -> String {
    store
        .open_session(NewSession::with_ttl(ttl_millis))
        .await
        .unwrap()
        .session_id
}

fn call<'a>(key: &'a str, session: &'a str, value: Option<&'a str>) -> AcquireCall<'a> {
    AcquireCall {
        key,
        session_id: session,
        client: None,
        ttl_millis: 10_000,
        hold: HoldKind::Exclusive,
        value,
        queue: None,
    }
}

async fn grant(store: &EtcdStore, key: &str, session: &str, value: Option<&str>) -> u64 {
    match store.acquire(call(key, session, value)).await.unwrap() {
        Acquired::Granted(grant) => grant.grant.fencing_token,
        Acquired::Contended { .. } => panic!("expected a grant of {key}"),
    }
}

/// An L4 that waits in the queue, in the background.
fn queue_for(
    store: &EtcdStore,
    key: &str,
    session: &str,
    value: &str,
) -> tokio::task::JoinHandle<Acquired> {
    let (store, key, session, value) = (
        store.clone(),
        key.to_owned(),
        session.to_owned(),
        value.to_owned(),
    );
    tokio::spawn(async move {
        let queue = Queueing {
            open_until: lock_server::store::lease::now_millis() + 25_000,
            grace: 1_000,
            cap: 64,
        };
        store
            .acquire(AcquireCall {
                queue: Some(queue),
                ..call(&key, &session, Some(&value))
            })
            .await
            .unwrap()
    })
}

/// A watcher: its subscription and the position its state (if any) is exact at.
struct Watcher {
    sub: Subscription,
    skip: Option<Pos>,
}

impl Watcher {
    /// Watches `key` on `store` from now (after the snapshot's state).
    async fn now(store: &EtcdStore, key: &str) -> Watcher {
        let sub = store.watch(key, None).await.unwrap();
        assert!(matches!(sub.start, Start::Snapshot));
        let (_, pos) = store.watch_state(key).await.unwrap();
        Watcher {
            sub,
            skip: Some(pos),
        }
    }

    /// The next live item after the state.
    async fn item(&mut self) -> FeedItem {
        loop {
            let item = tokio::time::timeout(EVENT_BOUND, self.sub.live.recv())
                .await
                .expect("an event in time")
                .expect("the feed lives");
            if let FeedItem::Event(pos, _) = &item {
                if self.skip.is_some_and(|skip| *pos <= skip) {
                    continue;
                }
            }
            return item;
        }
    }

    async fn event(&mut self) -> WatchEvent {
        match self.item().await {
            FeedItem::Event(_, event) => WatchEvent::clone(&event),
            FeedItem::Gap => panic!("a gap where an event was expected"),
        }
    }

    /// The next event, which must be of `kind`.
    async fn expect(&mut self, kind: EventKind) -> WatchEvent {
        let event = self.event().await;
        assert_eq!(event.kind, kind, "{event:?}");
        event
    }
}

/// The position an event id names (`<epoch>.<revision>.<index>`).
fn pos_of(id: &str) -> (u64, u32) {
    let mut parts = id.rsplitn(3, '.');
    let minor = parts.next().unwrap().parse().unwrap();
    let major = parts.next().unwrap().parse().unwrap();
    (major, minor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_through_another_replica_in_token_order_and_resumable_elsewhere() {
    let etcd = EtcdCluster::single();
    let (a, b) = (store_on(&etcd, "/w1/").await, store_on(&etcd, "/w1/").await);
    let key = "jobs/leader";
    let mut w = Watcher::now(&a, key).await;
    let mut seen: Vec<WatchEvent> = Vec::new();

    // granted, with its value; L7 shows it on the other replica.
    let s1 = open(&b, 10_000).await;
    let t1 = grant(&b, key, &s1, Some("node-1")).await;
    let e = w.expect(EventKind::Granted).await;
    assert_eq!(
        (e.fencing_token, e.value.as_deref()),
        (Some(t1), Some("node-1"))
    );
    assert_eq!(e.holder_id, Some(b.holder_id(&s1).await.unwrap()));
    assert_eq!(
        a.lock_state(key).await.unwrap().holders[0].value.as_deref(),
        Some("node-1")
    );
    seen.push(e);

    // proclaimed (L9 through B); L7 shows the new value; a stale token is LOCK_LOST, a
    // session that does not exist SESSION_NOT_FOUND.
    b.proclaim(key, SessionRef::new(&s1, None), t1, "node-1b")
        .await
        .unwrap();
    let e = w.expect(EventKind::Proclaimed).await;
    assert_eq!(
        (e.fencing_token, e.value.as_deref()),
        (Some(t1), Some("node-1b"))
    );
    seen.push(e);
    assert_eq!(
        b.lock_state(key).await.unwrap().holders[0].value.as_deref(),
        Some("node-1b")
    );
    assert_eq!(
        b.proclaim(key, SessionRef::new(&s1, None), t1 + 1, "x")
            .await,
        Err(lock_server::store::StoreError::LockLost)
    );
    assert_eq!(
        b.proclaim(
            key,
            SessionRef::new("0123456789abcdef0123456789abcdef", None),
            t1,
            "x"
        )
        .await,
        Err(lock_server::store::StoreError::SessionNotFound)
    );
    // A renewal without a value keeps it; with one replaces it (proclaimed).
    assert_eq!(grant(&b, key, &s1, None).await, t1);
    assert_eq!(
        b.lock_state(key).await.unwrap().holders[0].value.as_deref(),
        Some("node-1b")
    );
    assert_eq!(grant(&b, key, &s1, Some("node-1c")).await, t1);
    let e = w.expect(EventKind::Proclaimed).await;
    assert_eq!(e.value.as_deref(), Some("node-1c"));
    seen.push(e);

    // waiters: a ticket joins.
    let s2 = open(&b, 10_000).await;
    let waiter = queue_for(&b, key, &s2, "node-2");
    let e = w.expect(EventKind::Waiters).await;
    assert_eq!(e.waiter_count, 1);
    seen.push(e);

    // released, then handedOff with the ticket's value, in one revision.
    b.release(key, t1).await.unwrap();
    let released = w.expect(EventKind::Released).await;
    assert_eq!(released.fencing_token, Some(t1));
    let handed = w.expect(EventKind::HandedOff).await;
    let t2 = match waiter.await.unwrap() {
        Acquired::Granted(grant) => grant.grant.fencing_token,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (
            handed.fencing_token,
            handed.value.as_deref(),
            handed.waiter_count
        ),
        (Some(t2), Some("node-2"), 0)
    );
    assert_eq!(pos_of(&released.id).0, pos_of(&handed.id).0, "one revision");
    seen.push(released);
    seen.push(handed);

    // revoked (R1 through B).
    assert_eq!(b.revoke(key, None).await.unwrap(), vec![t2]);
    let e = w.expect(EventKind::Revoked).await;
    assert_eq!(e.fencing_token, Some(t2));
    seen.push(e);

    // expired: a session that stops heartbeating (its lease ends, writing nothing else).
    let s3 = open(&b, 1_000).await;
    let t3 = grant(&b, key, &s3, None).await;
    seen.push(w.expect(EventKind::Granted).await);
    let e = w.expect(EventKind::Expired).await;
    assert_eq!(e.fencing_token, Some(t3));
    seen.push(e);

    // released by L3 (the session's close).
    let s4 = open(&b, 10_000).await;
    let t4 = grant(&b, key, &s4, None).await;
    seen.push(w.expect(EventKind::Granted).await);
    b.close_session(SessionRef::new(&s4, None)).await.unwrap();
    let e = w.expect(EventKind::Released).await;
    assert_eq!(e.fencing_token, Some(t4));
    seen.push(e);

    // expired: a lock TTL that ran out, noticed and deleted by the next L4 (a settle).
    let s5 = open(&b, 10_000).await;
    let t5 = match b
        .acquire(AcquireCall {
            ttl_millis: 300,
            ..call(key, &s5, None)
        })
        .await
        .unwrap()
    {
        Acquired::Granted(grant) => grant.grant.fencing_token,
        other => panic!("{other:?}"),
    };
    seen.push(w.expect(EventKind::Granted).await);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let s6 = open(&b, 10_000).await;
    let t6 = grant(&b, key, &s6, None).await;
    let e = w.expect(EventKind::Expired).await;
    assert_eq!(e.fencing_token, Some(t5));
    seen.push(e);
    let e = w.expect(EventKind::Granted).await;
    assert_eq!(e.fencing_token, Some(t6));
    seen.push(e);

    // Tokens of grants rise; ids strictly increase.
    let grants: Vec<u64> = seen
        .iter()
        .filter(|e| e.kind.is_grant())
        .filter_map(|e| e.fencing_token)
        .collect();
    assert!(grants.windows(2).all(|w| w[0] < w[1]), "{grants:?}");
    let positions: Vec<(u64, u32)> = seen.iter().map(|e| pos_of(&e.id)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");

    // A fresh replica (no feed for the key) resumes after the first event: exactly the
    // events that followed, with the same ids.
    let c = store_on(&etcd, "/w1/").await;
    let mut resumed = c.watch(key, Some(&seen[0].id)).await.unwrap();
    assert!(matches!(&resumed.start, Start::Backlog(b) if b.is_empty()));
    for expected in &seen[1..] {
        let item = tokio::time::timeout(EVENT_BOUND, resumed.live.recv())
            .await
            .unwrap()
            .unwrap();
        let FeedItem::Event(_, event) = item else {
            panic!("a gap in a complete resume");
        };
        assert_eq!(
            (&event.id, event.kind, event.fencing_token),
            (&expected.id, expected.kind, expected.fencing_token)
        );
    }
    // The first replica's feed serves the same resume from its window.
    let again = a.watch(key, Some(&seen[2].id)).await.unwrap();
    let Start::Backlog(backlog) = &again.start else {
        panic!("expected a backlog");
    };
    let ids: Vec<&str> = backlog.iter().map(|(_, e)| e.id.as_str()).collect();
    let expected: Vec<&str> = seen[3..].iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, expected);
    // Another epoch's id, or garbage: a reset.
    let other = a.watch(key, Some("feedbeef.5.0")).await.unwrap();
    assert!(matches!(other.start, Start::Reset));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_counts_follow_tickets_joining_and_leaving() {
    let etcd = EtcdCluster::single();
    let (a, b) = (store_on(&etcd, "/w2/").await, store_on(&etcd, "/w2/").await);
    let key = "k";
    let mut w = Watcher::now(&a, key).await;
    let holder = open(&b, 10_000).await;
    let t1 = grant(&b, key, &holder, None).await;
    w.expect(EventKind::Granted).await;
    let (s2, s3) = (open(&b, 10_000).await, open(&a, 10_000).await);
    let _w2 = queue_for(&b, key, &s2, "two");
    assert_eq!(w.expect(EventKind::Waiters).await.waiter_count, 1);
    let _w3 = queue_for(&a, key, &s3, "three");
    assert_eq!(w.expect(EventKind::Waiters).await.waiter_count, 2);
    // A waiter's session closes: its ticket goes with its lease.
    b.close_session(SessionRef::new(&s2, None)).await.unwrap();
    assert_eq!(w.expect(EventKind::Waiters).await.waiter_count, 1);
    b.release(key, t1).await.unwrap();
    // The released event still counts the ticket the hand-off (next) takes.
    assert_eq!(w.expect(EventKind::Released).await.waiter_count, 1);
    let handed = w.expect(EventKind::HandedOff).await;
    assert_eq!(
        (handed.value.as_deref(), handed.waiter_count),
        (Some("three"), 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_from_compacted_history_is_a_reset_then_live_again() {
    let etcd = EtcdCluster::single();
    let a = store_on(&etcd, "/w3/").await;
    let key = "k";
    let mut w = Watcher::now(&a, key).await;
    let s1 = open(&a, 10_000).await;
    let t1 = grant(&a, key, &s1, None).await;
    let first = w.expect(EventKind::Granted).await;
    a.release(key, t1).await.unwrap();
    w.expect(EventKind::Released).await;

    // Compact everything up to now.
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None)
        .await
        .unwrap();
    let now = raw
        .get("/w3/", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    raw.compact(now, None).await.unwrap();

    // A fresh replica cannot replay from the first event: its watcher is told to reset.
    let b = store_on(&etcd, "/w3/").await;
    let mut resumed = b.watch(key, Some(&first.id)).await.unwrap();
    let gap = tokio::time::timeout(EVENT_BOUND, resumed.live.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(gap, FeedItem::Gap), "{gap:?}");
    // After a reset the feed is live: the state's position, then the next grant.
    let (_, pos) = b.watch_state(key).await.unwrap();
    let mut after = Watcher {
        sub: resumed,
        skip: Some(pos),
    };
    let t2 = grant(&a, key, &s1, None).await;
    assert_eq!(
        after.expect(EventKind::Granted).await.fencing_token,
        Some(t2)
    );
}

/// etcd restarts under a watch: the replica's watch breaks, is opened again from the last
/// revision it received, and what changed while it was down (through the other replica) and
/// after arrives in order, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_outlives_an_etcd_restart() {
    let mut etcd = EtcdCluster::single();
    let (a, b) = (store_on(&etcd, "/w4/").await, store_on(&etcd, "/w4/").await);
    let key = "k";
    let mut w = Watcher::now(&a, key).await;
    let s1 = open(&b, 30_000).await;
    let t1 = grant(&b, key, &s1, Some("before")).await;
    assert_eq!(w.expect(EventKind::Granted).await.fencing_token, Some(t1));

    let restart = tokio::task::spawn_blocking(move || {
        etcd.restart(0);
        etcd
    });
    let etcd = restart.await.unwrap();
    // The first requests after the restart may find the old connection broken.
    let mut proclaimed = false;
    for _ in 0..50 {
        if b.proclaim(key, SessionRef::new(&s1, None), t1, "after")
            .await
            .is_ok()
        {
            proclaimed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(proclaimed, "etcd back");
    let e = w.expect(EventKind::Proclaimed).await;
    assert_eq!(e.value.as_deref(), Some("after"));
    b.release(key, t1).await.unwrap();
    assert_eq!(w.expect(EventKind::Released).await.fencing_token, Some(t1));
    drop(etcd);
}
