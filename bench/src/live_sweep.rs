//! Brooker's sweep against the real server: `n` contenders start together, each opens a
//! session, acquires the same key once, and releases it at once (hold ≈ one round trip, the
//! lock analogue of his single-row write). We count L4 calls per grant and the time until
//! the last contender has released.
//!
//! Full jitter runs through the SDK itself (`LockClientSession::acquire`, the production
//! loop). The other strategies are experiment-only and run a minimal loop here over the
//! SDK's own transport (`lock_wasm::native::HttpTransport`), never through the SDK: they are
//! forbidden there. Both count L4 calls at the transport.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lock_api::{
    AcquireRequest, ErrorCode, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest,
    ReleaseRequest, SessionOpened, SessionStatus,
};
use lock_wasm::native::{HttpTransport, OsRngSource, TokioClock, TokioSpawner};
use lock_wasm::{AcquirePolicy, LockClient, PolicySettings, Transport, TransportError};

use crate::strategy::{Backoff, Strategy, Window};

/// Lock TTL asked for, ms (long enough never to expire during a sweep).
const TTL: Duration = Duration::from_secs(30);
/// Per-request timeout of the experiment loop (the SDK uses its own default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Budget of one acquire: generous, so every strategy finishes and the work is comparable
/// (ASSUMPTION; the SDK default of 10 s would cut the slowest strategies off).
const BUDGET: Duration = Duration::from_secs(120);

/// Base and cap of the live sweep, the same as the simulation's (Brooker's 5 ms and 2 s).
pub const WINDOW: Window = Window {
    base: 5.0,
    cap: 2_000.0,
};

/// A transport that counts L4 calls and passes everything to the SDK's HTTP transport.
pub struct Counting {
    inner: HttpTransport,
    acquires: AtomicU64,
}

impl Counting {
    /// Counts calls to the server at `base_url`.
    pub fn new(base_url: &str) -> Self {
        Counting {
            inner: HttpTransport::new(base_url),
            acquires: AtomicU64::new(0),
        }
    }

    /// L4 calls so far.
    pub fn acquires(&self) -> u64 {
        self.acquires.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Transport for Counting {
    async fn open_session(
        &self,
        r: &OpenSessionRequest,
        t: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.inner.open_session(r, t).await
    }
    async fn heartbeat(&self, id: &str, t: Duration) -> Result<HeartbeatResponse, TransportError> {
        self.inner.heartbeat(id, t).await
    }
    async fn close_session(&self, id: &str, t: Duration) -> Result<(), TransportError> {
        self.inner.close_session(id, t).await
    }
    async fn acquire(
        &self,
        key: &str,
        r: &AcquireRequest,
        t: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.acquires.fetch_add(1, Ordering::Relaxed);
        self.inner.acquire(key, r, t).await
    }
    async fn session_status(&self, id: &str, t: Duration) -> Result<SessionStatus, TransportError> {
        self.inner.session_status(id, t).await
    }
    async fn release(
        &self,
        key: &str,
        r: &ReleaseRequest,
        t: Duration,
    ) -> Result<(), TransportError> {
        self.inner.release(key, r, t).await
    }
    async fn read_lock(&self, key: &str, t: Duration) -> Result<LockState, TransportError> {
        self.inner.read_lock(key, t).await
    }
}

/// One sweep point's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// L4 calls divided by grants (= contenders).
    pub calls_per_grant: f64,
    /// Time from the common start until the last release returned, ms.
    pub completion_ms: f64,
}

/// The SDK's acquire settings a sweep point runs with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdkSettings {
    /// Full-jitter base window.
    pub base: Duration,
    /// `waitMillis` of every L4 (server-side waiting; 0 = client-side backoff only).
    pub wait_millis: u64,
}

/// Brooker's parameters: base 5 ms, no server-side waiting.
pub const BROOKER_SDK: SdkSettings = SdkSettings {
    base: Duration::from_millis(WINDOW.base as u64),
    wait_millis: 0,
};

/// Runs `n` contenders on a fresh key at `base_url` with `strategy`. Full jitter goes
/// through the SDK (Brooker's base, no server-side waiting); the others through
/// [`experiment_acquire`].
pub async fn run_point(base_url: &str, n: usize, strategy: Strategy, key: &str) -> Point {
    run_point_with(base_url, n, strategy, key, BROOKER_SDK).await
}

/// [`run_point`] with the SDK's settings given (used by full jitter only).
pub async fn run_point_with(
    base_url: &str,
    n: usize,
    strategy: Strategy,
    key: &str,
    sdk: SdkSettings,
) -> Point {
    let transport = Arc::new(Counting::new(base_url));
    let start_gate = Arc::new(tokio::sync::Barrier::new(n + 1));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let transport = transport.clone();
            let gate = start_gate.clone();
            let key = key.to_owned();
            tokio::spawn(async move {
                if strategy == Strategy::FullJitter {
                    sdk_contender(transport, &key, gate, sdk).await
                } else {
                    experiment_contender(transport, &key, strategy, gate).await
                }
            })
        })
        .collect();
    start_gate.wait().await;
    let start = Instant::now();
    for t in tasks {
        t.await.expect("contender panicked");
    }
    let completion_ms = start.elapsed().as_secs_f64() * 1000.0;
    Point {
        calls_per_grant: transport.acquires() as f64 / n as f64,
        completion_ms,
    }
}

/// The SDK path: a `LockClient` over the counting transport, acquire with full jitter
/// (cap 2 s, base and `waitMillis` from `sdk`), release.
async fn sdk_contender(
    transport: Arc<Counting>,
    key: &str,
    gate: Arc<tokio::sync::Barrier>,
    sdk: SdkSettings,
) {
    let client = LockClient::new(
        transport,
        Arc::new(TokioClock::new()),
        Arc::new(TokioSpawner),
        Arc::new(OsRngSource),
    );
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: BUDGET,
        base_backoff: sdk.base,
        max_backoff: Duration::from_millis(WINDOW.cap as u64),
        max_attempts: 100_000,
        wait_millis: sdk.wait_millis,
    })
    .expect("valid policy");
    let session = client.open_session().await.expect("L1");
    gate.wait().await;
    let handle = session
        .acquire(key, TTL, &policy)
        .await
        .expect("acquire")
        .expect("granted within the budget");
    session.release(&handle).await.expect("L6");
    let _ = session.close().await;
}

/// The experiment-only loop: L4; on 409/429 sleep the strategy's delay for this attempt
/// (numbered like the SDK's: the first retry uses the base window) and try again.
async fn experiment_contender(
    transport: Arc<Counting>,
    key: &str,
    strategy: Strategy,
    gate: Arc<tokio::sync::Barrier>,
) {
    let opened = transport
        .open_session(
            &OpenSessionRequest {
                // No heartbeats in this loop: the longest TTL the server accepts (5 min)
                // outlives the acquire budget.
                ttl_millis: Some(lock_api::limits::TTL_MILLIS_MAX),
                owner: None,
            },
            REQUEST_TIMEOUT,
        )
        .await
        .expect("L1");
    gate.wait().await;
    let grant = experiment_acquire(&*transport, key, &opened.session_id, strategy).await;
    transport
        .release(
            key,
            &ReleaseRequest {
                fencing_token: grant.fencing_token,
                session_id: Some(opened.session_id.clone()),
            },
            REQUEST_TIMEOUT,
        )
        .await
        .expect("L6");
    let _ = transport
        .close_session(&opened.session_id, REQUEST_TIMEOUT)
        .await;
}

/// Acquires `key` with `strategy`, retrying contention until [`BUDGET`] runs out.
pub async fn experiment_acquire(
    transport: &dyn Transport,
    key: &str,
    session_id: &str,
    strategy: Strategy,
) -> LockGrant {
    let request = AcquireRequest {
        session_id: session_id.to_owned(),
        ttl_millis: Some(TTL.as_millis() as u64),
        wait_millis: Some(0),
    };
    // Seeded from the OS per contender, as the SDK seeds each acquire.
    let mut rng = lock_wasm::RngSource::rng(&OsRngSource);
    let mut backoff = Backoff::new(strategy, WINDOW);
    let deadline = Instant::now() + BUDGET;
    let mut attempt = 0;
    loop {
        match transport.acquire(key, &request, REQUEST_TIMEOUT).await {
            Ok(grant) => return grant,
            Err(e)
                if matches!(
                    e.code(),
                    Some(ErrorCode::LockContended | ErrorCode::ContentionExceeded)
                ) =>
            {
                let delay = backoff.delay(attempt, &mut rng);
                attempt += 1;
                assert!(Instant::now() < deadline, "{strategy:?} ran out of budget");
                tokio::time::sleep(Duration::from_secs_f64(delay / 1000.0)).await;
            }
            Err(e) => panic!("L4 failed: {e}"),
        }
    }
}
