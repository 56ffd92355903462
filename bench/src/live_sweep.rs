//! Brooker's sweep against the real server: `n` contenders start together, each opens a
//! session, acquires the same key once, and releases it at once (hold ≈ one round trip, the
//! lock analogue of his single-row write). We count L4 calls per grant and the time until
//! the last contender has released.
//!
//! Full jitter runs through the SDK itself (`LockClientSession::acquire`, the production
//! loop). The other strategies are experiment-only and run `lock_lab`'s comparison loop over
//! the same transport, never through the SDK: they are forbidden there. Both count L4 calls
//! at a `lock_lab` counting transport around the SDK's `HttpTransport`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_api::OpenSessionRequest;
use lock_lab::comparison::{Acquired, Comparison};
use lock_lab::counting::{counted, Counting};
use lock_lab::native::client_over;
use lock_lab::strategy::Strategy;
use lock_wasm::native::{HttpTransport, OsRngSource, TokioClock};
use lock_wasm::transport::{Intercepted, Route};
use lock_wasm::{AcquirePolicy, PolicySettings, Transport};
use tokio::sync::Barrier;

/// Lock TTL asked for (long enough never to expire during a sweep or a queue run).
pub(crate) const TTL: Duration = Duration::from_secs(30);
/// Budget of one acquire: generous, so every strategy finishes and the work is comparable
/// (ASSUMPTION; the SDK default of 10 s would cut the slowest strategies off).
pub(crate) const BUDGET: Duration = Duration::from_secs(120);
/// Attempt cap: far above what the budget allows, so the budget alone bounds an acquire.
pub(crate) const MAX_ATTEMPTS: u32 = 100_000;
/// Largest backoff window (Brooker's 2 s, as in the simulation).
const CAP: Duration = Duration::from_secs(2);

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
    /// First backoff window.
    pub base: Duration,
    /// `waitMillis` of every L4 (server-side waiting; 0 = client-side backoff only).
    pub wait_millis: u64,
}

/// Brooker's parameters: base 5 ms, no server-side waiting.
pub const BROOKER_SDK: SdkSettings = SdkSettings {
    base: Duration::from_millis(5),
    wait_millis: 0,
};

impl SdkSettings {
    /// The policy every contender of a point acquires with.
    fn policy(self) -> AcquirePolicy {
        AcquirePolicy::new(PolicySettings {
            total_budget: BUDGET,
            base_backoff: self.base,
            max_backoff: CAP,
            max_attempts: MAX_ATTEMPTS,
            wait_millis: self.wait_millis,
        })
        .expect("valid policy")
    }
}

/// The transport of one point: the SDK's HTTP transport, its calls counted.
type Counted = Arc<Intercepted<Counting>>;

/// Runs `n` contenders on a fresh key at `base_url` with `strategy`, with Brooker's
/// parameters (base 5 ms, no server-side waiting).
pub async fn run_point(base_url: &str, n: usize, strategy: Strategy, key: &str) -> Point {
    run_point_with(base_url, n, strategy, key, BROOKER_SDK).await
}

/// [`run_point`] with the SDK's settings given (the comparison strategies take the same).
pub async fn run_point_with(
    base_url: &str,
    n: usize,
    strategy: Strategy,
    key: &str,
    sdk: SdkSettings,
) -> Point {
    let transport: Counted = Arc::new(counted(HttpTransport::new(base_url)));
    let start_gate = Arc::new(Barrier::new(n + 1));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let transport = transport.clone();
            let gate = start_gate.clone();
            let key = key.to_owned();
            tokio::spawn(async move {
                if strategy == Strategy::FullJitter {
                    sdk_contender(transport, &key, gate, sdk).await
                } else {
                    comparison_contender(transport, &key, strategy, gate, sdk).await
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
        calls_per_grant: transport.intercept().calls(Route::Acquire) as f64 / n as f64,
        completion_ms,
    }
}

/// The SDK path: a `LockClient` over the counting transport, the SDK's acquire, release.
async fn sdk_contender(transport: Counted, key: &str, gate: Arc<Barrier>, sdk: SdkSettings) {
    let session = client_over(transport).open_session().await.expect("L1");
    gate.wait().await;
    let handle = session
        .acquire(key, TTL, &sdk.policy())
        .await
        .expect("acquire")
        .expect("granted within the budget");
    session.release(&handle).await.expect("L6");
    let _ = session.close().await;
}

/// The comparison path: `lock_lab`'s loop with `strategy` over the same transport.
async fn comparison_contender(
    transport: Counted,
    key: &str,
    strategy: Strategy,
    gate: Arc<Barrier>,
    sdk: SdkSettings,
) {
    let transport: Arc<dyn Transport> = transport;
    let comparison = Comparison {
        transport,
        clock: Arc::new(TokioClock::new()),
        // Seeded from the OS per acquire, as the SDK seeds each acquire.
        rng: Arc::new(OsRngSource),
        strategy,
        policy: sdk.policy(),
    };
    // No heartbeats in this loop: the longest TTL the server accepts (5 min) outlives the
    // acquire budget.
    let request = OpenSessionRequest {
        ttl_millis: Some(lock_api::limits::TTL_MILLIS_MAX),
        owner: None,
    };
    let session = comparison.open_session(&request).await.expect("L1");
    gate.wait().await;
    let Acquired::Granted { grant, .. } = session.acquire(key, TTL, &mut ()).await.expect("L4")
    else {
        panic!("{strategy:?} ran out of budget")
    };
    session.release(&grant).await.expect("L6");
    session.close().await;
}
