//! Shared holds on the live server, through the SDK (`LockClientSession::acquire_hold`), one
//! session per client over one `HttpTransport`:
//! - [`read_cycles`]: `clients` readers cycling acquire+release on one key in shared mode,
//!   against the same clients each cycling on its own key exclusively (the baseline: no
//!   contention at all). Shared holds must not serialise readers.
//! - [`writer_wait`]: a writer's wait for a key that readers hold continuously (each reader
//!   re-acquires as soon as it released), against the longest read hold: the FIFO queue stops
//!   new readers behind a waiting writer, so it waits for the holds already granted only.
//! - [`semaphore`]: `clients` contenders on a semaphore of `permits`, each acquiring a permit
//!   [`ROUNDS`] times in the server's queue and holding it briefly: the share of the permits'
//!   time that some contender held them.
//!
//! A hold lasts from its grant's arrival until its release call returned, as in
//! [`crate::queue_bench`]: the client's view of the server's tenure, one answer late at both
//! ends. Times are this process's monotonic clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::HoldKind;
use lock_lab::counting::counted;
use lock_lab::native::client_over;
use lock_wasm::native::HttpTransport;
use lock_wasm::transport::Route;
use lock_wasm::{AcquirePolicy, LockClientSession, PolicySettings, Transport};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Barrier;

use crate::live_sweep::{BUDGET, MAX_ATTEMPTS, TTL};

/// Acquisitions per semaphore contender (as in the queue bench: steady state, yet short).
pub const ROUNDS: usize = 5;
/// `waitMillis` of every queued L4 (ASSUMPTION: 5 s, longer than any queue here takes to
/// move, so each grant is one call).
const QUEUE_WAIT_MILLIS: u64 = 5_000;

/// The SDK policy: default backoff, the generous budget, and `wait_millis`.
fn policy(wait_millis: u64) -> AcquirePolicy {
    AcquirePolicy::new(PolicySettings {
        total_budget: BUDGET,
        max_attempts: MAX_ATTEMPTS,
        wait_millis,
        ..AcquirePolicy::default().settings()
    })
    .expect("valid policy")
}

/// `n` sessions over one transport to `base_url`.
async fn sessions(base_url: &str, n: usize) -> Vec<LockClientSession> {
    sessions_over(Arc::new(HttpTransport::new(base_url)), n).await
}

/// `n` sessions over `transport`.
async fn sessions_over(transport: Arc<dyn Transport>, n: usize) -> Vec<LockClientSession> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        all.push(
            client_over(transport.clone())
                .open_session()
                .await
                .expect("L1"),
        );
    }
    all
}

/// One hold: taken and held until `released` (the release call returned).
async fn hold(
    session: &LockClientSession,
    key: &str,
    kind: HoldKind,
    policy: &AcquirePolicy,
    work: Duration,
) -> (Instant, Instant) {
    let handle = session
        .acquire_hold(key, kind, TTL, policy)
        .await
        .expect("acquire")
        .expect("granted within the budget");
    let granted = Instant::now();
    if !work.is_zero() {
        tokio::time::sleep(work).await;
    }
    // A failed L6 (etcd answering NOT_LEADER under this load) is no end of the run: the SDK
    // ends the handle first and re-sends the L6 in the background.
    let _ = session.release(&handle).await;
    (granted, Instant::now())
}

/// What one run of cycles did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cycles {
    /// Acquire+release cycles per second.
    pub per_second: f64,
    /// L4 calls per cycle, counted at the transport (1.0: every acquire granted at once).
    pub calls_per_cycle: f64,
}

/// Acquire+release cycles per second of `clients` clients for `window`: all on `key` in
/// shared mode (`shared`), or each exclusively on a key of its own under `key`.
pub async fn read_cycles(
    base_url: &str,
    clients: usize,
    shared: bool,
    key: &str,
    window: Duration,
) -> Cycles {
    let transport = Arc::new(counted(HttpTransport::new(base_url)));
    let all = sessions_over(transport.clone(), clients).await;
    let gate = Arc::new(Barrier::new(clients + 1));
    let cycles = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = all
        .into_iter()
        .enumerate()
        .map(|(i, session)| {
            let (gate, cycles, stop) = (gate.clone(), cycles.clone(), stop.clone());
            let (key, kind) = if shared {
                (key.to_owned(), HoldKind::Shared { limit: None })
            } else {
                (format!("{key}/{i}"), HoldKind::Exclusive)
            };
            tokio::spawn(async move {
                let policy = policy(0);
                gate.wait().await;
                while !stop.load(Ordering::Relaxed) {
                    hold(&session, &key, kind, &policy, Duration::ZERO).await;
                    cycles.fetch_add(1, Ordering::Relaxed);
                }
                let _ = session.close().await;
            })
        })
        .collect();
    gate.wait().await;
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let done = cycles.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client panicked");
    }
    let total = cycles.load(Ordering::Relaxed).max(1);
    Cycles {
        per_second: done as f64 / elapsed.as_secs_f64(),
        calls_per_cycle: transport.intercept().calls(Route::Acquire) as f64 / total as f64,
    }
}

/// What one writer-wait run saw.
#[derive(Debug, Clone, PartialEq)]
pub struct WriterWait {
    /// Each write's wait, ask → grant, ms.
    pub waits_ms: Vec<f64>,
    /// The longest read hold of the run, ms.
    pub longest_read_ms: f64,
    /// Read holds completed.
    pub reads: usize,
}

/// `readers` readers hold `key` for `read_hold` each, re-acquiring at once, staggered so
/// that the key is never free of readers; meanwhile one writer acquires it `writes` times,
/// each after a random pause of up to one read hold, and holds it for 1 ms. Every L4 waits
/// in the server's queue.
pub async fn writer_wait(
    base_url: &str,
    readers: usize,
    read_hold: Duration,
    writes: usize,
    key: &str,
) -> WriterWait {
    let mut all = sessions(base_url, readers + 1).await;
    let writer = all.pop().expect("the writer's session");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = all
        .into_iter()
        .enumerate()
        .map(|(i, session)| {
            let (stop, reads, key) = (stop.clone(), reads.clone(), key.to_owned());
            let offset = read_hold * i as u32 / readers as u32;
            tokio::spawn(async move {
                let policy = policy(QUEUE_WAIT_MILLIS);
                let kind = HoldKind::Shared { limit: None };
                tokio::time::sleep(offset).await;
                while !stop.load(Ordering::Relaxed) {
                    let (granted, released) = hold(&session, &key, kind, &policy, read_hold).await;
                    reads.lock().unwrap().push(released - granted);
                }
                let _ = session.close().await;
            })
        })
        .collect();
    // The read load forms before the first write.
    tokio::time::sleep(read_hold * 3).await;
    let policy = policy(QUEUE_WAIT_MILLIS);
    let mut rng = SmallRng::seed_from_u64(writes as u64);
    let mut waits_ms = Vec::with_capacity(writes);
    for _ in 0..writes {
        let pause = rng.random_range(0..=read_hold.as_millis() as u64);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let asked = Instant::now();
        let (granted, _) = hold(
            &writer,
            key,
            HoldKind::Exclusive,
            &policy,
            Duration::from_millis(1),
        )
        .await;
        waits_ms.push((granted - asked).as_secs_f64() * 1_000.0);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("reader panicked");
    }
    let _ = writer.close().await;
    let reads = reads.lock().unwrap().clone();
    WriterWait {
        waits_ms,
        longest_read_ms: reads
            .iter()
            .map(|d| d.as_secs_f64() * 1_000.0)
            .fold(0.0, f64::max),
        reads: reads.len(),
    }
}

/// What one semaphore run saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemaphorePoint {
    /// Share of `permits × completion` during which permits were held (at most `permits`
    /// counted at once).
    pub utilisation: f64,
    /// Common start to the last release returned, ms.
    pub completion_ms: f64,
    /// The most holds seen at once (the client's view, one answer late at both ends, so a
    /// hand-off may briefly show one more than `permits`).
    pub most_at_once: usize,
}

/// `clients` contenders take a permit of `key`'s semaphore of `permits` [`ROUNDS`] times
/// each, in the server's queue, holding it for `hold`.
pub async fn semaphore(
    base_url: &str,
    clients: usize,
    permits: u32,
    hold_for: Duration,
    key: &str,
) -> SemaphorePoint {
    let all = sessions(base_url, clients).await;
    let gate = Arc::new(Barrier::new(clients + 1));
    let seen = Arc::new(Mutex::new(Vec::with_capacity(clients * ROUNDS)));
    let tasks: Vec<_> = all
        .into_iter()
        .map(|session| {
            let (gate, seen, key) = (gate.clone(), seen.clone(), key.to_owned());
            tokio::spawn(async move {
                let policy = policy(QUEUE_WAIT_MILLIS);
                let kind = HoldKind::Shared {
                    limit: Some(permits),
                };
                gate.wait().await;
                for _ in 0..ROUNDS {
                    let span = hold(&session, &key, kind, &policy, hold_for).await;
                    seen.lock().unwrap().push(span);
                }
                let _ = session.close().await;
            })
        })
        .collect();
    gate.wait().await;
    let start = Instant::now();
    for t in tasks {
        t.await.expect("contender panicked");
    }
    let seen = seen.lock().unwrap().clone();
    let end = seen.iter().map(|(_, r)| *r).max().unwrap_or(start);
    let (held, most_at_once) = held_permits(&seen, permits as usize);
    let completion = (end - start).as_secs_f64();
    SemaphorePoint {
        utilisation: held / (permits as f64 * completion),
        completion_ms: completion * 1_000.0,
        most_at_once,
    }
}

/// Permit-seconds held over `spans`, counting at most `permits` at once, and the most spans
/// open at once.
fn held_permits(spans: &[(Instant, Instant)], permits: usize) -> (f64, usize) {
    // +1 at each grant, −1 at each release; a release sorts before a grant at one instant.
    let mut edges: Vec<(Instant, i32)> = spans
        .iter()
        .flat_map(|(g, r)| [(*g, 1), (*r, -1)])
        .collect();
    edges.sort();
    let (mut open, mut most, mut held) = (0usize, 0usize, 0.0);
    let mut last = edges.first().map(|(t, _)| *t);
    for (t, step) in edges {
        if let Some(prev) = last {
            held += (t - prev).as_secs_f64() * open.min(permits) as f64;
        }
        last = Some(t);
        open = (open as i64 + step as i64) as usize;
        most = most.max(open);
    }
    (held, most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_held_count_at_most_the_limit_at_once() {
        let o = Instant::now();
        let at = |ms| o + Duration::from_millis(ms);
        // Two permits: 0..10 and 0..10 fill both; a third 5..15 overlaps both (the client's
        // late view) but counts only once they end; 20..30 alone.
        let spans = [
            (at(0), at(10)),
            (at(0), at(10)),
            (at(5), at(15)),
            (at(20), at(30)),
        ];
        let (held, most) = held_permits(&spans, 2);
        // 0..10 two permits (20 ms), 10..15 one (5), 20..30 one (10).
        assert!((held - 0.035).abs() < 1e-9, "{held}");
        assert_eq!(most, 3);
    }
}
