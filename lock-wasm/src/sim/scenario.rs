//! [`Scenario`]: the randomised shape of one run, drawn from its seed, and [`KeyRole`]: how
//! its workers hold each key.

use std::time::Duration;

use lock_api::HoldKind;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::ClientConfig;
use crate::policy::{AcquirePolicy, PolicySettings};

use super::injection::Injection;
use super::network::Network;

/// The randomised shape of one run, drawn from the seed.
pub(super) struct Scenario {
    pub(super) clients: usize,
    pub(super) keys: Vec<String>,
    pub(super) rounds: usize,
    pub(super) lock_ttl: Duration,
    pub(super) policy: AcquirePolicy,
    pub(super) config: ClientConfig,
    pub(super) network: Network,
    /// Probability that a client process is paused once.
    pub(super) pause_chance: f64,
    /// Whether a round may nest a second acquire of its key.
    pub(super) nests: bool,
    /// Whether the run's clients also campaign in the election [`ELECTION`] (about half of
    /// their rounds), drawn from a stream of its own.
    pub(super) elects: bool,
    /// How each key of `keys` is held, by index.
    pub(super) roles: Vec<KeyRole>,
}

/// How the workers of a run hold one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyRole {
    /// Exclusively, every time (a mutex).
    Exclusive,
    /// A read-write lock: readers shared without a limit, writers exclusive.
    ReadWrite,
    /// A counting semaphore: shared under this many permits.
    Semaphore(u32),
}

/// Of a read-write key's acquires, the share that read (the rest write).
const READ_SHARE: f64 = 0.6;
/// In a run with shared keys, the share of rounds that take one of them: most, so readers,
/// writers and permits meet often enough to contend.
const SHARED_KEY_SHARE: f64 = 0.75;

impl KeyRole {
    /// The hold one acquire asks for, drawn from `rng` for a read-write key.
    pub(super) fn draw(self, rng: &mut StdRng) -> HoldKind {
        match self {
            KeyRole::Exclusive => HoldKind::Exclusive,
            KeyRole::ReadWrite if rng.random_bool(READ_SHARE) => HoldKind::Shared { limit: None },
            KeyRole::ReadWrite => HoldKind::Exclusive,
            KeyRole::Semaphore(permits) => HoldKind::Shared {
                limit: Some(permits),
            },
        }
    }
}

/// Salt of the stream the wait queue is drawn from, so the other draws of a seed are the
/// same with and without it.
const QUEUE_STREAM: u64 = 0x0051_7E0E;
/// Salt of the stream the shared keys are drawn from, for the same reason.
const SHARED_STREAM: u64 = 0x5AA2_ED00;
/// Salt of the stream that decides whether a run campaigns, for the same reason.
const ELECTION_STREAM: u64 = 0xE1EC_7100;
/// The key the campaigning clients elect a leader on.
pub(super) const ELECTION: &str = "leader";

impl Scenario {
    /// The scenario of `seed`: its shape from the run's stream `rng`, whether it queues from
    /// a stream of its own.
    pub(super) fn for_seed(seed: u64, rng: &mut StdRng, injection: Injection) -> Self {
        let mut scenario = Scenario::draw(rng, injection);
        scenario.maybe_queue(&mut StdRng::seed_from_u64(seed ^ QUEUE_STREAM));
        scenario.maybe_share(&mut StdRng::seed_from_u64(seed ^ SHARED_STREAM));
        scenario.elects = StdRng::seed_from_u64(seed ^ ELECTION_STREAM).random_bool(0.5);
        scenario
    }

    /// The index in `keys` of the key one round takes: a shared key (read-write or
    /// semaphore) drawn from `holds` most of the time in a run that has them, else one of the
    /// exclusive keys drawn from `rng` exactly as in a run without shared keys.
    pub(super) fn pick_key(&self, rng: &mut StdRng, holds: &mut StdRng) -> usize {
        let exclusive = self
            .roles
            .iter()
            .take_while(|r| **r == KeyRole::Exclusive)
            .count();
        let shared = self.keys.len() - exclusive;
        if shared > 0 && holds.random_bool(SHARED_KEY_SHARE) {
            exclusive + holds.random_range(0..shared)
        } else {
            rng.random_range(0..exclusive)
        }
    }

    /// With probability ½, the run's keys gain a read-write key `rw` and a semaphore `sem`
    /// of 1–3 permits (fewer than the clients most of the time, so its limit binds); the
    /// drawn keys stay exclusive.
    fn maybe_share(&mut self, rng: &mut StdRng) {
        if !rng.random_bool(0.5) {
            return;
        }
        self.keys.extend(["rw".to_owned(), "sem".to_owned()]);
        self.roles.push(KeyRole::ReadWrite);
        self.roles.push(KeyRole::Semaphore(rng.random_range(1..=3)));
    }

    /// With probability ½, every acquire of the run waits in the server's queue, for up to
    /// two thirds of its budget per L4.
    fn maybe_queue(&mut self, rng: &mut StdRng) {
        if !rng.random_bool(0.5) {
            return;
        }
        let settings = self.policy.settings();
        let budget = settings.total_budget.as_millis() as u64;
        self.policy = AcquirePolicy::new(PolicySettings {
            wait_millis: rng.random_range(50..=budget * 2 / 3),
            ..settings
        })
        .expect("a wait below the budget is valid");
    }

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
        let keys: Vec<String> = (0..rng.random_range(1..=2))
            .map(|i| format!("k{i}"))
            .collect();
        Scenario {
            clients: rng.random_range(2..=if chaos { 6 } else { 5 }),
            roles: vec![KeyRole::Exclusive; keys.len()],
            keys,
            rounds: rng.random_range(2..=if chaos { 8 } else { 6 }),
            lock_ttl: Duration::from_millis(rng.random_range(500..=3_000)),
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
            elects: false,
        }
    }
}
