//! What an experiment is asked to do: the form's values, their defaults and their limits.
//!
//! Defaults are ASSUMPTIONS chosen so that a newcomer's first click gives an interesting
//! run in a few seconds: 20 sessions fight over one key twice each with 40 ms holds, so
//! about 40 grants are serialised behind each other and the backoff loop has real work.

use std::time::Duration;

use lock_api::limits::{TTL_MILLIS_MAX, TTL_MILLIS_MIN};
use lock_lab::strategy::Strategy;
use lock_wasm::PolicySettings;
use serde::{Deserialize, Serialize};

/// Largest number of sessions in one run (issue 5: 1–200).
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
        }
    }
}

impl Policy {
    /// The SDK's settings for these values. Server-side waiting stays off (`waitMillis` 0):
    /// the dashboard shows client-side backoff.
    pub fn settings(&self) -> PolicySettings {
        PolicySettings {
            total_budget: Duration::from_millis(self.budget_millis),
            base_backoff: Duration::from_millis(self.base_millis),
            max_backoff: Duration::from_millis(self.cap_millis),
            max_attempts: self.max_attempts,
            wait_millis: 0,
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

fn check(field: &'static str, value: u64, low: u64, high: u64) -> Result<(), ConfigError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError {
            field,
            message: format!("must be between {low} and {high}, got {value}"),
        })
    }
}

impl ExperimentConfig {
    /// Checks every field; the first problem found is returned so the form can point at it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("sessions", self.sessions.into(), 1, MAX_SESSIONS.into())?;
        check("keys", self.keys.into(), 1, self.sessions.into())?;
        check("rounds", self.rounds.into(), 1, 20)?;
        check("holdMillis", self.hold_millis, 0, 60_000)?;
        check("ttlMillis", self.ttl_millis, TTL_MILLIS_MIN, TTL_MILLIS_MAX)?;
        check("baseMillis", self.policy.base_millis, 1, 60_000)?;
        check(
            "capMillis",
            self.policy.cap_millis,
            self.policy.base_millis,
            60_000,
        )?;
        check("budgetMillis", self.policy.budget_millis, 1, 300_000)?;
        check("maxAttempts", self.policy.max_attempts.into(), 1, 1_000)?;
        check("sampleMillis", self.sample_millis, 5, 10_000)?;
        Ok(())
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
        c.ttl_millis = 10;
        assert_eq!(c.validate().unwrap_err().field, "ttlMillis");
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
}
