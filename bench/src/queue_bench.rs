//! The wait queue against full jitter on the live server: N contenders on one key, each
//! acquiring it [`ROUNDS`] times and holding it for a few milliseconds, all through the SDK
//! (`LockClientSession::acquire`): full jitter with the SDK's default backoff (`waitMillis`
//! 0), and the same with `waitMillis` > 0, so every L4 waits in the server's queue and is
//! handed the lock in turn.
//!
//! Figures of one run (times on this process's monotonic clock):
//! - L4 calls per grant, counted at the transport;
//! - completion: from the common start until the last contender's last release returned;
//! - utilisation: the share of the completion time during which some contender held the key,
//!   overlaps merged;
//! - max ÷ median wait, a wait being one acquisition's time from asking to the grant;
//! - starvation: the largest ratio, over acquisitions that waited at least [`STARVED_AFTER`],
//!   of the wait to the time others held the key during it (1 = nobody ever waited on a free
//!   key; a waiter overtaken again and again ends far above; ∞ = one waited while nobody
//!   held the key at all).
//!
//! A contender holds the key from its grant's arrival until its release call returned: the
//! client's view of the server's tenure, which runs from the commit that grants the key to
//! the commit that frees it (and, with a queue, hands it on). Both ends are seen one answer
//! late, so the span has the tenure's length. Ending the hold when the release is *sent*
//! instead leaves the release's own round trip and commit out of every tenure, although no
//! other contender can be granted the key before that commit; it is reported beside, as
//! [`QueuePoint::starvation_to_send`], and makes a queue score about 1 ÷ utilisation even
//! when the key is never free on the server.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_lab::counting::counted;
use lock_lab::native::client_over;
use lock_lab::strategy::Strategy;
use lock_wasm::native::HttpTransport;
use lock_wasm::transport::Route;
use lock_wasm::{AcquirePolicy, PolicySettings};
use tokio::sync::Barrier;

// The live sweep's TTL, and its budget and attempt cap: generous, so full jitter finishes
// at N = 100 too and the work is comparable (the SDK default budget of 10 s would cut it off).
use crate::live_sweep::{BUDGET, MAX_ATTEMPTS, TTL};
use crate::stats::quantile;

/// Acquisitions per contender (ASSUMPTION: 5 — enough for steady state, where a fair queue
/// makes every wait alike, yet N = 100 stays within seconds).
pub const ROUNDS: usize = 5;
/// `waitMillis` of the queue's L4s (ASSUMPTION: 5 s, longer than any queue here takes to
/// move, so each grant is one call).
const QUEUE_WAIT_MILLIS: u64 = 5_000;
/// Waits shorter than this say nothing about starvation and are left out of it.
const STARVED_AFTER: Duration = Duration::from_millis(20);

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueuePoint {
    /// L4 calls per grant.
    pub calls_per_grant: f64,
    /// Common start to the last release, ms.
    pub completion_ms: f64,
    /// Share of the completion time the key was held (holds end when the release returned).
    pub utilisation: f64,
    /// Longest wait ÷ median wait.
    pub max_over_median: f64,
    /// Largest wait ÷ others' holding during it.
    pub starvation: f64,
    /// The same over the acquisitions after each contender's first: the queue's steady state,
    /// without the start, when all N ask at once.
    pub steady_starvation: f64,
    /// [`QueuePoint::starvation`] with every hold ending when its release was sent.
    pub starvation_to_send: f64,
}

/// One acquisition as its contender saw it.
#[derive(Debug, Clone, Copy)]
struct Acquisition {
    contender: usize,
    /// 0 for the contender's first acquisition.
    round: usize,
    asked: Instant,
    granted: Instant,
    /// When the release call was made.
    released: Instant,
    /// When the release call returned.
    returned: Instant,
}

/// Where a hold ends, as the clients saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldEnd {
    /// The release call returned: the key is free on the server (the measure).
    Returned,
    /// The release call was made (the earlier measure, reported beside).
    Sent,
}

impl HoldEnd {
    fn of(self, a: &Acquisition) -> Instant {
        match self {
            HoldEnd::Returned => a.returned,
            HoldEnd::Sent => a.released,
        }
    }
}

/// The SDK policy of `strategy`: the SDK's default backoff, the generous budget, and the
/// queue's wait for the server queue.
fn policy(strategy: Strategy) -> AcquirePolicy {
    let defaults = AcquirePolicy::default().settings();
    AcquirePolicy::new(PolicySettings {
        total_budget: BUDGET,
        max_attempts: MAX_ATTEMPTS,
        wait_millis: if strategy.queues() {
            QUEUE_WAIT_MILLIS
        } else {
            0
        },
        ..defaults
    })
    .expect("valid policy")
}

/// Runs `n` contenders of `strategy` (full jitter or the server queue) on `key`, each
/// holding for `hold` per acquisition.
pub async fn run_point(
    base_url: &str,
    n: usize,
    strategy: Strategy,
    key: &str,
    hold: Duration,
) -> QueuePoint {
    assert!(strategy.runs_in_sdk(), "{strategy:?} is not the SDK's");
    let transport = Arc::new(counted(HttpTransport::new(base_url)));
    let gate = Arc::new(Barrier::new(n + 1));
    let seen = Arc::new(Mutex::new(Vec::with_capacity(n * ROUNDS)));
    let tasks: Vec<_> = (0..n)
        .map(|contender| {
            let (transport, gate, seen) = (transport.clone(), gate.clone(), seen.clone());
            let key = key.to_owned();
            tokio::spawn(async move {
                let session = client_over(transport).open_session().await.expect("L1");
                let policy = policy(strategy);
                gate.wait().await;
                for round in 0..ROUNDS {
                    let asked = Instant::now();
                    let handle = session
                        .acquire(&key, TTL, &policy)
                        .await
                        .expect("acquire")
                        .expect("granted within the budget");
                    let granted = Instant::now();
                    tokio::time::sleep(hold).await;
                    let released = Instant::now();
                    session.release(&handle).await.expect("L6");
                    seen.lock().unwrap().push(Acquisition {
                        contender,
                        round,
                        asked,
                        granted,
                        released,
                        returned: Instant::now(),
                    });
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
    // Until the last release returned, as defined: not until the contenders' sessions closed,
    // which is no part of the work compared.
    let end = seen.iter().map(|a| a.returned).max().unwrap_or(start);
    let completion = end - start;
    QueuePoint {
        calls_per_grant: transport.intercept().calls(Route::Acquire) as f64 / seen.len() as f64,
        completion_ms: completion.as_secs_f64() * 1_000.0,
        utilisation: held(&seen, start, start + completion, HoldEnd::Returned)
            / completion.as_secs_f64(),
        max_over_median: max_over_median(&seen),
        starvation: starvation(&seen, 0, HoldEnd::Returned),
        steady_starvation: starvation(&seen, 1, HoldEnd::Returned),
        starvation_to_send: starvation(&seen, 0, HoldEnd::Sent),
    }
}

/// Seconds within `[from, to]` during which someone held the key (overlaps merged).
fn held(seen: &[Acquisition], from: Instant, to: Instant, end: HoldEnd) -> f64 {
    let mut spans: Vec<(Instant, Instant)> = seen
        .iter()
        .map(|a| (a.granted.clamp(from, to), end.of(a).clamp(from, to)))
        .collect();
    spans.sort();
    let mut total = Duration::ZERO;
    let mut covered = from;
    for (start, stop) in spans {
        let start = start.max(covered);
        if stop > start {
            total += stop - start;
            covered = stop;
        }
    }
    total.as_secs_f64()
}

fn max_over_median(seen: &[Acquisition]) -> f64 {
    let mut waits: Vec<f64> = seen
        .iter()
        .map(|a| (a.granted - a.asked).as_secs_f64())
        .collect();
    waits.sort_by(f64::total_cmp);
    match (quantile(&waits, 0.5), waits.last()) {
        (Some(median), Some(max)) if median > 0.0 => max / median,
        _ => f64::NAN,
    }
}

/// Starvation over the acquisitions of round `from_round` on (see the module's doc).
fn starvation(seen: &[Acquisition], from_round: usize, end: HoldEnd) -> f64 {
    seen.iter()
        .filter(|a| a.round >= from_round && a.granted - a.asked >= STARVED_AFTER)
        .map(|a| {
            let others: Vec<Acquisition> = seen
                .iter()
                .filter(|o| o.contender != a.contender)
                .copied()
                .collect();
            // A wait while nobody else held the key at all is infinite starvation.
            (a.granted - a.asked).as_secs_f64() / held(&others, a.asked, a.granted, end)
        })
        .fold(f64::NAN, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(origin: Instant, ms: u64) -> Instant {
        origin + Duration::from_millis(ms)
    }

    fn acquisition(
        o: Instant,
        contender: usize,
        asked: u64,
        granted: u64,
        released: u64,
    ) -> Acquisition {
        Acquisition {
            contender,
            round: 0,
            asked: at(o, asked),
            granted: at(o, granted),
            released: at(o, released),
            returned: at(o, released),
        }
    }

    fn returning(a: Acquisition, o: Instant, returned: u64) -> Acquisition {
        Acquisition {
            returned: at(o, returned),
            ..a
        }
    }

    #[test]
    fn a_fair_queue_scores_one_and_a_starved_waiter_does_not() {
        let o = Instant::now();
        // Back to back: 1 waits 30 ms while 0 holds 30 ms.
        let fair = [acquisition(o, 0, 0, 0, 30), acquisition(o, 1, 0, 30, 60)];
        assert!((starvation(&fair, 0, HoldEnd::Returned) - 1.0).abs() < 1e-9);
        assert!((held(&fair, o, at(o, 60), HoldEnd::Returned) - 0.060).abs() < 1e-9);
        // 2 waits 100 ms, but the key was held only 40 of them: it sat free while 2 waited.
        let starved = [acquisition(o, 0, 0, 0, 40), acquisition(o, 2, 0, 100, 110)];
        assert!((starvation(&starved, 0, HoldEnd::Returned) - 2.5).abs() < 1e-9);
        // Waits 0, 30, 100 ms: median 30.
        let all = [fair.as_slice(), &starved[1..]].concat();
        assert!((max_over_median(&all) - 100.0 / 30.0).abs() < 1e-9);
    }

    #[test]
    fn a_hold_lasts_until_its_release_returned_and_the_earlier_measure_ends_it_at_sending() {
        let o = Instant::now();
        // 0 holds 0..30 and its release takes until 40, when the server hands the key to 1,
        // whose grant arrives at 41: 1 waited 41 ms while 0 held the key for 40 of them.
        let handed_on = [
            returning(acquisition(o, 0, 0, 0, 30), o, 40),
            acquisition(o, 1, 0, 41, 70),
        ];
        assert!((starvation(&handed_on, 0, HoldEnd::Returned) - 41.0 / 40.0).abs() < 1e-9);
        assert!((starvation(&handed_on, 0, HoldEnd::Sent) - 41.0 / 30.0).abs() < 1e-9);
        assert!((held(&handed_on, o, at(o, 70), HoldEnd::Returned) - 0.069).abs() < 1e-9);
        assert!((held(&handed_on, o, at(o, 70), HoldEnd::Sent) - 0.059).abs() < 1e-9);
    }
}
