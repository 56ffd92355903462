//! The fault lab's scenarios, their settings and what became of a write, as the SDK's lab
//! simulation names them (`lock_wasm::sim::lab`): the page, the live run and the simulation
//! read the same scenario texts and default settings.

pub use lock_wasm::sim::lab::{LabScenario, LabSettings, WriteOutcome};
