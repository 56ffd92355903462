//! Sweep mode: Marc Brooker's backoff experiment against the live server, with the server
//! queue beside the backoff strategies. For each number of contenders N and each strategy, N
//! fresh sessions acquire one key once each; the sweep records the total L4 calls, the time
//! until the last one finished, the key's utilisation and the fairness figure.

use serde::{Deserialize, Serialize};

use super::config::{ExperimentConfig, Policy};
use super::counters::Counters;
use super::fairness::Fairness;
use super::record::RunRecord;
use lock_lab::strategy::Strategy;

/// What a sweep runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepConfig {
    /// Smallest N.
    pub from: u32,
    /// Largest N (inclusive).
    pub to: u32,
    /// Step between Ns.
    pub step: u32,
    /// Hold time of each contender's single grant, ms.
    pub hold_millis: u64,
    /// Acquire policy, the same for every strategy.
    pub policy: Policy,
    /// Seed of the first run; run `i` uses `seed + i` so runs differ but replay.
    pub seed: u64,
    /// Strategies compared.
    pub strategies: Vec<Strategy>,
}

impl Default for SweepConfig {
    /// ASSUMPTION: steps of 30 (N = 10, 40, 70, 100) and 5 ms holds. The policy is
    /// Brooker's and the native bench's (`bench sweep`): base 5 ms, cap 2 s, so the two
    /// sweeps compare point for point. The cap matters: with a cap far below N round trips
    /// (the run form's 400 ms), full jitter's windows stop growing while the contenders
    /// still queue, it retries twice as often as no jitter (its mean sleep is half the
    /// window), and the published ordering inverts. The budget (120 s) lets even no jitter
    /// finish, so its cost shows as calls, not give-ups; such a sweep takes minutes.
    fn default() -> Self {
        SweepConfig {
            from: 10,
            to: 100,
            step: 30,
            hold_millis: 5,
            policy: Policy {
                base_millis: 5,
                cap_millis: 2_000,
                budget_millis: 120_000,
                max_attempts: 1_000,
                ..Policy::default()
            },
            seed: 42,
            strategies: Strategy::ALL.to_vec(),
        }
    }
}

impl SweepConfig {
    /// The contender counts, ascending; always includes `from`, and `to` when reachable.
    pub fn contender_counts(&self) -> Vec<u32> {
        let step = self.step.max(1) as usize;
        (self.from.max(1)..=self.to.max(self.from).min(super::config::MAX_SESSIONS))
            .step_by(step)
            .collect()
    }

    /// Every (N, strategy) pair in run order: N outer, so the plot fills left to right.
    pub fn runs(&self) -> Vec<(u32, Strategy)> {
        self.contender_counts()
            .into_iter()
            .flat_map(|n| self.strategies.iter().map(move |s| (n, *s)))
            .collect()
    }

    /// The single experiment behind one point: N sessions, one key, one round each.
    pub fn experiment(
        &self,
        contenders: u32,
        strategy: Strategy,
        index: usize,
    ) -> ExperimentConfig {
        ExperimentConfig {
            sessions: contenders,
            keys: 1,
            rounds: 1,
            hold_millis: self.hold_millis,
            policy: self.policy,
            seed: self.seed.wrapping_add(index as u64),
            strategy,
            // Sweeps plot totals, not timelines: sample rarely to leave the server to the
            // contenders.
            sample_millis: 250,
            // The SDK's default session TTL, as the native sweep's SDK sessions have: a
            // session heartbeats every third of it, and at the form's 3 s fifty sessions'
            // heartbeats were a third of the page's requests, queued on the same main
            // thread as the contenders' answers.
            ttl_millis: lock_api::limits::DEFAULT_SESSION_TTL_MILLIS,
            // Brooker's experiment is about exclusive holds.
            reader_percent: 0,
            semaphore_limit: None,
            // Sweeps plot totals, not timelines: no event streams either.
            watch_events: false,
        }
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepPoint {
    /// Strategy.
    pub strategy: Strategy,
    /// Contenders N.
    pub contenders: u32,
    /// The run's counters.
    pub counters: Counters,
    /// Time until the last contender finished, ms.
    pub completion_millis: f64,
    /// Share of the run the key was held, from the client's holds (`model::fairness`).
    #[serde(default)]
    pub utilisation: Option<f64>,
    /// Max wait ÷ median wait (`model::fairness`).
    #[serde(default)]
    pub max_over_median: Option<f64>,
}

impl SweepPoint {
    /// The point a finished run gives.
    pub fn of(strategy: Strategy, contenders: u32, record: &RunRecord) -> SweepPoint {
        let fairness = Fairness::build(record);
        SweepPoint {
            strategy,
            contenders,
            counters: record.counters,
            completion_millis: record.completed_millis.unwrap_or_default(),
            utilisation: fairness.utilisation_client,
            max_over_median: fairness.max_over_median(),
        }
    }
}

/// A whole sweep, filled in as it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    /// What was asked.
    pub config: Option<SweepConfig>,
    /// Points finished so far, in run order.
    pub points: Vec<SweepPoint>,
    /// Why the sweep stopped early, if it did.
    pub error: Option<String>,
}

impl SweepResult {
    /// The points of one strategy, by ascending N: one line of a plot.
    pub fn series(&self, strategy: Strategy) -> Vec<&SweepPoint> {
        let mut points: Vec<_> = self
            .points
            .iter()
            .filter(|p| p.strategy == strategy)
            .collect();
        points.sort_by_key(|p| p.contenders);
        points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sweep_covers_ten_to_a_hundred() {
        let c = SweepConfig::default();
        assert_eq!(c.contender_counts(), [10, 40, 70, 100]);
        assert_eq!(c.runs().len(), 20);
        assert_eq!(c.runs()[1], (10, Strategy::NoJitter));
    }

    #[test]
    fn contender_counts_stay_in_the_session_limit() {
        let c = SweepConfig {
            from: 150,
            to: 500,
            step: 50,
            ..Default::default()
        };
        assert_eq!(c.contender_counts(), [150, 200]);
    }

    #[test]
    fn each_point_is_a_valid_single_round_experiment() {
        let c = SweepConfig::default();
        for (i, (n, s)) in c.runs().into_iter().enumerate() {
            let e = c.experiment(n, s, i);
            assert_eq!(e.validate(), Ok(()));
            assert_eq!((e.sessions, e.keys, e.rounds, e.strategy), (n, 1, 1, s));
            // The native sweep's SDK sessions' TTL, so both heartbeat alike.
            assert_eq!(e.ttl_millis, lock_api::limits::DEFAULT_SESSION_TTL_MILLIS);
        }
    }

    #[test]
    fn series_are_sorted_by_contenders() {
        let point = |n| SweepPoint {
            strategy: Strategy::NoJitter,
            contenders: n,
            counters: Counters::default(),
            completion_millis: 1.0,
            utilisation: None,
            max_over_median: None,
        };
        let r = SweepResult {
            points: vec![point(40), point(10)],
            ..Default::default()
        };
        let ns: Vec<_> = r
            .series(Strategy::NoJitter)
            .iter()
            .map(|p| p.contenders)
            .collect();
        assert_eq!(ns, [10, 40]);
        assert!(r.series(Strategy::FullJitter).is_empty());
    }
}
