//! The SDK in the server's wait queue, against a real lock-server: a grant after a wait
//! longer than the lock's TTL is a live handle (its deadline counts the server's
//! `waitedMillis`), on SQLite and on etcd; and a waiter whose L4s keep running out re-sends
//! at once and keeps its place ahead of one that queued after it.
//!
//! The holders hold for a while on purpose (the waits must outlast a TTL, or a request's own
//! wait); nothing asserts how long anything took.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{Api, ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, ClientEvent, EventSink, LockClient, PolicySettings};

const KEY: &str = "queue/sdk key";
/// Bound on every "eventually" (generous: nothing here depends on speed).
const EVENTUALLY: Duration = Duration::from_secs(30);

async fn waiters_become(api: &Api, count: u32) {
    let deadline = Instant::now() + EVENTUALLY;
    while api.lock_state(KEY).await.waiter_count != count {
        assert!(
            Instant::now() < deadline,
            "waiterCount never became {count}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn queued(wait_millis: u64) -> AcquirePolicy {
    AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(20),
        max_attempts: 100,
        wait_millis,
        ..PolicySettings::default()
    })
    .expect("valid policy")
}

/// Keeps the `lock_granted` events (who, after how many L4 calls, queued how long) and
/// counts the `contention` events (refused or unanswered L4s).
#[derive(Default)]
struct Grants(Mutex<Vec<(String, u32, Duration)>>, AtomicU32);

impl EventSink for Grants {
    fn on_event(&self, event: &ClientEvent) {
        match event {
            ClientEvent::Granted {
                holder_id,
                attempts,
                queued,
                ..
            } => self
                .0
                .lock()
                .unwrap()
                .push((holder_id.clone(), *attempts, *queued)),
            ClientEvent::Contention { .. } => {
                self.1.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_after_a_wait_longer_than_its_ttl_is_a_live_handle() {
    grant_after_a_long_wait_is_live(&TestServer::start(ServerOptions::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_a_grant_after_a_wait_longer_than_its_ttl_is_a_live_handle() {
    let etcd = EtcdCluster::single();
    let server = TestServer::start(
        ServerOptions::new()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()]),
    );
    grant_after_a_long_wait_is_live(&server).await;
}

async fn grant_after_a_long_wait_is_live(server: &TestServer) {
    let api = server.api();
    let grants = Arc::new(Grants::default());
    let client = LockClient::native(server.base_url()).with_events(grants.clone());
    let holder = client.open_session().await.expect("L1");
    let waiter = client.open_session().await.expect("L1");
    let held = holder
        .acquire(KEY, Duration::from_secs(30), &AcquirePolicy::default())
        .await
        .expect("acquire")
        .expect("free key");
    let ttl = Duration::from_millis(1_000);
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(KEY, ttl, &queued(10_000)).await })
    };
    waiters_become(&api, 1).await;
    // The waiter waits in the queue for longer than the TTL it asked for (a deadline counted
    // from the send alone would have passed).
    tokio::time::sleep(ttl).await;
    holder.release(&held).await.expect("L6");
    let handle = waiting
        .await
        .unwrap()
        .expect("acquire")
        .expect("handed the lock");
    assert!(
        !handle.is_lost(),
        "a grant after a wait longer than its TTL was born lost (deadline {:?})",
        handle.deadline()
    );
    assert!(handle.remaining() > Duration::ZERO);
    let state = api.lock_state(KEY).await;
    assert_eq!(
        state.holder.map(|h| h.fencing_token),
        Some(handle.fencing_token())
    );
    let (_, attempts, queued) = grants.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(attempts, 1, "one L4 for the grant");
    assert!(queued >= ttl, "the server reported the wait ({queued:?})");
    waiter.release(&handle).await.expect("L6");
}

/// A short grace period, so a waiter that backed off instead of re-sending at once would
/// lose its place within the hold; a re-send at once takes milliseconds.
const GRACE_MS: &str = "500";
/// How many of the first waiter's 200 ms L4s run out before the holder releases: 8, about
/// three grace periods of re-sending.
const RUN_OUTS: u32 = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_requests_run_out_keeps_its_place() {
    let server = TestServer::start(ServerOptions::new().args(["--queue-grace-ms", GRACE_MS]));
    let api = server.api();
    let grants = Arc::new(Grants::default());
    let client = LockClient::native(server.base_url()).with_events(grants.clone());
    let holder = client.open_session().await.expect("L1");
    let first = client.open_session().await.expect("L1");
    let second = client.open_session().await.expect("L1");
    let held = holder
        .acquire(KEY, Duration::from_secs(30), &AcquirePolicy::default())
        .await
        .expect("acquire")
        .expect("free key");
    let spawn = |session: lock_wasm::LockClientSession, policy: AcquirePolicy| {
        tokio::spawn(async move {
            let handle = session
                .acquire(KEY, Duration::from_secs(10), &policy)
                .await
                .expect("acquire")
                .expect("granted");
            session.release(&handle).await.expect("L6");
        })
    };
    // The first waiter's L4s wait 200 ms each and keep running out while the holder holds:
    // the SDK re-sends each at once, inside the ticket's grace period.
    let first_waits = spawn(first.clone(), queued(200));
    waiters_become(&api, 1).await;
    let second_waits = spawn(second.clone(), queued(10_000));
    waiters_become(&api, 2).await;
    // The first waiter's requests ran out and were re-sent for several grace periods: only
    // the holder's release ends its wait (it is the only one whose L4s are refused).
    let deadline = Instant::now() + EVENTUALLY;
    while grants.1.load(Ordering::SeqCst) < RUN_OUTS {
        assert!(
            Instant::now() < deadline,
            "the first waiter's L4s never ran out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    holder.release(&held).await.expect("L6");
    first_waits.await.unwrap();
    second_waits.await.unwrap();
    let grants = grants.0.lock().unwrap().clone();
    let order: Vec<&str> = grants.iter().skip(1).map(|(s, _, _)| s.as_str()).collect();
    assert_eq!(
        order,
        [first.holder_id(), second.holder_id()],
        "the first waiter lost its place"
    );
    assert!(grants[1].1 > 1, "its requests ran out and were re-sent");
    assert_eq!(grants[2].1, 1, "the second waiter's one L4 waited through");
}
