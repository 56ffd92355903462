//! The simulated outcome of a lab form: the SDK's seeded simulation of the same scenario
//! and settings (`lock_wasm::sim::lab::run_lab`), summed up for the column beside the live
//! run's.

use serde::{Deserialize, Serialize};

use super::lab_form::LabForm;

/// What the simulation found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulatedOutcome {
    /// Stale writes the fenced ledger refused.
    pub fenced_out: u32,
    /// Stale writes the unfenced ledger took.
    pub corrupted: u32,
    /// When A's handle was reported lost, ms (simulated time).
    pub lost_at_ms: Option<u64>,
    /// When A's lease ended on the server, ms.
    pub lease_end_ms: Option<u64>,
}

impl SimulatedOutcome {
    /// One line for the page.
    pub fn describe(&self) -> String {
        let at = |t: Option<u64>| t.map_or("never".to_string(), |t| format!("{t} ms"));
        format!(
            "fenced out {}, corrupted {}; A's lease ended {}, A lost {}",
            self.fenced_out,
            self.corrupted,
            at(self.lease_end_ms),
            at(self.lost_at_ms)
        )
    }
}

/// The simulation of `form` (deterministic for its seed; moments of CPU).
pub fn simulate(form: &LabForm) -> SimulatedOutcome {
    let outcome = lock_wasm::sim::lab::run_lab(form.scenario, &form.settings());
    SimulatedOutcome {
        fenced_out: outcome.fenced_out,
        corrupted: outcome.corrupted,
        lost_at_ms: outcome.lost_at_ms,
        lease_end_ms: outcome.lease_end_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lab_scenario::LabScenario;

    #[test]
    fn the_simulation_fences_out_a_gc_pause_and_loses_nothing_in_the_control() {
        let gc = simulate(&LabForm::of(LabScenario::GcPause));
        assert!(gc.fenced_out >= 1 && gc.corrupted >= 1, "{gc:?}");
        assert!(
            gc.describe().starts_with("fenced out 1, corrupted 1"),
            "{}",
            gc.describe()
        );
        let control = simulate(&LabForm::of(LabScenario::ShortPause));
        assert_eq!(
            (control.fenced_out, control.corrupted),
            (0, 0),
            "{control:?}"
        );
    }
}
