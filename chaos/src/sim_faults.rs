//! The SDK's seeded simulation (`lock_wasm::sim`) with injected faults, for the
//! 10,000-seed run of issue 7. It reuses the simulation's executor, clock, modelled server
//! and lossy network unchanged, and adds [`FaultyTransport`] in front of them:
//! - **503 bursts**: windows of simulated time in which every write (L1–L6) answers 503
//!   NOT_LEADER without reaching the server (a leaderless cluster);
//! - **dropped answers**: the server applies the request, the answer never arrives (the
//!   client's timeout fires: the case idempotent L4 exists for);
//! - **delay spikes**: a request held up for up to 1.5 s before it reaches the server;
//! - **pauses**: whole client processes frozen (SIGSTOP-like), often past their TTLs.
//!
//! Invariants (checked after every poll, as the base simulation does): at most one valid
//! handle per key and each the server's live holder with the same token; every acquire ends
//! within its budget plus the time its process was paused; no call names a session after
//! the client declared it lost.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};
use lock_wasm::error::TransportError;
use lock_wasm::sim::{Faults, Network, SimExecutor, SimService, SimTransport};
use lock_wasm::{
    AcquirePolicy, ClientConfig, ClientEvent, Clock, EventSink, LockClient, LockClientSession,
    LockError, LockHandle, ManualClock, PolicySettings, SeededRngSource, Transport,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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

/// Counts of faults actually injected in one run.
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

/// A [`Transport`] that injects the faults of a [`FaultPlan`] in front of another one.
#[derive(Clone)]
pub struct FaultyTransport {
    inner: SimTransport,
    clock: ManualClock,
    plan: Arc<FaultPlan>,
    rng: Arc<Mutex<StdRng>>,
    counts: Arc<Mutex<FaultCounts>>,
    lost: Arc<Mutex<BTreeSet<String>>>,
    violations: Arc<Mutex<Vec<String>>>,
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
            lost: Arc::default(),
            violations: Arc::default(),
        }
    }

    /// The sessions the clients declared lost (register them through an event sink). The
    /// check "no call after a lost session" is made here, at SEND time: the inner network's
    /// own check runs when a (possibly spike-delayed) request arrives, which is too late.
    pub fn lost_sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.clone()
    }

    /// Calls sent after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    fn check_session(&self, what: &str, session_id: &str) {
        if self.lost.lock().unwrap().contains(session_id) {
            self.violations.lock().unwrap().push(format!(
                "{what} sent at {:?} for session {session_id} after it was declared lost",
                self.clock.now()
            ));
        }
    }

    /// Faults injected so far.
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

#[async_trait::async_trait]
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

/// What one seed did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// Acquire calls.
    pub acquires: usize,
    /// Grants.
    pub grants: usize,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Sessions the clients declared lost.
    pub sessions_lost: u64,
}

#[derive(Default)]
struct World {
    held: Mutex<Vec<(usize, LockHandle)>>,
    violations: Mutex<Vec<String>>,
    pauses: Mutex<Vec<(usize, Duration, Duration)>>,
    acquires: AtomicUsize,
    grants: AtomicUsize,
    finished: AtomicUsize,
    lost: Mutex<u64>,
}

impl World {
    fn violate(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    fn paused_between(&self, client: usize, start: Duration, end: Duration) -> Duration {
        self.pauses
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _, _)| *c == client)
            .map(|(_, from, to)| (*to).min(end).saturating_sub((*from).max(start)))
            .sum()
    }
}

/// Registers sessions a client declares lost with the network (for invariant 3).
struct LostRecorder {
    lost: Arc<Mutex<BTreeSet<String>>>,
}

impl EventSink for LostRecorder {
    fn on_event(&self, event: &ClientEvent) {
        if let ClientEvent::SessionLost { session_id } = event {
            self.lost.lock().unwrap().insert(session_id.clone());
        }
    }
}

/// The randomised shape of one seed.
struct Scenario {
    clients: usize,
    keys: Vec<String>,
    rounds: usize,
    lock_ttl: Duration,
    policy: AcquirePolicy,
    config: ClientConfig,
    network: Network,
}

impl Scenario {
    fn draw(rng: &mut StdRng) -> Scenario {
        let base = rng.random_range(5..=50);
        let policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_millis(rng.random_range(300..=3_000)),
            base_backoff: Duration::from_millis(base),
            max_backoff: Duration::from_millis(rng.random_range(base..=800)),
            max_attempts: rng.random_range(2..=12),
            wait_millis: 0,
        })
        .expect("drawn policies are valid");
        Scenario {
            clients: rng.random_range(2..=6),
            keys: (0..rng.random_range(1..=2))
                .map(|i| format!("k{i}"))
                .collect(),
            rounds: rng.random_range(2..=8),
            lock_ttl: Duration::from_millis(rng.random_range(800..=3_000)),
            policy,
            config: ClientConfig {
                session_ttl: Some(Duration::from_millis(rng.random_range(1_200..=4_000))),
                request_timeout: Duration::from_millis(rng.random_range(100..=500)),
                backend: "sim".into(),
                ..ClientConfig::default()
            },
            network: Network {
                delay_millis: (rng.random_range(0..=5), rng.random_range(5..=60)),
                loss: rng.random_range(0.0..0.03),
            },
        }
    }
}

/// Runs one seed with faults; `Err` names the first violated invariant.
pub fn run_seed(seed: u64) -> Result<SeedReport, String> {
    // A different stream from the base simulation's, so the two suites cover different runs.
    let mut rng = StdRng::seed_from_u64(seed ^ 0xC4A0_5EED);
    let scenario = Arc::new(Scenario::draw(&mut rng));
    let plan = FaultPlan::draw(&mut rng);
    let clock = ManualClock::new();
    let exec = SimExecutor::new(clock.clone());
    let service = SimService::new(clock.clone(), Faults::default());
    let network = SimTransport::new(service.clone(), scenario.network, rng.random());
    let transport = FaultyTransport::new(network.clone(), clock.clone(), plan, rng.random());
    let world = Arc::new(World::default());
    let mut pauses = 0;
    for client in 1..=scenario.clients {
        pauses += usize::from(schedule_pause(&exec, &world, client, &mut rng));
        let lock_client = LockClient::new(
            Arc::new(transport.clone()),
            Arc::new(clock.clone()),
            exec.spawner(client),
            Arc::new(SeededRngSource::new(rng.random())),
        )
        .with_config(scenario.config.clone())
        .with_events(Arc::new(LostRecorder {
            lost: transport.lost_sessions(),
        }));
        let worker = Worker {
            id: client,
            client: lock_client,
            clock: clock.clone(),
            scenario: scenario.clone(),
            world: world.clone(),
            rng: StdRng::seed_from_u64(rng.random()),
        };
        exec.spawn_in(client, worker.run());
    }
    let done = || {
        world.finished.load(Ordering::SeqCst) == scenario.clients
            || !world.violations.lock().unwrap().is_empty()
            || !network.violations().is_empty()
            || !transport.violations().is_empty()
    };
    let step = || check_holders(&world, &service, &clock);
    exec.run_until(Duration::from_secs(3_600), done, step)
        .map_err(|e| format!("seed {seed}: {e}"))?;
    let mut violations = world.violations.lock().unwrap().clone();
    violations.extend(network.violations());
    violations.extend(transport.violations());
    if let Some(first) = violations.first() {
        return Err(format!("seed {seed}: {first}"));
    }
    let mut faults = transport.counts();
    faults.pauses = pauses;
    let sessions_lost = *world.lost.lock().unwrap();
    Ok(SeedReport {
        acquires: world.acquires.load(Ordering::SeqCst),
        grants: world.grants.load(Ordering::SeqCst),
        faults,
        sessions_lost,
    })
}

/// With probability 0.5, pauses the client once for 0.1–6 s (often past its TTLs).
fn schedule_pause(exec: &SimExecutor, world: &Arc<World>, client: usize, rng: &mut StdRng) -> bool {
    if !rng.random_bool(0.5) {
        return false;
    }
    let at = Duration::from_millis(rng.random_range(0..=5_000));
    let length = Duration::from_millis(rng.random_range(100..=6_000));
    let (exec2, world) = (exec.clone(), world.clone());
    exec.spawn_in(0, async move {
        exec2.clock().sleep(at).await;
        world.pauses.lock().unwrap().push((client, at, at + length));
        exec2.pause(client, at + length);
    });
    true
}

/// Invariant 1, after every poll.
fn check_holders(world: &World, service: &SimService, clock: &ManualClock) {
    let held = world.held.lock().unwrap().clone();
    let mut valid: BTreeSet<(String, String, u64)> = BTreeSet::new();
    for (client, handle) in held.iter().filter(|(_, h)| !h.is_lost()) {
        let key = handle.key().to_owned();
        let grant = (
            key.clone(),
            handle.session_id().to_owned(),
            handle.fencing_token(),
        );
        let actual = service.holder(&key);
        if actual != Some((grant.1.clone(), grant.2)) {
            world.violate(format!(
                "client {client} believes it holds {key} with token {} at {:?}, server holder is {actual:?}",
                grant.2,
                clock.now()
            ));
        }
        valid.insert(grant);
    }
    let keys: BTreeSet<&String> = valid.iter().map(|(k, _, _)| k).collect();
    if keys.len() < valid.len() {
        world.violate(format!("two holders at {:?}: {valid:?}", clock.now()));
    }
}

struct Worker {
    id: usize,
    client: LockClient,
    clock: ManualClock,
    scenario: Arc<Scenario>,
    world: Arc<World>,
    rng: StdRng,
}

impl Worker {
    async fn run(mut self) {
        let mut session: Option<LockClientSession> = None;
        for _ in 0..self.scenario.rounds {
            let think = Duration::from_millis(self.rng.random_range(0..=500));
            self.clock.sleep(think).await;
            if session.as_ref().is_none_or(LockClientSession::is_lost) {
                session = self.client.open_session().await.ok();
            }
            let Some(s) = session.clone() else { continue };
            if self.round(&s).await == Err(LockError::SessionLost) {
                session = None;
            }
        }
        if let Some(s) = session {
            let _ = s.close().await;
        }
        *self.world.lost.lock().unwrap() += self.client.session_lost_count();
        self.world.finished.fetch_add(1, Ordering::SeqCst);
    }

    async fn round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        let keys = &self.scenario.keys;
        let key = keys[self.rng.random_range(0..keys.len())].clone();
        let policy = self.scenario.policy;
        let start = self.clock.now();
        let result = s.acquire(&key, self.scenario.lock_ttl, &policy).await;
        let end = self.clock.now();
        self.world.acquires.fetch_add(1, Ordering::SeqCst);
        let allowed = policy.total_budget() + self.world.paused_between(self.id, start, end);
        if end - start > allowed {
            self.world.violate(format!(
                "client {} acquire of {key} took {:?}, budget {:?} (+ pauses)",
                self.id,
                end - start,
                policy.total_budget()
            ));
        }
        let Some(handle) = result? else {
            return Ok(());
        };
        self.world.grants.fetch_add(1, Ordering::SeqCst);
        self.world
            .held
            .lock()
            .unwrap()
            .push((self.id, handle.clone()));
        let ttl_ms = self.scenario.lock_ttl.as_millis() as u64;
        let hold = Duration::from_millis(self.rng.random_range(0..=ttl_ms * 2));
        self.clock.sleep(hold).await;
        self.world
            .held
            .lock()
            .unwrap()
            .retain(|(_, h)| !h.same_grant(&handle));
        s.release(&handle).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200 seeds with faults in the default suite (the 10,000-seed run is the `sim-faults`
    /// command); faults of every kind must actually be injected.
    #[test]
    fn seeds_with_faults_keep_every_invariant() {
        let mut total = FaultCounts::default();
        let mut grants = 0;
        for seed in 0..200 {
            let report = run_seed(seed).unwrap_or_else(|e| {
                panic!("replay with `cargo run -p lock-chaos --bin sim-faults -- --start {seed} --seeds 1`: {e}")
            });
            grants += report.grants;
            total.not_leader += report.faults.not_leader;
            total.dropped += report.faults.dropped;
            total.delayed += report.faults.delayed;
            total.pauses += report.faults.pauses;
        }
        assert!(grants > 200, "only {grants} grants");
        assert!(total.not_leader > 0 && total.dropped > 0, "{total:?}");
        assert!(total.delayed > 0 && total.pauses > 0, "{total:?}");
    }

    /// A seed replays exactly.
    #[test]
    fn a_seed_replays_exactly() {
        assert_eq!(run_seed(11), run_seed(11));
    }
}
