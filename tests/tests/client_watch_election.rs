//! Watch and leader election through the SDK against a real lock-server (C2 ct2-watch,
//! ct2-election; the server's L8 long poll, L9 and L4 `value`): a watch sees grants,
//! releases and hand-offs in order with rising tokens; two sessions campaign, resign and are
//! observed; a watch resumes across a server restart with a `reset`; and one client serves
//! many concurrent watchers and a campaign at once. Real time only orders events here;
//! every wait is bounded by a generous timeout, never asserted on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::election::{CampaignOptions, Leader};
use lock_wasm::native::{HttpTransport, OsRngSource, TokioClock, TokioSpawner};
use lock_wasm::transport::{Answer, Request, Transport};
use lock_wasm::watch::WatchStream;
use lock_wasm::{AcquirePolicy, EventKind, LockClient, WatchEvent};

/// Bound on any one wait here (a failure, not a measurement).
const BOUND: Duration = Duration::from_secs(60);

async fn next(watch: &mut WatchStream) -> WatchEvent {
    let item = tokio::time::timeout(BOUND, watch.next()).await;
    item.expect("an event in time")
        .expect("not ended")
        .expect("no error")
}

/// The next event that is not only a change of waiters.
async fn next_change(watch: &mut WatchStream) -> WatchEvent {
    loop {
        let event = next(watch).await;
        if event.kind != EventKind::Waiters {
            return event;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_grants_releases_and_hand_offs_in_order_with_rising_tokens() {
    let server = TestServer::start(ServerOptions::new());
    let client = LockClient::native(server.base_url());
    let key = "watch/order";
    let mut watch = client.watch(key);
    let snapshot = next(&mut watch).await;
    assert_eq!(snapshot.kind, EventKind::Snapshot);
    assert!(snapshot.state.as_ref().is_some_and(|s| s.holder.is_none()));
    let (one, two) = (
        client.open_session().await.unwrap(),
        client.open_session().await.unwrap(),
    );
    let ttl = Duration::from_secs(10);
    let first = one
        .acquire(key, ttl, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();
    let queued = AcquirePolicy::new(lock_wasm::PolicySettings {
        wait_millis: 5_000,
        ..Default::default()
    })
    .unwrap();
    let waiting = tokio::spawn({
        let (two, key) = (two.clone(), key.to_owned());
        async move { two.acquire(&key, ttl, &queued).await }
    });
    let granted = next_change(&mut watch).await;
    assert_eq!(
        (granted.kind, granted.fencing_token),
        (EventKind::Granted, Some(first.fencing_token()))
    );
    // The second session's ticket is queued before the first lets go.
    loop {
        let event = next(&mut watch).await;
        if event.kind == EventKind::Waiters && event.waiter_count == 1 {
            break;
        }
    }
    one.release(&first).await.unwrap();
    let second = waiting.await.unwrap().unwrap().unwrap();
    let released = next_change(&mut watch).await;
    assert_eq!(
        (released.kind, released.fencing_token),
        (EventKind::Released, Some(first.fencing_token()))
    );
    let handed = next_change(&mut watch).await;
    assert_eq!(
        (handed.kind, handed.fencing_token),
        (EventKind::HandedOff, Some(second.fencing_token()))
    );
    assert!(second.fencing_token() > first.fencing_token());
    assert_eq!(handed.holder_id.as_deref(), Some(two.holder_id()));
    two.release(&second).await.unwrap();
    let ended = next_change(&mut watch).await;
    assert_eq!(ended.kind, EventKind::Released);
    let ids = [&granted.id, &released.id, &handed.id, &ended.id];
    assert!(
        ids.windows(2).all(|w| w[0] != w[1]),
        "each event once: {ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_campaign_resign_and_are_observed() {
    let server = TestServer::start(ServerOptions::new());
    let client = LockClient::native(server.base_url());
    let election = "election/primary";
    let seen = Arc::new(Mutex::new(Vec::<Option<Leader>>::new()));
    let observer = tokio::spawn({
        let (mut leaders, seen) = (client.observe(election), seen.clone());
        async move {
            while let Some(Ok(leader)) = leaders.next().await {
                let done = leader
                    .as_ref()
                    .is_some_and(|l| l.value.as_deref() == Some("b2"));
                seen.lock().unwrap().push(leader);
                if done {
                    break;
                }
            }
        }
    });
    let (a, b) = (
        client.open_session().await.unwrap(),
        client.open_session().await.unwrap(),
    );
    let options = |value: &str| CampaignOptions {
        value: Some(value.into()),
        ttl: Some(Duration::from_secs(10)),
    };
    let first = a.campaign(election, options("a")).await.unwrap();
    let leader = client.leader(election).await.unwrap().unwrap();
    assert_eq!(
        (leader.term, leader.value.as_deref()),
        (first.term(), Some("a"))
    );
    assert_eq!(leader.holder_id, a.holder_id());
    let challenger = tokio::spawn({
        let b = b.clone();
        async move { b.campaign(election, options("b")).await }
    });
    // B waits its turn: A is still the leader after a while.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!challenger.is_finished());
    first.resign().await.unwrap();
    let second = tokio::time::timeout(BOUND, challenger)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(second.term() > first.term(), "terms rise");
    second.proclaim("b2").await.unwrap();
    tokio::time::timeout(BOUND, observer)
        .await
        .unwrap()
        .unwrap();
    let values: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|l| {
            l.as_ref()
                .map(|l| (l.term, l.value.clone().unwrap_or_default()))
        })
        .collect();
    let (t1, t2) = (first.term(), second.term());
    assert_eq!(values.first(), Some(&None));
    assert_eq!(values.last(), Some(&Some((t2, "b2".into()))));
    assert!(values.contains(&Some((t1, "a".into()))), "{values:?}");
    assert!(values.contains(&Some((t2, "b".into()))), "{values:?}");
    // Proclaim after the term ended is refused without a request.
    second.resign().await.unwrap();
    let refused = second.proclaim("late").await.unwrap_err();
    assert_eq!(refused.code(), "LOCK_LOST");
}

/// An HTTP transport whose server can be swapped (a restarted server listens on a new port).
struct Switchable(Mutex<Arc<HttpTransport>>);

#[async_trait::async_trait]
impl Transport for Switchable {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Answer {
        let current = self.0.lock().unwrap().clone();
        current.send(request, timeout).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_after_a_server_restart_with_a_reset() {
    let mut server = TestServer::start(ServerOptions::new());
    let transport = Arc::new(Switchable(Mutex::new(Arc::new(HttpTransport::new(
        server.base_url(),
    )))));
    let client = LockClient::new(
        transport.clone(),
        Arc::new(TokioClock::new()),
        Arc::new(TokioSpawner),
        Arc::new(OsRngSource),
    );
    let key = "watch/restart";
    let mut watch = client.watch(key);
    assert_eq!(next(&mut watch).await.kind, EventKind::Snapshot);
    let session = client.open_session().await.unwrap();
    let ttl = Duration::from_secs(30);
    let held = session
        .acquire(key, ttl, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next_change(&mut watch).await.kind, EventKind::Granted);
    server.kill9();
    server.restart();
    *transport.0.lock().unwrap() = Arc::new(HttpTransport::new(server.base_url()));
    // The next poll after the restart cannot be served from the old id: one reset, with the
    // key as the restarted server has it.
    let reset = next_change(&mut watch).await;
    assert_eq!(reset.kind, EventKind::Reset);
    let state = reset.state.expect("a reset carries the state");
    assert_eq!(state.key, key);
    if let Some(holder) = state.holder {
        assert_eq!(holder.fencing_token, held.fencing_token());
    }
    // Live events again after the reset.
    let other = client.open_session().await.unwrap();
    let policy = AcquirePolicy::default();
    if let Some(h) = other.acquire("watch/restart", ttl, &policy).await.unwrap() {
        let event = next_change(&mut watch).await;
        assert!(event.kind.is_grant() || event.kind.is_end(), "{event:?}");
        other.release(&h).await.unwrap();
    } else {
        // The restored hold still stands: its expiry or release is the next change.
        session.release(&held).await.ok();
        let event = next_change(&mut watch).await;
        assert!(event.kind.is_end(), "{event:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_serves_many_concurrent_watchers_and_a_campaign() {
    const WATCHERS: usize = 20;
    let server = TestServer::start(ServerOptions::new());
    let client = LockClient::native(server.base_url());
    let key = "election/busy";
    let mut watchers = Vec::new();
    let (ready, mut all_ready) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..WATCHERS {
        let mut watch = client.watch(key);
        let ready = ready.clone();
        watchers.push(tokio::spawn(async move {
            assert_eq!(next(&mut watch).await.kind, EventKind::Snapshot);
            ready.send(()).unwrap();
            let grant = next_change(&mut watch).await;
            assert_eq!(grant.kind, EventKind::Granted);
            (grant.fencing_token, grant.value)
        }));
    }
    // Every watcher has its snapshot before the campaign starts, so each sees the grant
    // (its next poll resumes after the snapshot's id, whenever it is sent).
    for _ in 0..WATCHERS {
        tokio::time::timeout(BOUND, all_ready.recv())
            .await
            .unwrap()
            .unwrap();
    }
    let options = CampaignOptions {
        value: Some("busy".into()),
        ttl: None,
    };
    let leadership = client.campaign(key, options).await.unwrap();
    for watcher in watchers {
        let (token, value) = tokio::time::timeout(BOUND, watcher).await.unwrap().unwrap();
        assert_eq!(token, Some(leadership.term()));
        assert_eq!(value.as_deref(), Some("busy"));
    }
    leadership.resign().await.unwrap();
}
