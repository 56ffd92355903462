//! Lock renewal against a real lock-server: a lock far shorter than its session's heartbeat
//! period stays held while heartbeats are answered (the schedule renews it every third of
//! its TTL), and when heartbeats stop reaching the server the handle is reported lost at its
//! deadline — its `lost()` future completes and a `lock_lost` event fires — and another
//! session takes the key over with a higher token.
//!
//! The one timing bound here is a correctness bound, not a speed goal: the loss must be
//! reported at the deadline, not whenever someone next looks. It allows one scheduling slice
//! of lateness; the behaviour it rules out misses the deadline by seconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::{
    AcquireRequest, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest, ReleaseRequest,
    SessionOpened, SessionStatus,
};
use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::native::{HttpTransport, OsRngSource, TokioClock, TokioSpawner};
use lock_wasm::{
    AcquirePolicy, ClientConfig, ClientEvent, Clock, EventSink, LockClient, LostReason,
    PolicySettings, Transport, TransportError,
};

/// How late a timer may fire on a loaded two-core machine and still count as "at" its
/// instant (ASSUMPTION for these tests).
const SCHEDULING_SLICE: Duration = Duration::from_millis(250);

const SESSION_TTL: Duration = Duration::from_secs(15);
const LOCK_TTL: Duration = Duration::from_millis(500);

fn config() -> ClientConfig {
    ClientConfig {
        session_ttl: Some(SESSION_TTL),
        backend: "sqlite".into(),
        ..ClientConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500ms_lock_on_a_15s_session_stays_held_through_5s_of_work() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let session = LockClient::native(server.base_url())
        .with_config(config())
        .open_session()
        .await
        .unwrap();
    let handle = session
        .acquire("renewal/short", LOCK_TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("free key");

    // Five seconds of "work" (ten times the lock's TTL, a third of the session's), the
    // server's view read every 100 ms.
    let start = Instant::now();
    let mut reads = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let holder = api.lock_state("renewal/short").await.holder;
        assert_eq!(
            holder.map(|h| h.fencing_token),
            Some(handle.fencing_token()),
            "L7 after {:?} of work",
            start.elapsed()
        );
        assert!(!handle.is_lost(), "{handle:?}");
        reads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reads >= 20, "only {reads} L7 reads");
    assert_eq!(handle.lost_reason(), None);
    session.release(&handle).await.unwrap();
    session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_heartbeats_blocked_the_lock_is_lost_at_its_deadline_and_taken_over() {
    let server = TestServer::start(ServerOptions::new());
    let clock = Arc::new(TokioClock::new());
    let transport = Arc::new(Blockable::new(server.base_url()));
    let events = Arc::new(Timed::new(clock.clone()));
    let client = LockClient::new(
        transport.clone(),
        clock.clone(),
        Arc::new(TokioSpawner),
        Arc::new(OsRngSource),
    )
    .with_events(events.clone())
    .with_config(config());
    let session = client.open_session().await.unwrap();
    let handle = session
        .acquire("renewal/blocked", LOCK_TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("free key");

    transport.block_heartbeats();
    let reason = tokio::time::timeout(Duration::from_secs(10), handle.lost())
        .await
        .expect("the handle is reported lost long before the session is");
    let lost_at = clock.now();
    // No renewal gets through any more, so the deadline is final now.
    let deadline = handle.deadline();
    assert_eq!(reason, LostReason::DeadlinePassed);
    assert!(
        lost_at >= deadline && lost_at - deadline <= SCHEDULING_SLICE,
        "deadline {deadline:?}, reported at {lost_at:?}"
    );
    let lost: Vec<_> = events.lost();
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (at, event) = &lost[0];
    assert_eq!(
        event,
        &ClientEvent::Lost {
            key: "renewal/blocked".into(),
            fencing_token: handle.fencing_token(),
            reason: LostReason::DeadlinePassed,
        }
    );
    assert!(*at >= deadline && *at - deadline <= SCHEDULING_SLICE);
    assert!(
        !session.is_lost(),
        "only the lock is gone; the session has 15 s"
    );

    // Once the server expires the lock, another session gets the key, with a higher token.
    let other = LockClient::native(server.base_url())
        .open_session()
        .await
        .unwrap();
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(10),
        max_attempts: 1_000,
        ..PolicySettings::default()
    })
    .unwrap();
    let taken = other
        .acquire("renewal/blocked", Duration::from_secs(10), &policy)
        .await
        .unwrap()
        .expect("granted once the server expired the lapsed lock");
    assert!(taken.fencing_token() > handle.fencing_token());
    other.release(&taken).await.unwrap();
    other.close().await.unwrap();
    session.release(&handle).await.unwrap(); // LOCK_LOST is benign
    session.close().await.unwrap();
}

/// Client events with the client clock's reading when each was emitted.
struct Timed {
    clock: Arc<TokioClock>,
    events: Mutex<Vec<(Duration, ClientEvent)>>,
}

impl Timed {
    fn new(clock: Arc<TokioClock>) -> Self {
        Timed {
            clock,
            events: Mutex::default(),
        }
    }

    fn lost(&self) -> Vec<(Duration, ClientEvent)> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|(_, e)| e.name() == "lock_lost")
            .cloned()
            .collect()
    }
}

impl EventSink for Timed {
    fn on_event(&self, event: &ClientEvent) {
        let at = self.clock.now();
        self.events.lock().unwrap().push((at, event.clone()));
    }
}

/// The SDK's HTTP transport, except that once blocked, heartbeats never reach the server:
/// they hang until the SDK's own timeout, as over a dropped connection.
struct Blockable {
    inner: HttpTransport,
    heartbeats_blocked: AtomicBool,
}

impl Blockable {
    fn new(base_url: String) -> Self {
        Blockable {
            inner: HttpTransport::new(base_url),
            heartbeats_blocked: AtomicBool::new(false),
        }
    }

    fn block_heartbeats(&self) {
        self.heartbeats_blocked.store(true, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Transport for Blockable {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.inner.open_session(request, timeout).await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        if self.heartbeats_blocked.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.heartbeat(session_id, timeout).await
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.close_session(session_id, timeout).await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.inner.acquire(key, request, timeout).await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.inner.session_status(session_id, timeout).await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.release(key, request, timeout).await
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.inner.read_lock(key, timeout).await
    }
}
