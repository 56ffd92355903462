//! The seeded deterministic simulation (base of card T-043): many clients with the real SDK
//! core, a modelled lock-server ([`service::SimService`]) behind a lossy network with seeded
//! delays, client process pauses (SIGSTOP-like), all on one [`ManualClock`] driven by
//! [`executor::SimExecutor`]. One seed fixes everything, so a failing seed replays exactly.
//!
//! Invariants checked after every task poll:
//! 1. never two holders: at most one valid (not lost) handle per key across all clients, and
//!    every valid handle is the server's live holder with the same token;
//! 2. every acquire terminates within its budget (plus the time its client was paused);
//! 3. no call names a session after its client declared it lost.
//!
//! Run any number of seeds: `cargo run -p lock-wasm --example simulate -- --seeds 10000`;
//! replay one with its calls traced: `SIM_TRACE=1 cargo run -p lock-wasm --example simulate
//! -- --seeds 1 --start SEED`.
//!
//! [`Injection::Chaos`] runs the same harness with injected infrastructure faults (503
//! bursts, dropped answers, delay spikes, frequent pauses; see [`injection`]): the
//! `sim-faults` command of lock-chaos.
//!
//! Layout: [`executor`] (the deterministic executor), [`service`] (the modelled server, its
//! lossy network and the lost-session check), [`injection`] (the fault-injecting transport);
//! here, the scenario drawn from a seed, the invariants and the seed runners.

pub mod executor;
pub mod injection;
pub mod service;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::backoff::SeededRngSource;
use crate::clock::{Clock, ManualClock};
use crate::error::LockError;
use crate::events::{ClientEvent, EventSink};
use crate::handle::LockHandle;
use crate::policy::{AcquirePolicy, PolicySettings};
use crate::session::{ClientConfig, LockClient, LockClientSession};
use crate::transport::Transport;

pub use executor::{run, run_with, SimExecutor};
pub use injection::{FaultCounts, FaultPlan, FaultyTransport, Injection};
pub use service::{Faults, LostSessions, Network, SimService, SimTransport};

/// What one seed did (for the seed runners' summaries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Simulated client processes.
    pub clients: usize,
    /// Acquire calls made.
    pub acquires: usize,
    /// Grants (fresh or nested).
    pub grants: usize,
    /// Sessions declared lost.
    pub sessions_lost: u64,
    /// Simulated time at the end.
    pub sim_time: Duration,
    /// Faults injected ([`Injection::Chaos`]; zero otherwise) and client pauses scheduled.
    pub faults: FaultCounts,
}

/// Shared bookkeeping of one run.
#[derive(Default)]
struct World {
    /// Handles currently held by some client: (client, handle).
    held: Mutex<Vec<(usize, LockHandle)>>,
    violations: Mutex<Vec<String>>,
    /// Pause intervals per client: (start, end).
    pauses: Mutex<Vec<(usize, Duration, Duration)>>,
    acquires: AtomicUsize,
    grants: AtomicUsize,
    finished: AtomicUsize,
    /// Sessions the finished clients declared lost.
    sessions_lost: Mutex<u64>,
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

/// Records the sessions a client declares lost, for invariant 3.
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

/// The randomised shape of one run, drawn from the seed.
struct Scenario {
    clients: usize,
    keys: Vec<String>,
    rounds: usize,
    lock_ttl: Duration,
    policy: AcquirePolicy,
    config: ClientConfig,
    network: Network,
    /// Probability that a client process is paused once.
    pause_chance: f64,
    /// Whether a round may nest a second acquire of its key.
    nests: bool,
}

impl Scenario {
    /// Draws a scenario. The fault run draws more clients and rounds, always some network
    /// loss (but less), and more pauses, and does not nest acquires; every draw stays in the
    /// order each run had before the two were one harness, so seeds replay as they did.
    fn draw(rng: &mut StdRng, injection: Injection) -> Self {
        let chaos = injection == Injection::Chaos;
        let base = rng.random_range(5..=50);
        let settings = PolicySettings {
            total_budget: Duration::from_millis(rng.random_range(300..=3_000)),
            base_backoff: Duration::from_millis(base),
            max_backoff: Duration::from_millis(rng.random_range(base..=800)),
            max_attempts: rng.random_range(2..=12),
            wait_millis: 0,
        };
        Scenario {
            clients: rng.random_range(2..=if chaos { 6 } else { 5 }),
            keys: (0..rng.random_range(1..=2))
                .map(|i| format!("k{i}"))
                .collect(),
            rounds: rng.random_range(2..=if chaos { 8 } else { 6 }),
            lock_ttl: Duration::from_millis(rng.random_range(800..=3_000)),
            policy: AcquirePolicy::new(settings).expect("drawn policies are valid"),
            config: ClientConfig {
                session_ttl: Some(Duration::from_millis(rng.random_range(1_200..=4_000))),
                request_timeout: Duration::from_millis(rng.random_range(100..=500)),
                backend: "sim".into(),
                ..ClientConfig::default()
            },
            network: Network {
                delay_millis: (rng.random_range(0..=5), rng.random_range(5..=60)),
                loss: if chaos {
                    rng.random_range(0.0..0.03)
                } else if rng.random_bool(0.5) {
                    rng.random_range(0.0..0.05)
                } else {
                    0.0
                },
            },
            pause_chance: if chaos { 0.5 } else { 0.3 },
            nests: !chaos,
        }
    }
}

/// Runs one seed of the base simulation (no injected faults, `faults` planted in the
/// server); `Err` names the first violated invariant.
pub fn run_seed(seed: u64, faults: Faults) -> Result<SimReport, String> {
    run_seed_with(seed, faults, Injection::None)
}

/// Runs one seed with `faults` planted in the server and `injection` in front of the
/// network; `Err` names the first violated invariant.
pub fn run_seed_with(seed: u64, faults: Faults, injection: Injection) -> Result<SimReport, String> {
    let mut rng = StdRng::seed_from_u64(match injection {
        Injection::None => seed,
        // A different stream from the base simulation's, so the two cover different runs.
        Injection::Chaos => seed ^ 0xC4A0_5EED,
    });
    let scenario = Arc::new(Scenario::draw(&mut rng, injection));
    let plan = (injection == Injection::Chaos).then(|| FaultPlan::draw(&mut rng));
    let clock = ManualClock::new();
    let exec = SimExecutor::new(clock.clone());
    let service = SimService::new(clock.clone(), faults);
    let network = SimTransport::new(service.clone(), scenario.network, rng.random());
    let faulty =
        plan.map(|plan| FaultyTransport::new(network.clone(), clock.clone(), plan, rng.random()));
    // With injected delays, "no call after a lost session" must be checked at send time, in
    // front of the delays: by the faulty transport rather than the network.
    let (transport, lost): (Arc<dyn Transport>, _) = match &faulty {
        Some(f) => (Arc::new(f.clone()), f.lost_sessions()),
        None => (Arc::new(network.clone()), network.lost_sessions()),
    };
    let world = Arc::new(World::default());
    let violations = || {
        let mut all = world.violations.lock().unwrap().clone();
        all.extend(network.violations());
        all.extend(faulty.iter().flat_map(FaultyTransport::violations));
        all
    };

    let mut pauses = 0;
    for client in 1..=scenario.clients {
        pauses += usize::from(schedule_pause(
            &exec,
            &world,
            client,
            scenario.pause_chance,
            &mut rng,
        ));
        let lock_client = LockClient::new(
            transport.clone(),
            Arc::new(clock.clone()),
            exec.spawner(client),
            Arc::new(SeededRngSource::new(rng.random())),
        )
        .with_config(scenario.config.clone())
        .with_events(Arc::new(LostRecorder { lost: lost.clone() }));
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

    let done =
        || world.finished.load(Ordering::SeqCst) == scenario.clients || !violations().is_empty();
    let step = || check_holders(&world, &service, &clock);
    exec.run_until(Duration::from_secs(3_600), done, step)
        .map_err(|e| format!("seed {seed}: {e}"))?;

    if let Some(first) = violations().first() {
        return Err(format!("seed {seed}: {first}"));
    }
    let mut injected = faulty
        .as_ref()
        .map(FaultyTransport::counts)
        .unwrap_or_default();
    injected.pauses = pauses;
    let sessions_lost = *world.sessions_lost.lock().unwrap();
    Ok(SimReport {
        seed,
        clients: scenario.clients,
        acquires: world.acquires.load(Ordering::SeqCst),
        grants: world.grants.load(Ordering::SeqCst),
        sessions_lost,
        sim_time: clock.now(),
        faults: injected,
    })
}

/// Totals of [`run_seeds`] over consecutive seeds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimTotals {
    /// Acquire calls of the passing seeds.
    pub acquires: usize,
    /// Grants of the passing seeds.
    pub grants: usize,
    /// Sessions lost in the passing seeds.
    pub sessions_lost: u64,
    /// Faults injected and pauses scheduled in the passing seeds.
    pub faults: FaultCounts,
    /// The failing seeds, in order.
    pub failed: Vec<u64>,
}

/// Runs `seeds` (the simulate example's and the `sim-faults` command's loop). Each failure
/// goes to `on_failure` with its message; it returns whether to go on with the next seed.
pub fn run_seeds(
    seeds: std::ops::Range<u64>,
    faults: Faults,
    injection: Injection,
    mut on_failure: impl FnMut(&str) -> bool,
) -> SimTotals {
    let mut totals = SimTotals::default();
    for seed in seeds {
        match run_seed_with(seed, faults, injection) {
            Ok(report) => {
                totals.acquires += report.acquires;
                totals.grants += report.grants;
                totals.sessions_lost += report.sessions_lost;
                totals.faults += report.faults;
            }
            Err(e) => {
                totals.failed.push(seed);
                if !on_failure(&e) {
                    break;
                }
            }
        }
    }
    totals
}

/// With probability `chance`, pauses the client once for 0.1–6 s (sometimes past its
/// session TTL). Returns whether it did.
fn schedule_pause(
    exec: &SimExecutor,
    world: &Arc<World>,
    client: usize,
    chance: f64,
    rng: &mut StdRng,
) -> bool {
    if !rng.random_bool(chance) {
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

/// Invariant 1, checked after every poll.
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
        valid.insert(grant.clone());
        let actual = service.holder(&key);
        if actual != Some((grant.1.clone(), grant.2)) {
            world.violate(format!(
                "client {client} believes it holds {key} with token {} at {:?}, server holder is {actual:?}",
                grant.2,
                clock.now()
            ));
        }
    }
    let keys: BTreeSet<&String> = valid.iter().map(|(k, _, _)| k).collect();
    if keys.len() < valid.len() {
        world.violate(format!("two holders at {:?}: {valid:?}", clock.now()));
    }
}

/// One simulated client process.
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
            if session.as_ref().is_none_or(|s| s.is_lost()) {
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
        *self.world.sessions_lost.lock().unwrap() += self.client.session_lost_count();
        self.world.finished.fetch_add(1, Ordering::SeqCst);
    }

    /// One acquire → hold (maybe nested) → release cycle.
    async fn round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        let keys = &self.scenario.keys;
        let key = keys[self.rng.random_range(0..keys.len())].clone();
        let Some(handle) = self.timed_acquire(s, &key).await? else {
            return Ok(());
        };
        self.world
            .held
            .lock()
            .unwrap()
            .push((self.id, handle.clone()));
        // Not drawn at all when the scenario does not nest, so the seed's stream is unchanged.
        let nested = self.scenario.nests && self.rng.random_bool(0.2);
        if nested {
            if let Ok(Some(inner)) = self.timed_acquire(s, &key).await {
                if inner.fencing_token() != handle.fencing_token() {
                    self.world
                        .violate(format!("nested acquire of {key} changed the token"));
                }
            }
        }
        let ttl_ms = self.scenario.lock_ttl.as_millis() as u64;
        let hold = Duration::from_millis(self.rng.random_range(0..=ttl_ms * 2));
        self.clock.sleep(hold).await;
        if nested {
            let _ = s.release(&handle).await;
        }
        self.world
            .held
            .lock()
            .unwrap()
            .retain(|(_, h)| !h.same_grant(&handle));
        s.release(&handle).await.map(|_| ())
    }

    /// An acquire with invariant 2 checked on its duration.
    async fn timed_acquire(
        &mut self,
        s: &LockClientSession,
        key: &str,
    ) -> Result<Option<LockHandle>, LockError> {
        let policy = self.scenario.policy;
        let start = self.clock.now();
        let result = s.acquire(key, self.scenario.lock_ttl, &policy).await;
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
        if matches!(result, Ok(Some(_))) {
            self.world.grants.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simulation's 1,000 seeds: every invariant holds. Prints the failing seed.
    #[test]
    fn a_thousand_seeds_keep_every_invariant() {
        let mut totals = SimReport::default();
        for seed in 0..1_000 {
            match run_seed(seed, Faults::default()) {
                Ok(report) => {
                    totals.acquires += report.acquires;
                    totals.grants += report.grants;
                    totals.sessions_lost += report.sessions_lost;
                }
                Err(e) => panic!("simulation failed, replay with `cargo run -p lock-wasm --example simulate -- --seeds 1 --start {seed}`: {e}"),
            }
        }
        println!(
            "1000 seeds: {} acquires, {} grants, {} sessions lost",
            totals.acquires, totals.grants, totals.sessions_lost
        );
        assert!(
            totals.grants > 1_000,
            "the simulation must actually grant locks"
        );
        assert!(
            totals.sessions_lost > 0,
            "pauses must exercise the lost-session path"
        );
    }

    /// The invariants can fail: a server that double-grants is caught.
    #[test]
    fn a_double_granting_server_is_caught() {
        let faults = Faults {
            double_grant: true,
            ..Faults::default()
        };
        let caught: Vec<String> = (0..50)
            .filter_map(|seed| run_seed(seed, faults).err())
            .collect();
        println!(
            "double grant caught in {}/50 seeds, e.g. {:?}",
            caught.len(),
            caught.first()
        );
        assert!(caught.len() > 25, "caught only {} of 50", caught.len());
        assert!(caught
            .iter()
            .any(|e| e.contains("two holders") || e.contains("server holder")));
    }

    /// The invariants catch a client whose deadlines are wrong too: here the server's
    /// clock runs twice as fast, so the client's deadlines outlive the server's leases.
    #[test]
    fn deadlines_beyond_the_server_lease_are_caught() {
        let faults = Faults {
            fast_expiry: true,
            ..Faults::default()
        };
        let caught: Vec<String> = (0..50)
            .filter_map(|seed| run_seed(seed, faults).err())
            .collect();
        println!(
            "fast expiry caught in {}/50 seeds, e.g. {:?}",
            caught.len(),
            caught.first()
        );
        assert!(caught.len() >= 10, "caught only {} of 50", caught.len());
        assert!(caught.iter().all(|e| e.contains("server holder")));
    }

    /// A seed replays exactly.
    #[test]
    fn a_seed_replays_exactly() {
        assert_eq!(
            run_seed(7, Faults::default()),
            run_seed(7, Faults::default())
        );
    }

    /// 200 seeds with injected faults in the default suite (the 10,000-seed run is the
    /// `sim-faults` command of lock-chaos); faults of every kind must actually be injected.
    #[test]
    fn seeds_with_injected_faults_keep_every_invariant() {
        let totals = run_seeds(0..200, Faults::default(), Injection::Chaos, |e| {
            panic!("replay with `cargo run -p lock-chaos --bin sim-faults -- --start SEED --seeds 1`: {e}")
        });
        let (grants, faults) = (totals.grants, totals.faults);
        assert!(grants > 200, "only {grants} grants");
        assert!(faults.not_leader > 0 && faults.dropped > 0, "{faults:?}");
        assert!(faults.delayed > 0 && faults.pauses > 0, "{faults:?}");
    }

    /// A seed with injected faults replays exactly.
    #[test]
    fn a_seed_with_injected_faults_replays_exactly() {
        let run = || run_seed_with(11, Faults::default(), Injection::Chaos);
        assert_eq!(run(), run());
    }
}
