//! The shapes the holder timeline draws, whatever its source: a hold's bar and the holds at
//! once that must not have been. Their own module, so that the stream's and the samples'
//! builders (`event_bars`, `coverage`, `timeline`) share them without importing each other.

use lock_api::LockMode;
use serde::Serialize;

/// One hold, as the timeline's source saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bar {
    /// Lane: the contender index, `None` for a holder outside this run.
    pub session: Option<u32>,
    /// Key name.
    pub key: String,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// How the key was held while this bar was seen.
    pub mode: LockMode,
    /// The shared holders' limit, when the key had one.
    pub limit: Option<u32>,
    /// Its grant (stream) or first sample showing it, ms since start.
    pub start: f64,
    /// Its end (stream; the end of the stream while still open) or last sample showing it,
    /// ms since start.
    pub end: f64,
}

/// The rule a [`Overlap`] broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Breach {
    /// An exclusive hold beside another hold of its key.
    Exclusive,
    /// More shared holds of a key at once than its limit.
    OverLimit {
        /// The key's limit.
        limit: u32,
    },
}

/// Holds of one key at once that must not have been.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlap {
    /// Key name.
    pub key: String,
    /// Start of the interval, ms.
    pub start: f64,
    /// End of the interval, ms.
    pub end: f64,
    /// The tokens held at once, ascending: two for [`Breach::Exclusive`], one more than the
    /// limit (or more) for [`Breach::OverLimit`].
    pub tokens: Vec<u64>,
    /// Which rule it broke.
    pub breach: Breach,
}
