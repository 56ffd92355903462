//! [`Setup`]: what a contender is set up with. Its own module, below the contender and the
//! two kinds of session it drives, which all read it.

use std::sync::Arc;
use std::time::Duration;

use lock_api::HoldKind;
use lock_wasm::{AcquirePolicy, SeededRngSource};

use crate::model::config::ExperimentConfig;

use super::recorder::Recorder;
use super::Env;

/// What a contender is set up with: the run's seams and record, the experiment, and the
/// contender's index.
pub struct Setup<'a> {
    /// The run's seams.
    pub env: &'a Env,
    /// The run's record.
    pub recorder: &'a Recorder,
    /// The experiment.
    pub config: &'a ExperimentConfig,
    /// Which contender, from 0.
    pub index: u32,
}

impl Setup<'_> {
    /// The SDK's acquire policy of the experiment.
    pub fn policy(&self) -> Result<AcquirePolicy, String> {
        AcquirePolicy::new(self.config.policy.settings(self.config.strategy))
            .map_err(|e| e.to_string())
    }

    /// The contender's random draws, seeded per contender so a run replays.
    pub fn rng(&self) -> Arc<SeededRngSource> {
        Arc::new(SeededRngSource::new(self.config.contender_seed(self.index)))
    }

    /// The owner label of the contender's session.
    pub fn owner(&self) -> String {
        format!("bench-ui s{}", self.index)
    }

    /// What the contender asks for: shared for a reader, exclusive for a writer.
    pub fn hold(&self) -> HoldKind {
        self.config.hold_kind(self.index)
    }

    /// The lock and session TTL.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.config.ttl_millis)
    }
}
