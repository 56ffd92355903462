//! Injected infrastructure faults (the 10,000-seed run of docs/RELIABILITY.md, `sim-faults`
//! in lock-chaos):
//! [`FaultyTransport`] sits in front of the lossy [`SimTransport`] and adds
//! - **503 bursts**: windows of simulated time in which every write (L1–L6) answers 503
//!   NOT_LEADER without reaching the server (a leaderless cluster);
//! - **dropped answers**: the server applies the request, the answer never arrives (the
//!   client's timeout fires: the case idempotent L4 exists for);
//! - **delay spikes**: a request held up for 200–1500 ms before it reaches the server.
//!
//! Frequent whole-process pauses are the fourth fault; the run schedules them (see
//! [`super::run_seed_with`]). [`Injection::None`], the default, injects nothing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::transport::Transport;

use super::service::{LostSessions, SimTransport};

/// Which infrastructure faults a run injects besides its seed's lossy network and
/// occasional pauses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Injection {
    /// The base simulation: no injected faults.
    #[default]
    None,
    /// The fault run (`sim-faults`): a [`FaultPlan`] drawn per seed via a [`FaultyTransport`],
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

/// Counts of faults actually injected in one run (or summed over many).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Calls answered 503 inside a burst.
    pub not_leader: usize,
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
        self.dropped += other.dropped;
        self.delayed += other.delayed;
        self.pauses += other.pauses;
    }
}

/// A [`Transport`] that injects the faults of a [`FaultPlan`] in front of a [`SimTransport`].
#[derive(Clone)]
pub struct FaultyTransport {
    inner: SimTransport,
    clock: ManualClock,
    plan: Arc<FaultPlan>,
    rng: Arc<Mutex<StdRng>>,
    counts: Arc<Mutex<FaultCounts>>,
    lost: LostSessions,
}

enum Decision {
    NotLeader,
    Pass { delay: Option<Duration>, drop: bool },
}

impl FaultyTransport {
    /// Faults from `plan`, randomness from `seed`.
    pub fn new(inner: SimTransport, clock: ManualClock, plan: FaultPlan, seed: u64) -> Self {
        FaultyTransport {
            inner,
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

    fn check_session(&self, what: &str, session_id: &str) {
        self.lost.check(what, session_id, self.clock.now());
    }

    /// Faults injected so far (pauses are counted by the run, not here).
    pub fn counts(&self) -> FaultCounts {
        *self.counts.lock().unwrap()
    }

    fn decide(&self, write: bool) -> Decision {
        let now = self.clock.now();
        let mut counts = self.counts.lock().unwrap();
        if write
            && self
                .plan
                .bursts
                .iter()
                .any(|(s, e)| (*s..*e).contains(&now))
        {
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

    /// Runs `call` under the faults; writes are subject to bursts.
    async fn faulty<T>(
        &self,
        write: bool,
        call: impl std::future::Future<Output = Result<T, TransportError>>,
    ) -> Result<T, TransportError> {
        match self.decide(write) {
            Decision::NotLeader => {
                self.clock.sleep(Duration::from_millis(2)).await;
                Err(TransportError::Status {
                    status: 503,
                    body: ErrorBody::new(ErrorCode::NotLeader, "injected 503 burst"),
                })
            }
            Decision::Pass { delay, drop } => {
                if let Some(d) = delay {
                    self.clock.sleep(d).await;
                }
                let answer = call.await;
                if drop {
                    // Applied by the server; the answer is lost. The client's timeout fires.
                    std::future::pending::<()>().await;
                }
                answer
            }
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for FaultyTransport {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.faulty(true, self.inner.open_session(request, timeout))
            .await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        self.check_session("L2", session_id);
        self.faulty(true, self.inner.heartbeat(session_id, timeout))
            .await
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.check_session("L3", session_id);
        self.faulty(true, self.inner.close_session(session_id, timeout))
            .await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.check_session("L4", &request.session_id);
        self.faulty(true, self.inner.acquire(key, request, timeout))
            .await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.check_session("L5", session_id);
        self.faulty(false, self.inner.session_status(session_id, timeout))
            .await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        if let Some(id) = &request.session_id {
            self.check_session("L6", id);
        }
        self.faulty(true, self.inner.release(key, request, timeout))
            .await
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.faulty(false, self.inner.read_lock(key, timeout)).await
    }
}
