//! The fault lab's scenarios and their settings, as the SDK's lab simulation names them
//! (`lock_wasm::sim::lab`): the page, the live run and the simulation read the same values.
//!
//! TEMPORARY: a stand-in with the agreed names until `lock_wasm::sim::lab` is merged; then
//! this module only re-exports it.

/// One of the lab's five scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabScenario {
    GcPause,
    Partitioned,
    Crashed,
    OperatorRevoke,
    ShortPause,
}

/// What a user tunes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSettings {
    pub lock_ttl_ms: u64,
    pub session_ttl_ms: u64,
    pub fault_ms: u64,
    pub honours_signal: bool,
    pub seed: u64,
}

/// What became of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Accepted,
    FencedOut,
    Corrupted,
}

impl LabScenario {
    pub fn all() -> [LabScenario; 5] {
        [
            LabScenario::GcPause,
            LabScenario::Partitioned,
            LabScenario::Crashed,
            LabScenario::OperatorRevoke,
            LabScenario::ShortPause,
        ]
    }
    pub fn slug(self) -> &'static str {
        match self {
            LabScenario::GcPause => "gc-pause",
            LabScenario::Partitioned => "partitioned",
            LabScenario::Crashed => "crashed",
            LabScenario::OperatorRevoke => "revoke",
            LabScenario::ShortPause => "short-pause",
        }
    }
    pub fn from_slug(slug: &str) -> Option<LabScenario> {
        LabScenario::all().into_iter().find(|s| s.slug() == slug)
    }
    pub fn title(self) -> &'static str {
        self.slug()
    }
    pub fn explanation(self) -> &'static str {
        self.slug()
    }
    pub fn default_settings(self) -> LabSettings {
        LabSettings {
            lock_ttl_ms: 1_000,
            session_ttl_ms: 2_000,
            fault_ms: if self == LabScenario::ShortPause {
                100
            } else {
                2_500
            },
            honours_signal: false,
            seed: 42,
        }
    }
}
