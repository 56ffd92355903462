//! One long-lived session serves any number of acquires: after a warm-up, the memory the
//! process holds does not grow with acquire+release cycles, each made from a fresh task.
//!
//! Live bytes are counted exactly by a counting allocator (no garbage collector to wait for),
//! so the bound is the target itself: at most 1 KB per 1,000 cycles. A session that kept one
//! waker per L4 (every attempt races the session's end) grew by tens of kilobytes per 1,000.
//! The server is the simulation's model behind a zero-delay network on a clock that never
//! moves, so the count is the SDK's own memory, not a socket's or an HTTP client's; every
//! request yields to the runtime once, as a real one waits for its answer (so whatever the
//! SDK races against a request is polled too); the tasks run on tokio, whose finished tasks
//! leave nothing behind.
#![cfg(not(target_arch = "wasm32"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_wasm::clock::ManualClock;
use lock_wasm::error::TransportError;
use lock_wasm::native::TokioSpawner;
use lock_wasm::sim::{Faults, Network, SimService, SimTransport};
use lock_wasm::transport::{Reply, Request, Transport};
use lock_wasm::{AcquirePolicy, LockClient, LockClientSession, SeededRngSource};
use tokio::runtime::Runtime;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const WARM_UP: usize = 2_000;
/// Cycles measured: 20,000 in the suite; `LOCK_SOAK_CYCLES` sets another count (the soak
/// benchmark in docs/BENCHMARKS.md runs 500,000 in a release build).
fn measured_cycles() -> usize {
    std::env::var("LOCK_SOAK_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}
/// The target: at most 1 KB more per 1,000 cycles.
const BOUND_PER_1000: i64 = 1_024;

/// The simulated service, each answer one scheduler turn away.
struct OneTurnAway(SimTransport);

#[async_trait::async_trait]
impl Transport for OneTurnAway {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Result<Reply, TransportError> {
        tokio::task::yield_now().await;
        self.0.send(request, timeout).await
    }
}

/// `count` acquire+release cycles of one key, each in a task of its own.
fn cycles(rt: &Runtime, session: &LockClientSession, count: usize) {
    for _ in 0..count {
        let s = session.clone();
        let cycle = tokio::spawn(async move {
            let ttl = Duration::from_secs(10);
            let handle = s.acquire("k", ttl, &AcquirePolicy::default()).await;
            let handle = handle.unwrap().expect("an uncontended key is granted");
            s.release(&handle).await.unwrap();
        });
        rt.block_on(cycle).unwrap();
    }
}

#[test]
fn a_long_lived_session_does_not_grow_with_its_acquires() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let clock = ManualClock::new();
    let service = SimService::new(clock.clone(), Faults::default());
    let direct = Network {
        delay_millis: (0, 0),
        loss: 0.0,
    };
    let client = LockClient::new(
        Arc::new(OneTurnAway(SimTransport::new(service, direct, 1))),
        Arc::new(clock),
        Arc::new(TokioSpawner),
        Arc::new(SeededRngSource::new(1)),
    );
    let session = rt.block_on(client.open_session()).unwrap();
    cycles(&rt, &session, WARM_UP);
    let before = LIVE.load(Ordering::Relaxed);
    let count = measured_cycles();
    cycles(&rt, &session, count);
    let grown = LIVE.load(Ordering::Relaxed) - before;
    let per_1000 = grown * 1_000 / count as i64;
    println!("{count} cycles on one session: {grown} bytes more ({per_1000} per 1,000)");
    assert!(
        per_1000 <= BOUND_PER_1000,
        "{per_1000} bytes per 1,000 cycles"
    );
}
