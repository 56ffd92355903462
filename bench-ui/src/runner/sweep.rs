//! Sweep mode: one experiment per (N, strategy), in order, each point appended as it ends.

use std::sync::{Arc, Mutex};

use crate::model::sweep::{SweepConfig, SweepPoint, SweepResult};

use super::recorder::Recorder;
use super::{run_experiment, start_recorder, CancelFlag, Env};

/// What the UI watches during a sweep: the points so far and the run in progress.
#[derive(Clone, Default)]
pub struct SweepState {
    /// Points finished so far.
    pub result: Arc<Mutex<SweepResult>>,
    /// The run in progress, for its live counters.
    pub current: Arc<Mutex<Option<Recorder>>>,
}

impl SweepState {
    /// A copy of the result so far.
    pub fn snapshot(&self) -> SweepResult {
        self.result
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The run in progress, if any.
    pub fn current(&self) -> Option<Recorder> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Runs every point of `config`; stops at the first run that could not reach the server
/// (the rest would fail the same way) or when cancelled.
pub async fn run_sweep(
    env: &Env,
    config: &SweepConfig,
    run_id: &str,
    state: &SweepState,
    cancel: &CancelFlag,
) {
    *state.result.lock().unwrap_or_else(|e| e.into_inner()) = SweepResult {
        config: Some(config.clone()),
        ..Default::default()
    };
    for (i, (n, strategy)) in config.runs().into_iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let experiment = config.experiment(n, strategy, i);
        let recorder = start_recorder(env, &format!("{run_id}-{i}"), &experiment);
        *state.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder.clone());
        run_experiment(env, &recorder, cancel).await;
        let record = recorder.snapshot();
        let mut result = state.result.lock().unwrap_or_else(|e| e.into_inner());
        if record.counters.grants == 0 && record.error.is_some() {
            result.error = record.error;
            break;
        }
        result.points.push(SweepPoint::of(strategy, n, &record));
    }
}
