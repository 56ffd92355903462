//! The same tests for Node (`tests/wasm_node.rs`) and headless Chromium
//! (`tests/web_browser.rs`): the core SDK over the wasm seams (`FetchTransport`, `JsClock`,
//! `LocalSpawner`) against a real lock-server.
//!
//! Servers are named at compile time, because a wasm test has no process environment:
//! - `LOCK_TEST_URL`: a lock-server allowing the browser runner's origin through CORS;
//! - `LOCK_TEST_HOLDBACK_URL` (optional): a lock-server holding back grants after an unclean
//!   start across a (faked) reboot, so L4 answers 503 NOT_LEADER. `scripts/test-wasm.sh`
//!   prepares one; without it the 503 test says so and passes vacuously.
//!
//! Time-dependent checks poll with generous bounds; nothing asserts on speed.

#![allow(clippy::arc_with_non_send_sync)] // JS-backed seams are !Send; wasm32 has one thread

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::ErrorCode;
use lock_wasm::backoff::SeededRngSource;
use lock_wasm::config::ClientConfig;
use lock_wasm::error::{LockError, TransportError};
use lock_wasm::events::{ClientEvent, EventSink};
use lock_wasm::policy::{AcquirePolicy, PolicySettings};
use lock_wasm::session::LockClient;
use lock_wasm::spawn::{BoxFuture, Spawner};
use lock_wasm::transport::{SessionRef, TransportExt};
use lock_wasm::wasm::timer::{monotonic_millis, Sleep, TimerKind};
use lock_wasm::wasm::{FetchTransport, JsClock, LocalSpawner};
use wasm_bindgen_test::wasm_bindgen_test;

const NO_SERVER: &str =
    "LOCK_TEST_URL is not set: start lock-server and build with LOCK_TEST_URL=http://127.0.0.1:PORT";

fn url() -> &'static str {
    // Not `env!`: the crate must still build (and fail with this message) without a server.
    match option_env!("LOCK_TEST_URL") {
        Some(url) => url,
        None => panic!("{NO_SERVER}"),
    }
}

/// A key no other test (or earlier run against the same server) uses.
// Test code naming its keys, not the SDK: no seam to go through, and nothing to replay.
#[allow(clippy::disallowed_methods)]
fn key(name: &str) -> String {
    format!("wasm/{name}/{}", (js_sys::Math::random() * 1e15) as u64)
}

/// Collects every event of a client.
#[derive(Clone, Default)]
struct Events(Rc<RefCell<Vec<ClientEvent>>>);

impl EventSink for Events {
    fn on_event(&self, event: &ClientEvent) {
        self.0.borrow_mut().push(event.clone());
    }
}

impl Events {
    fn contention(&self) -> Vec<(Duration, String)> {
        self.0
            .borrow()
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Contention { delay, reason, .. } => Some((*delay, reason.clone())),
                _ => None,
            })
            .collect()
    }
}

/// A spawner that never runs its task: a session whose heartbeats have stopped (a paused
/// process), so the server expires it.
struct NoHeartbeats;

impl Spawner for NoHeartbeats {
    fn spawn(&self, _task: BoxFuture<'static, ()>) {}
}

fn client_at(
    url: &str,
    events: &Events,
    spawner: Arc<dyn Spawner>,
    config: ClientConfig,
) -> LockClient {
    LockClient::new(
        Arc::new(FetchTransport::new(url)),
        Arc::new(JsClock),
        spawner,
        // Seeded: a failing run's jitter sequence can be replayed.
        Arc::new(SeededRngSource::new(41)),
    )
    .with_events(Arc::new(events.clone()))
    .with_config(config)
}

fn client(events: &Events) -> LockClient {
    client_at(
        url(),
        events,
        Arc::new(LocalSpawner),
        ClientConfig::default(),
    )
}

fn policy(budget_ms: u64, base_ms: u64, cap_ms: u64, attempts: u32) -> AcquirePolicy {
    AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(budget_ms),
        base_backoff: Duration::from_millis(base_ms),
        max_backoff: Duration::from_millis(cap_ms),
        max_attempts: attempts,
        wait_millis: 0,
    })
    .unwrap()
}

const TTL: Duration = Duration::from_secs(5);

/// Polls `done` every 20 ms until it holds; panics after `bound`.
async fn eventually(what: &str, bound: Duration, mut done: impl AsyncFnMut() -> bool) {
    let start = monotonic_millis();
    while !done().await {
        assert!(
            monotonic_millis() - start < bound.as_secs_f64() * 1000.0,
            "timed out waiting for {what}"
        );
        Sleep::new(Duration::from_millis(20), TimerKind::Foreground).await;
    }
}

async fn holder_token(key: &str) -> Option<u64> {
    let state = FetchTransport::new(url())
        .read_lock(key, Duration::from_secs(5))
        .await
        .unwrap();
    state.holder.map(|h| h.fencing_token)
}

#[wasm_bindgen_test]
async fn open_acquire_release_round_trip() {
    let session = client(&Events::default()).open_session().await.unwrap();
    let key = key("round-trip");
    let handle = session
        .acquire(&key, TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("a free key is granted");
    assert_eq!(handle.key(), key);
    assert!(handle.fencing_token() > 0);
    assert!(!handle.is_lost());
    assert_eq!(holder_token(&key).await, Some(handle.fencing_token()));
    session.release(&handle).await.unwrap();
    assert_eq!(holder_token(&key).await, None);
    session.close().await.unwrap();
}

#[wasm_bindgen_test]
async fn a_nested_hold_shares_one_grant_and_a_second_caller_waits_its_turn() {
    let session = client(&Events::default()).open_session().await.unwrap();
    let key = key("nested");
    let policy = AcquirePolicy::default();
    let outer = session.acquire(&key, TTL, &policy).await.unwrap().unwrap();
    let inner = outer.nest().unwrap();
    assert!(inner.same_grant(&outer));
    session.release(&inner).await.unwrap();
    assert_eq!(
        holder_token(&key).await,
        Some(outer.fencing_token()),
        "held at depth 1"
    );
    // Another caller of the session is no nested hold: it waits for the release, then gets a
    // token of its own.
    let second = session.acquire(&key, TTL, &policy);
    let release = async {
        session.release(&outer).await.unwrap();
    };
    let (second, ()) = futures::join!(second, release);
    let second = second.unwrap().expect("granted after the outer release");
    assert!(second.fencing_token() > outer.fencing_token());
    session.release(&second).await.unwrap();
    assert_eq!(holder_token(&key).await, None, "released at depth 0");
    session.close().await.unwrap();
}

#[wasm_bindgen_test]
async fn contention_is_retried_with_full_jitter_within_the_budget() {
    let holder = client(&Events::default()).open_session().await.unwrap();
    let events = Events::default();
    let waiter = client(&events).open_session().await.unwrap();
    let key = key("contended");
    let held = holder
        .acquire(&key, TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();

    let outcome = waiter
        .acquire(&key, TTL, &policy(600, 10, 80, 30))
        .await
        .unwrap();
    assert!(
        outcome.is_none(),
        "409 until the budget runs out → not granted"
    );
    let retries = events.contention();
    assert!(retries.len() >= 2, "409s were retried: {retries:?}");
    assert!(
        retries.iter().all(|(_, reason)| reason == "LOCK_CONTENDED"),
        "{retries:?}"
    );
    assert!(
        retries.iter().all(|(d, _)| *d <= Duration::from_millis(80)),
        "within the cap"
    );
    let first = retries[0].0;
    assert!(
        retries.iter().any(|(d, _)| *d != first),
        "jittered, not fixed: {retries:?}"
    );

    holder.release(&held).await.unwrap();
    let granted = waiter
        .acquire(&key, TTL, &policy(2000, 10, 80, 30))
        .await
        .unwrap()
        .unwrap();
    assert!(
        granted.fencing_token() > held.fencing_token(),
        "tokens strictly increase"
    );
    waiter.close().await.unwrap();
    holder.close().await.unwrap();
}

#[wasm_bindgen_test]
async fn lock_is_lost_when_the_server_expires_a_silent_session() {
    // Heartbeats never run, so the server expires the session after its TTL.
    let config = ClientConfig {
        session_ttl: Some(Duration::from_millis(600)),
        ..ClientConfig::default()
    };
    let events = Events::default();
    let session = client_at(url(), &events, Arc::new(NoHeartbeats), config)
        .open_session()
        .await
        .unwrap();
    let key = key("expired");
    let handle = session
        .acquire(&key, TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();
    assert!(!handle.is_lost());
    eventually(
        "the server to expire the session",
        Duration::from_secs(15),
        async || holder_token(&key).await.is_none(),
    )
    .await;
    // The conservative local deadline (sent_at + session TTL − margin) passed before the
    // server's expiry did.
    assert!(handle.is_lost());
    let again = session.acquire(&key, TTL, &AcquirePolicy::default()).await;
    assert!(
        matches!(
            again,
            Err(LockError::LockLost { .. }) | Err(LockError::SessionLost)
        ),
        "a lost key is not silently re-granted: {again:?}"
    );
    session.close().await.ok();
}

#[wasm_bindgen_test]
async fn heartbeat_detects_a_session_the_server_forgot() {
    let config = ClientConfig {
        session_ttl: Some(Duration::from_millis(900)),
        ..ClientConfig::default()
    };
    let events = Events::default();
    let session = client_at(url(), &events, Arc::new(LocalSpawner), config)
        .open_session()
        .await
        .unwrap();
    let key = key("forgotten");
    let handle = session
        .acquire(&key, TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();
    // Behind the SDK's back (as an expiry or an admin would): L3 with a plain transport,
    // which sends the session id in its header (a wrong one would be SESSION_NOT_FOUND).
    let named = SessionRef {
        id: session.id(),
        holder_id: session.holder_id(),
    };
    FetchTransport::new(url())
        .close_session(named, Duration::from_secs(5))
        .await
        .unwrap();
    eventually(
        "a heartbeat to report the loss",
        Duration::from_secs(15),
        async || handle.is_lost(),
    )
    .await;
    let lost_events = events
        .0
        .borrow()
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::Lost { .. } | ClientEvent::SessionLost { .. }
            )
        })
        .count();
    assert!(lost_events >= 1, "the loss was reported as an event");
    session.close().await.ok();
}

#[wasm_bindgen_test]
async fn not_leader_answers_are_retried_within_the_budget() {
    let Some(holdback_url) = option_env!("LOCK_TEST_HOLDBACK_URL") else {
        wasm_bindgen_test::console_log!("LOCK_TEST_HOLDBACK_URL not set: 503 test not run");
        return;
    };
    let events = Events::default();
    let session = client_at(
        holdback_url,
        &events,
        Arc::new(LocalSpawner),
        ClientConfig::default(),
    )
    .open_session()
    .await
    .unwrap();
    let outcome = session
        .acquire(&key("held-back"), TTL, &policy(1500, 10, 80, 30))
        .await;
    assert!(
        matches!(outcome, Err(LockError::NotLeader { .. })),
        "503 until the budget runs out → unavailable, not \"not granted\": {outcome:?}"
    );
    let retries = events.contention();
    assert!(retries.len() >= 2, "503s were retried: {retries:?}");
    assert!(
        retries.iter().all(|(_, reason)| reason == "NOT_LEADER"),
        "{retries:?}"
    );
    session.close().await.ok();
}

#[wasm_bindgen_test]
async fn fetch_transport_maps_contract_errors() {
    let transport = FetchTransport::new(url());
    let hop = Duration::from_secs(5);
    let unknown = SessionRef {
        id: "0123456789abcdef",
        holder_id: "0123456789abcdef",
    };
    let err = transport.session_status(unknown, hop).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::SessionNotFound));
    let request = lock_api::AcquireRequest {
        session_id: "nope".into(),
        ttl_millis: None,
        wait_millis: Some(30_001),
        mode: None,
        limit: None,
        value: None,
    };
    match transport.acquire("k", &request, hop).await.unwrap_err() {
        TransportError::Status { status, body } => {
            assert_eq!(status, 400);
            assert_eq!(body.code, ErrorCode::ValidationFailed);
        }
        other => panic!("expected 400 VALIDATION_FAILED, got {other:?}"),
    }
    // Nothing listens on port 9 of 127.0.0.1: a network error, not a panic.
    let dead = FetchTransport::new("http://127.0.0.1:9");
    let err = dead.read_lock("k", hop).await.unwrap_err();
    assert!(matches!(err, TransportError::Network(_)), "{err:?}");
}

#[wasm_bindgen_test]
async fn a_cancelled_acquire_leaves_the_session_usable() {
    let holder = client(&Events::default()).open_session().await.unwrap();
    let waiter = client(&Events::default()).open_session().await.unwrap();
    let key = key("cancelled");
    let held = holder
        .acquire(&key, TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .unwrap();
    // Dropping the acquire future is how an AbortSignal cancels it.
    let patient = policy(60_000, 10, 50, 10_000);
    let acquire = Box::pin(waiter.acquire(&key, TTL, &patient));
    let cancelled = select(
        acquire,
        Box::pin(Sleep::new(
            Duration::from_millis(150),
            TimerKind::Foreground,
        )),
    )
    .await;
    assert!(
        matches!(cancelled, Either::Right(_)),
        "still waiting when cancelled"
    );
    // `select` hands the unfinished acquire back; dropping it is the cancellation.
    drop(cancelled);
    holder.release(&held).await.unwrap();
    let handle = waiter
        .acquire(&key, TTL, &policy(5000, 10, 50, 100))
        .await
        .unwrap();
    assert!(
        handle.is_some(),
        "no stale in-flight mark after the cancellation"
    );
    waiter.close().await.unwrap();
    holder.close().await.unwrap();
}
