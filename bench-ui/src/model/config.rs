//! What an experiment is asked to do: the form's values, their defaults and their limits.
//!
//! Defaults are ASSUMPTIONS chosen so that a newcomer's first click gives an interesting
//! run in a few seconds: 20 sessions fight over one key twice each with 40 ms holds, so
//! about 40 grants are serialised behind each other and the backoff loop has real work.

use std::time::Duration;

use lock_api::limits::{SHARED_LIMIT_MAX, TTL_MILLIS_MAX, TTL_MILLIS_MIN, WAIT_MILLIS_MAX};
use lock_api::HoldKind;
use lock_lab::strategy::Strategy;
use lock_wasm::{ClientConfig, PolicySettings};
use serde::{Deserialize, Serialize};

/// Largest number of sessions in one run (the form accepts 1–200).
pub const MAX_SESSIONS: u32 = 200;

/// The SDK's acquire policy as the form edits it, with the experiment's own defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// First backoff ceiling, ms.
    pub base_millis: u64,
    /// Largest backoff ceiling, ms.
    pub cap_millis: u64,
    /// Total time one acquire may take, ms, fixed at entry.
    pub budget_millis: u64,
    /// Secondary cap on L4 calls per acquire.
    pub max_attempts: u32,
    /// How long each L4 waits in the server's queue, ms: used by the server-queue strategy
    /// only (the others send 0).
    #[serde(default = "default_wait_millis")]
    pub wait_millis: u64,
}

/// ASSUMPTION: 2 s per L4 — enough for a queue of a few dozen 40 ms holds to move on
/// without the request ending, well inside the default budget; a waiter whose wait ends
/// re-sends and keeps its place.
const DEFAULT_WAIT_MILLIS: u64 = 2_000;

fn default_wait_millis() -> u64 {
    DEFAULT_WAIT_MILLIS
}

impl Default for Policy {
    /// ASSUMPTION: smaller than the SDK's production defaults (50 ms / 2 s / 10 s / 12) so
    /// a run on one key finishes in seconds rather than minutes and most contenders get in.
    fn default() -> Self {
        Policy {
            base_millis: 10,
            cap_millis: 400,
            budget_millis: 8_000,
            max_attempts: 40,
            wait_millis: DEFAULT_WAIT_MILLIS,
        }
    }
}

impl Policy {
    /// The SDK's settings for these values under `strategy`: server-side waiting only for the
    /// server queue (`waitMillis` 0 otherwise: the backoff strategies are compared on
    /// client-side backoff alone).
    pub fn settings(&self, strategy: Strategy) -> PolicySettings {
        PolicySettings {
            total_budget: Duration::from_millis(self.budget_millis),
            base_backoff: Duration::from_millis(self.base_millis),
            max_backoff: Duration::from_millis(self.cap_millis),
            max_attempts: self.max_attempts,
            wait_millis: if strategy.queues() {
                self.wait_millis
            } else {
                0
            },
        }
    }
}

/// One experiment's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentConfig {
    /// Concurrent sessions, each one contender (1–200).
    pub sessions: u32,
    /// Distinct keys; session `i` uses key `i mod keys` (1–sessions).
    pub keys: u32,
    /// Acquisitions per session, one after the other (1–20).
    pub rounds: u32,
    /// How long a holder keeps the lock before releasing, ms.
    pub hold_millis: u64,
    /// Lock and session TTL, ms (the server's limits apply).
    pub ttl_millis: u64,
    /// Acquire policy.
    pub policy: Policy,
    /// Seeds every random choice of the run (the SDK's RNG and the experiment's).
    pub seed: u64,
    /// How often the L7 sampler reads each key, ms.
    pub sample_millis: u64,
    /// Backoff strategy under test.
    pub strategy: Strategy,
    /// Share of the contenders that are readers, in percent (0–100): they acquire shared,
    /// the others exclusive. 0, the default, is a run of exclusive holds only.
    #[serde(default)]
    pub reader_percent: u32,
    /// The readers' limit: with it their shared holds are a counting semaphore of this many
    /// permits per key; without it a read-write lock (any number of readers at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semaphore_limit: Option<u32>,
    /// Whether the run follows its keys' L8 event streams, which the holder timeline is
    /// drawn from (L7 samples stay as the fallback and cross-check). On by default; sweeps,
    /// which plot totals, leave it off so the server and the page's connections go to the
    /// contenders. A record from before L8 reads as off.
    #[serde(default)]
    pub watch_events: bool,
}

impl Default for ExperimentConfig {
    fn default() -> Self {
        ExperimentConfig {
            sessions: 20,
            keys: 1,
            rounds: 2,
            hold_millis: 40,
            ttl_millis: 3_000,
            policy: Policy::default(),
            seed: 42,
            sample_millis: 10,
            strategy: Strategy::FullJitter,
            reader_percent: 0,
            semaphore_limit: None,
            watch_events: true,
        }
    }
}

/// A field the form must fix before a run can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending field, in the form's naming (`"sessions"`, `"keys"`, ...).
    pub field: &'static str,
    /// What is wrong, for display next to the form.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// `value` of `field` within `low..=high`, else the error naming the field and the range.
pub(crate) fn check(
    field: &'static str,
    value: u64,
    low: u64,
    high: u64,
) -> Result<(), ConfigError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError {
            field,
            message: format!("must be between {low} and {high}, got {value}"),
        })
    }
}

/// The shortest TTL a run may use: it is also the lock TTL, and the SDK refuses a lock too
/// short for its renewal to be answered before its local deadline (400 ms by default).
pub(crate) fn shortest_ttl_millis() -> u64 {
    ClientConfig::default()
        .shortest_lock_ttl()
        .map_or(TTL_MILLIS_MIN, |ttl| ttl.as_millis() as u64)
        .max(TTL_MILLIS_MIN)
}

impl ExperimentConfig {
    /// Checks every field; the first problem found is returned so the form can point at it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("sessions", self.sessions.into(), 1, MAX_SESSIONS.into())?;
        check("keys", self.keys.into(), 1, self.sessions.into())?;
        check("rounds", self.rounds.into(), 1, 20)?;
        check("holdMillis", self.hold_millis, 0, 60_000)?;
        check(
            "ttlMillis",
            self.ttl_millis,
            shortest_ttl_millis(),
            TTL_MILLIS_MAX,
        )?;
        check("baseMillis", self.policy.base_millis, 1, 60_000)?;
        check(
            "capMillis",
            self.policy.cap_millis,
            self.policy.base_millis,
            60_000,
        )?;
        check("budgetMillis", self.policy.budget_millis, 1, 300_000)?;
        check("maxAttempts", self.policy.max_attempts.into(), 1, 1_000)?;
        if self.strategy.queues() {
            // The SDK needs each wait to fit in the budget, with room for a round trip.
            let below_budget = self.policy.budget_millis.saturating_sub(1);
            check(
                "waitMillis",
                self.policy.wait_millis,
                1,
                WAIT_MILLIS_MAX.min(below_budget),
            )?;
        }
        check("sampleMillis", self.sample_millis, 5, 10_000)?;
        self.validate_modes()
    }

    /// The mix of modes: a share of readers, the semaphore's permits, and a strategy that can
    /// ask for shared holds.
    fn validate_modes(&self) -> Result<(), ConfigError> {
        check("readerPercent", self.reader_percent.into(), 0, 100)?;
        if let Some(limit) = self.semaphore_limit {
            check("semaphoreLimit", limit.into(), 1, SHARED_LIMIT_MAX.into())?;
            if self.reader_percent == 0 {
                return Err(ConfigError {
                    field: "semaphoreLimit",
                    message: "limits the readers' shared holds: set a share of readers above 0 %"
                        .into(),
                });
            }
        }
        if self.reader_percent > 0 && !self.strategy.runs_in_sdk() {
            // The comparison loop (`lock_lab`) asks for exclusive holds only.
            return Err(ConfigError {
                field: "readerPercent",
                message: format!(
                    "readers take shared holds through the SDK's acquire: choose full jitter or \
                     the server queue, not {}",
                    self.strategy.label()
                ),
            });
        }
        Ok(())
    }

    /// Whether contender `index` is a reader. Readers are spread evenly over the contenders
    /// (and so over the keys): contender `i` is one when `⌊(i+1)·p/100⌋ > ⌊i·p/100⌋`, which
    /// makes `⌊sessions·p/100⌋` readers in all.
    pub fn is_reader(&self, index: u32) -> bool {
        let p = u64::from(self.reader_percent.min(100));
        let i = u64::from(index);
        (i + 1) * p / 100 > i * p / 100
    }

    /// What contender `index` asks for: shared (under the semaphore's limit, if any) for a
    /// reader, exclusive for the others.
    pub fn hold_kind(&self, index: u32) -> HoldKind {
        if self.is_reader(index) {
            HoldKind::Shared {
                limit: self.semaphore_limit,
            }
        } else {
            HoldKind::Exclusive
        }
    }

    /// How many of the contenders are readers.
    pub fn readers(&self) -> u32 {
        (0..self.sessions).filter(|&i| self.is_reader(i)).count() as u32
    }

    /// Index of the key session `session` contends for.
    pub fn key_index(&self, session: u32) -> u32 {
        session % self.keys.max(1)
    }

    /// The seed of contender `index`'s random draws: `seed · 1000003 + index`, so
    /// contenders differ and a run replays.
    pub fn contender_seed(&self, index: u32) -> u64 {
        self.seed.wrapping_mul(1_000_003).wrapping_add(index.into())
    }

    /// Total acquisitions the run will attempt: the denominator of the progress bar.
    pub fn planned_acquisitions(&self) -> u32 {
        self.sessions * self.rounds
    }
}

/// The key name of key `index` in run `run_id`. Every run gets fresh keys, so the ledger's
/// highest token from an earlier run never fences a new one out. The `/` is deliberate: it
/// exercises the percent-encoding of keys in paths.
pub fn key_name(run_id: &str, index: u32) -> String {
    format!("bench/{run_id}/k{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(ExperimentConfig::default().validate(), Ok(()));
    }

    #[test]
    fn out_of_range_fields_are_named() {
        let mut c = ExperimentConfig {
            sessions: 201,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "sessions");
        c.sessions = 5;
        c.keys = 6;
        assert_eq!(c.validate().unwrap_err().field, "keys");
        c.keys = 5;
        c.ttl_millis = 399;
        let err = c.validate().unwrap_err();
        assert_eq!(err.field, "ttlMillis", "the SDK refuses locks under 400 ms");
        c.ttl_millis = 400;
        assert_eq!(c.validate(), Ok(()));
        c.ttl_millis = 1_000;
        c.policy.cap_millis = 1;
        let err = c.validate().unwrap_err();
        assert_eq!(err.field, "capMillis");
        assert!(err.to_string().contains("between 10 and"), "{err}");
    }

    #[test]
    fn sessions_spread_over_keys() {
        let c = ExperimentConfig {
            sessions: 5,
            keys: 2,
            ..Default::default()
        };
        let keys: Vec<_> = (0..5).map(|s| c.key_index(s)).collect();
        assert_eq!(keys, [0, 1, 0, 1, 0]);
        assert_eq!(c.planned_acquisitions(), 10);
        assert_eq!(key_name("r1", 1), "bench/r1/k1");
    }

    #[test]
    fn readers_are_spread_evenly_and_ask_for_shared_holds() {
        let mut c = ExperimentConfig {
            sessions: 10,
            ..Default::default()
        };
        assert_eq!(
            c.readers(),
            0,
            "no readers by default: exclusive holds only"
        );
        assert_eq!(c.hold_kind(3), HoldKind::Exclusive);
        c.reader_percent = 80;
        let readers: Vec<u32> = (0..10).filter(|&i| c.is_reader(i)).collect();
        assert_eq!(readers, [1, 2, 3, 4, 6, 7, 8, 9]);
        assert_eq!(c.readers(), 8);
        assert_eq!(c.hold_kind(1), HoldKind::Shared { limit: None });
        assert_eq!(c.hold_kind(5), HoldKind::Exclusive);
        c.semaphore_limit = Some(3);
        assert_eq!(c.hold_kind(1), HoldKind::Shared { limit: Some(3) });
        c.reader_percent = 100;
        assert_eq!(c.readers(), 10);
        c.reader_percent = 50;
        c.sessions = 3;
        assert_eq!(c.readers(), 1);
    }

    #[test]
    fn the_mix_of_modes_is_validated() {
        let mut c = ExperimentConfig {
            reader_percent: 101,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "readerPercent");
        c.reader_percent = 80;
        assert_eq!(c.validate(), Ok(()));
        c.semaphore_limit = Some(0);
        assert_eq!(c.validate().unwrap_err().field, "semaphoreLimit");
        c.semaphore_limit = Some(SHARED_LIMIT_MAX + 1);
        assert_eq!(c.validate().unwrap_err().field, "semaphoreLimit");
        c.semaphore_limit = Some(3);
        assert_eq!(c.validate(), Ok(()));
        c.strategy = Strategy::ServerQueue;
        assert_eq!(c.validate(), Ok(()));
        c.strategy = Strategy::EqualJitter;
        let err = c.validate().unwrap_err();
        assert_eq!(
            err.field, "readerPercent",
            "the comparison loop is exclusive only"
        );
        assert!(err.message.contains("full jitter"), "{err}");
        c.strategy = Strategy::FullJitter;
        c.reader_percent = 0;
        let err = c.validate().unwrap_err();
        assert_eq!(
            err.field, "semaphoreLimit",
            "a limit without readers limits nothing"
        );
    }

    #[test]
    fn a_config_without_modes_reads_as_exclusive_only() {
        let mut json = serde_json::to_value(ExperimentConfig::default()).unwrap();
        let fields = json.as_object_mut().unwrap();
        assert!(!fields.contains_key("semaphoreLimit"));
        fields.remove("readerPercent");
        let back: ExperimentConfig = serde_json::from_value(json).unwrap();
        assert_eq!(back, ExperimentConfig::default());
    }
}
