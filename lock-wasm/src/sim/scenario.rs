//! [`Scenario`]: the randomised shape of one run, drawn from its seed.

use std::time::Duration;

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
}

/// Salt of the stream the wait queue is drawn from, so the other draws of a seed are the
/// same with and without it.
const QUEUE_STREAM: u64 = 0x0051_7E0E;

impl Scenario {
    /// The scenario of `seed`: its shape from the run's stream `rng`, whether it queues from
    /// a stream of its own.
    pub(super) fn for_seed(seed: u64, rng: &mut StdRng, injection: Injection) -> Self {
        let mut scenario = Scenario::draw(rng, injection);
        scenario.maybe_queue(&mut StdRng::seed_from_u64(seed ^ QUEUE_STREAM));
        scenario
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
        Scenario {
            clients: rng.random_range(2..=if chaos { 6 } else { 5 }),
            keys: (0..rng.random_range(1..=2))
                .map(|i| format!("k{i}"))
                .collect(),
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
        }
    }
}
