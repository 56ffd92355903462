//! The writers' wait beside the readers': each acquisition's wait (asking to the grant's
//! arrival, as in [`super::fairness`]) split by the mode it was granted in, summarised and
//! binned on one scale so the two distributions compare bar by bar. Readers queued behind a
//! writer wait for it (no writer starvation), so a writer's wait should not grow without
//! bound however many readers there are.

use lock_api::LockMode;

use super::fairness::{quantile, wait};
use super::record::RunRecord;

/// Bins of the waits histogram (ASSUMPTION: 12, as the jitter histogram).
pub const BINS: usize = 12;

/// The waits of one mode's grants, ms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Waits {
    /// Grants in this mode.
    pub grants: usize,
    /// Median wait.
    pub p50: Option<f64>,
    /// 99th percentile (nearest rank).
    pub p99: Option<f64>,
    /// Longest wait.
    pub max: Option<f64>,
}

impl Waits {
    fn of(mut waits: Vec<f64>) -> Waits {
        waits.sort_by(f64::total_cmp);
        Waits {
            grants: waits.len(),
            p50: quantile(&waits, 0.5),
            p99: quantile(&waits, 0.99),
            max: waits.last().copied(),
        }
    }
}

/// Waits in `[low, high)` (the last bin includes its `high`), per mode.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitBin {
    /// Lower edge, ms.
    pub low: f64,
    /// Upper edge, ms.
    pub high: f64,
    /// Readers' (shared) grants that waited this long.
    pub readers: u32,
    /// Writers' (exclusive) grants that waited this long.
    pub writers: u32,
}

/// Readers' and writers' waits of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModeWaits {
    /// Shared grants.
    pub readers: Waits,
    /// Exclusive grants.
    pub writers: Waits,
    /// Both on one scale, from 0 to the longest wait; empty without a grant.
    pub bins: Vec<WaitBin>,
}

impl ModeWaits {
    /// Derives the waits of a run.
    pub fn build(record: &RunRecord) -> ModeWaits {
        let waits_in = |mode: LockMode| -> Vec<f64> {
            record
                .holds
                .iter()
                .filter(|h| h.mode == mode)
                .map(wait)
                .collect()
        };
        let (readers, writers) = (waits_in(LockMode::Shared), waits_in(LockMode::Exclusive));
        let bins = bin(&readers, &writers);
        ModeWaits {
            readers: Waits::of(readers),
            writers: Waits::of(writers),
            bins,
        }
    }
}

/// [`BINS`] equal bins from 0 to the longest wait (at least 1 ms wide in all).
fn bin(readers: &[f64], writers: &[f64]) -> Vec<WaitBin> {
    let Some(longest) = readers.iter().chain(writers).copied().reduce(f64::max) else {
        return Vec::new();
    };
    let width = longest.max(1.0) / BINS as f64;
    let mut bins: Vec<WaitBin> = (0..BINS)
        .map(|i| WaitBin {
            low: width * i as f64,
            high: width * (i + 1) as f64,
            readers: 0,
            writers: 0,
        })
        .collect();
    let index = |w: f64| ((w / width) as usize).min(BINS - 1);
    for w in readers {
        bins[index(*w)].readers += 1;
    }
    for w in writers {
        bins[index(*w)].writers += 1;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::Hold;

    fn hold(mode: LockMode, asked: f64, granted: f64) -> Hold {
        Hold {
            session: 0,
            key: "k".into(),
            fencing_token: 1,
            mode,
            limit: None,
            attempts: 1,
            asked_at: asked,
            granted_at: granted,
            released_at: None,
            ledger_accepted: true,
        }
    }

    #[test]
    fn readers_and_writers_are_summarised_apart_and_binned_together() {
        let (shared, exclusive) = (LockMode::Shared, LockMode::Exclusive);
        let r = RunRecord {
            holds: vec![
                hold(shared, 0.0, 0.0),
                hold(shared, 0.0, 10.0),
                hold(shared, 5.0, 25.0),
                hold(exclusive, 0.0, 60.0),
                hold(exclusive, 10.0, 130.0),
            ],
            ..Default::default()
        };
        let w = ModeWaits::build(&r);
        assert_eq!(w.readers.grants, 3);
        assert_eq!((w.readers.p50, w.readers.max), (Some(10.0), Some(20.0)));
        assert_eq!(w.writers.grants, 2);
        assert_eq!((w.writers.p50, w.writers.p99), (Some(60.0), Some(120.0)));
        // 12 bins of 10 ms up to the longest wait, 120 ms, which falls in the last one.
        assert_eq!(w.bins.len(), BINS);
        assert_eq!((w.bins[0].low, w.bins[0].high), (0.0, 10.0));
        let readers: Vec<u32> = w.bins.iter().map(|b| b.readers).collect();
        let writers: Vec<u32> = w.bins.iter().map(|b| b.writers).collect();
        assert_eq!(readers, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(writers, [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn a_run_of_exclusive_holds_has_no_readers() {
        let r = RunRecord {
            holds: vec![hold(LockMode::Exclusive, 0.0, 0.0)],
            ..Default::default()
        };
        let w = ModeWaits::build(&r);
        assert_eq!(w.readers, Waits::default());
        assert_eq!(w.writers.grants, 1);
        assert_eq!(w.bins.len(), BINS, "all waits 0: one scale of 1 ms");
        assert_eq!(w.bins[0].writers, 1);
        assert!(ModeWaits::build(&RunRecord::default()).bins.is_empty());
    }
}
