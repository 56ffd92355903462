//! Brooker's backoff experiment as a seeded discrete-event simulation: `n` clients each
//! update one row exactly once with optimistic concurrency (read the version, write with it;
//! a stale version fails and the client backs off, then reads again). Every message crosses a
//! network whose delay is `|Normal(10 ms, 2 ms)|`. We count the server's write calls (the
//! "work") and the time until the last client succeeded.
//!
//! This is the event model of the public simulator behind the AWS Architecture Blog post
//! ("Exponential Backoff And Jitter"), rewritten: the retry after a failed write is a read
//! that arrives at the server `delay + backoff(attempt)` after the failure reached the
//! client, with `attempt` counting from 1.
//!
//! Why not `lock_wasm::sim`: that executor drives the real SDK (sessions, heartbeats, the
//! full-jitter-only acquire loop) against a modelled lock service; the other strategies must
//! never enter the SDK, and Brooker's model is OCC on a row, not a lease. A 60-line event
//! queue reproduces his model and runs 4 000 simulated experiments in about a second. The
//! delays are `lock_lab`'s (full jitter the SDK's own), in whole milliseconds as the SDK
//! sleeps them, where his simulator draws real numbers.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

use lock_lab::strategy::{Delays, Strategy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The experiment's fixed parameters (Brooker's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Mean one-way network delay, ms.
    pub net_mean: f64,
    /// Its standard deviation, ms.
    pub net_sd: f64,
    /// First backoff window.
    pub base: Duration,
    /// Largest backoff window.
    pub cap: Duration,
}

/// Brooker's values: network |N(10, 2)| ms, base 5 ms, cap 2 s.
pub const BROOKER: Params = Params {
    net_mean: 10.0,
    net_sd: 2.0,
    base: Duration::from_millis(5),
    cap: Duration::from_secs(2),
};

/// What one simulated experiment produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Write calls the server handled (successful and failed).
    pub calls: u64,
    /// Simulated time when the last client learned its write succeeded, ms.
    pub completion_ms: f64,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    ServerRead,
    ClientReadReply { version: u64 },
    ServerWrite { version: u64 },
    ClientWriteReply { ok: bool },
}

struct Event {
    at: f64,
    seq: u64,
    client: usize,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so the max-heap pops the earliest event; ties break by insertion order.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The event queue plus the row, the network and the clients' backoff state.
struct World {
    params: Params,
    rng: StdRng,
    queue: BinaryHeap<Event>,
    seq: u64,
    version: u64,
    calls: u64,
    clients: Vec<(Delays, u32)>,
}

impl World {
    fn net(&mut self) -> f64 {
        normal(&mut self.rng, self.params.net_mean, self.params.net_sd).abs()
    }

    fn push(&mut self, at: f64, client: usize, kind: Kind) {
        self.seq += 1;
        self.queue.push(Event {
            at,
            seq: self.seq,
            client,
            kind,
        });
    }

    fn handle(&mut self, e: Event) {
        let at = e.at;
        match e.kind {
            Kind::ServerRead => {
                let version = self.version;
                let d = self.net();
                self.push(at + d, e.client, Kind::ClientReadReply { version });
            }
            Kind::ClientReadReply { version } => {
                let d = self.net();
                self.push(at + d, e.client, Kind::ServerWrite { version });
            }
            Kind::ServerWrite { version } => {
                self.calls += 1;
                let ok = version == self.version;
                if ok {
                    self.version += 1;
                }
                let d = self.net();
                self.push(at + d, e.client, Kind::ClientWriteReply { ok });
            }
            Kind::ClientWriteReply { ok: true } => {}
            Kind::ClientWriteReply { ok: false } => {
                let d = self.net();
                let (delays, attempt) = &mut self.clients[e.client];
                *attempt += 1;
                let wait = delays.next(*attempt, &mut self.rng).as_secs_f64() * 1000.0;
                self.push(at + d + wait, e.client, Kind::ServerRead);
            }
        }
    }
}

/// One experiment: `clients` clients start together at time 0 (each first read reaches the
/// server after one network delay) and run until every one of them has written once.
pub fn run_once(clients: usize, strategy: Strategy, params: Params, seed: u64) -> Outcome {
    let mut world = World {
        params,
        rng: StdRng::seed_from_u64(seed),
        queue: BinaryHeap::new(),
        seq: 0,
        version: 0,
        calls: 0,
        clients: (0..clients)
            .map(|_| (Delays::new(strategy, params.base, params.cap), 0))
            .collect(),
    };
    for client in 0..clients {
        let d = world.net();
        world.push(d, client, Kind::ServerRead);
    }
    let mut now = 0.0;
    while let Some(e) = world.queue.pop() {
        debug_assert!(e.at >= now, "time must move forward");
        now = e.at;
        world.handle(e);
    }
    Outcome {
        calls: world.calls,
        completion_ms: now,
    }
}

/// Mean calls and mean completion time over `runs` experiments; experiment `r` is seeded
/// from `(seed, clients, strategy, r)` so any single point can be replayed alone.
pub fn run_point(
    clients: usize,
    strategy: Strategy,
    params: Params,
    runs: u32,
    seed: u64,
) -> (f64, f64) {
    let tag = strategy as u64;
    let (mut calls, mut time) = (0.0, 0.0);
    for r in 0..runs {
        let s = seed
            .wrapping_mul(1_000_003)
            .wrapping_add((clients as u64) << 32 | tag << 24 | u64::from(r));
        let o = run_once(clients, strategy, params, s);
        calls += o.calls as f64;
        time += o.completion_ms;
    }
    (calls / f64::from(runs), time / f64::from(runs))
}

/// A normal variate by Box–Muller (rand 0.9 without `rand_distr`).
fn normal<R: Rng + ?Sized>(rng: &mut R, mean: f64, sd: f64) -> f64 {
    // 1 − u keeps the logarithm's argument in (0, 1].
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_writes_once_in_four_hops() {
        let o = run_once(1, Strategy::FullJitter, BROOKER, 3);
        assert_eq!(o.calls, 1);
        // start → read → reply → write → reply: four hops of ~10 ms.
        assert!(o.completion_ms > 25.0 && o.completion_ms < 55.0, "{o:?}");
    }

    #[test]
    fn every_client_eventually_writes_exactly_once() {
        for s in Strategy::ALL {
            let o = run_once(20, s, BROOKER, 11);
            assert!(o.calls >= 20, "{s:?}: {o:?}");
        }
    }

    #[test]
    fn a_seed_replays_exactly_and_seeds_differ() {
        let a = run_once(30, Strategy::DecorrelatedJitter, BROOKER, 5);
        assert_eq!(a, run_once(30, Strategy::DecorrelatedJitter, BROOKER, 5));
        assert_ne!(a, run_once(30, Strategy::DecorrelatedJitter, BROOKER, 6));
    }

    #[test]
    fn normal_variates_have_the_asked_mean_and_spread() {
        let mut rng = StdRng::seed_from_u64(4);
        let v: Vec<f64> = (0..20_000).map(|_| normal(&mut rng, 10.0, 2.0)).collect();
        let m = crate::stats::mean(&v);
        let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!((m - 10.0).abs() < 0.1, "mean {m}");
        assert!((sd - 2.0).abs() < 0.1, "sd {sd}");
    }
}
