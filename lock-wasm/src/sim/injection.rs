//! Injected infrastructure faults (the 10,000-seed run of docs/RELIABILITY.md, `sim-faults`
//! in lock-chaos):
//! [`FaultInjector`] sits in front of the lossy [`SimTransport`] and adds
//! - **503 bursts**: windows of simulated time in which every write (L1–L6) answers 503
//!   without reaching the server: NOT_LEADER (a replica shutting down), or, for a burst
//!   starting at an odd millisecond, STORE_UNAVAILABLE `no_quorum` with its retry hint (a
//!   store that cannot write; deciding by the start keeps every seed's draws as they were);
//! - **dropped answers**: the server applies the request, the answer never arrives (the
//!   client's timeout fires: the case idempotent L4 exists for);
//! - **delay spikes**: a request held up for 200–1500 ms before it reaches the server.
//!
//! Frequent whole-process pauses are the fourth fault; the run schedules them (see
//! [`super::run_seed_with`]). [`Injection::None`], the default, injects nothing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{ErrorBody, ErrorCode, Unavailability};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::transport::{Answer, Intercept, Outgoing};

use super::network::LostSessions;
#[cfg(doc)]
use super::network::SimTransport;

/// Which infrastructure faults a run injects besides its seed's lossy network and
/// occasional pauses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Injection {
    /// The base simulation: no injected faults.
    #[default]
    None,
    /// The fault run (`sim-faults`): a [`FaultPlan`] drawn per seed via a [`FaultInjector`],
    /// pauses twice as likely, more clients and rounds, and a seed stream of its own so it
    /// covers other runs than the base simulation.
    Chaos,
}

/// The faults of one seed, drawn from it.
#[derive(Debug, Clone, Default)]
pub struct FaultPlan {
    /// `[start, end)` windows of simulated time answering 503 to every write.
    pub bursts: Vec<(Duration, Duration)>,
    /// Probability that an answer is dropped after the server applied the request.
    pub drop_answer: f64,
    /// Probability that a request is delayed by 200–1500 ms before reaching the server.
    pub delay_spike: f64,
}

impl FaultPlan {
    /// 0–3 bursts of 0.1–1.5 s in the first 8 s, up to 5 % dropped answers, up to 5 % spikes.
    pub fn draw(rng: &mut StdRng) -> FaultPlan {
        let bursts = (0..rng.random_range(0..=3))
            .map(|_| {
                let start = Duration::from_millis(rng.random_range(0..=8_000));
                (
                    start,
                    start + Duration::from_millis(rng.random_range(100..=1_500)),
                )
            })
            .collect();
        FaultPlan {
            bursts,
            drop_answer: rng.random_range(0.0..0.05),
            delay_spike: rng.random_range(0.0..0.05),
        }
    }
}

/// The retry hint of an injected STORE_UNAVAILABLE (ASSUMPTION: 200 ms, the etcd backend's
/// hint for `no_quorum`).
const STORE_RETRY_AFTER_MILLIS: u64 = 200;

/// Counts of faults actually injected in one run (or summed over many).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Calls answered 503 NOT_LEADER inside a burst.
    pub not_leader: usize,
    /// Calls answered 503 STORE_UNAVAILABLE inside a burst.
    pub store_unavailable: usize,
    /// Answers dropped after the server applied the request.
    pub dropped: usize,
    /// Requests delayed by a spike.
    pub delayed: usize,
    /// Client processes paused.
    pub pauses: usize,
}

impl std::ops::AddAssign for FaultCounts {
    fn add_assign(&mut self, other: FaultCounts) {
        self.not_leader += other.not_leader;
        self.store_unavailable += other.store_unavailable;
        self.dropped += other.dropped;
        self.delayed += other.delayed;
        self.pauses += other.pauses;
    }
}

/// Injects the faults of a [`FaultPlan`] in front of a [`SimTransport`] (an [`Intercept`]).
#[derive(Clone)]
pub struct FaultInjector {
    clock: ManualClock,
    plan: Arc<FaultPlan>,
    rng: Arc<Mutex<StdRng>>,
    counts: Arc<Mutex<FaultCounts>>,
    lost: LostSessions,
}

enum Decision {
    NotLeader,
    StoreUnavailable,
    Pass { delay: Option<Duration>, drop: bool },
}

impl FaultInjector {
    /// Faults from `plan`, randomness from `seed`.
    pub fn new(clock: ManualClock, plan: FaultPlan, seed: u64) -> Self {
        FaultInjector {
            clock,
            plan: Arc::new(plan),
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            counts: Arc::default(),
            lost: LostSessions::default(),
        }
    }

    /// The sessions the clients declared lost (register them through an event sink). The
    /// check "no call after a lost session" is made here, at SEND time: the inner network's
    /// own check runs when a (possibly spike-delayed) request arrives, which is too late.
    pub fn lost_sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.sessions()
    }

    /// Calls sent after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.lost.violations()
    }

    /// Faults injected so far (pauses are counted by the run, not here).
    pub fn counts(&self) -> FaultCounts {
        *self.counts.lock().unwrap()
    }

    fn decide(&self, write: bool) -> Decision {
        let now = self.clock.now();
        let mut counts = self.counts.lock().unwrap();
        let burst = self
            .plan
            .bursts
            .iter()
            .find(|(s, e)| (*s..*e).contains(&now));
        if let (true, Some((start, _))) = (write, burst) {
            if start.as_millis() % 2 == 1 {
                counts.store_unavailable += 1;
                return Decision::StoreUnavailable;
            }
            counts.not_leader += 1;
            return Decision::NotLeader;
        }
        let mut rng = self.rng.lock().unwrap();
        let delay = rng
            .random_bool(self.plan.delay_spike)
            .then(|| Duration::from_millis(rng.random_range(200..=1_500)));
        let drop = rng.random_bool(self.plan.drop_answer);
        counts.delayed += usize::from(delay.is_some());
        counts.dropped += usize::from(drop);
        Decision::Pass { delay, drop }
    }
}

impl Intercept for FaultInjector {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        let request = call.request();
        let route = request.route();
        if let Some(id) = request.session_id() {
            self.lost.check(route.label(), id, self.clock.now());
        }
        // Writes are subject to the bursts.
        let decision = self.decide(route.writes());
        match decision {
            Decision::NotLeader => {
                self.clock.sleep(Duration::from_millis(2)).await;
                Err(TransportError::Status {
                    status: 503,
                    body: ErrorBody::new(ErrorCode::NotLeader, "injected 503 burst"),
                })
            }
            Decision::StoreUnavailable => {
                self.clock.sleep(Duration::from_millis(2)).await;
                let cause = Unavailability::NoQuorum;
                let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, cause.message());
                body.reason = Some(cause.label().to_owned());
                body.retry_after_millis = Some(STORE_RETRY_AFTER_MILLIS);
                Err(TransportError::Status { status: 503, body })
            }
            Decision::Pass { delay, drop } => {
                if let Some(d) = delay {
                    self.clock.sleep(d).await;
                }
                let answer = call.send().await;
                if drop {
                    // Applied by the server; the answer is lost. The client's timeout fires.
                    std::future::pending::<()>().await;
                }
                answer
            }
        }
    }
}
