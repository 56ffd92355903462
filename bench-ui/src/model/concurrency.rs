//! Concurrent holders over time, as L7 saw them: at each sampling instant, how many shared
//! and how many exclusive holders the run's keys had, and the most any one key had.
//!
//! The sampler reads every key of the run in one round and stamps the round's answers with
//! one time, so the samples of an instant are the ones with the same `at`. A read that
//! failed is missing from its round: that round counts the keys it has.

use lock_api::LockMode;
use serde::Serialize;

use super::record::{RunRecord, Sample};

/// One sampling instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyPoint {
    /// When, ms since start.
    pub at: f64,
    /// Shared holders over every key.
    pub shared: u32,
    /// Exclusive holders over every key (at most one per key).
    pub exclusive: u32,
    /// Most holders of one key, in either mode.
    pub busiest: u32,
}

/// The series the concurrency plot draws.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Concurrency {
    /// One point per sampling instant, in time order.
    pub points: Vec<ConcurrencyPoint>,
    /// The run's semaphore limit (per key), if it has one.
    pub limit: Option<u32>,
    /// The run's keys: with a limit, at most `limit · keys` shared holders at once.
    pub keys: u32,
}

impl Concurrency {
    /// Derives the series of a run.
    pub fn build(record: &RunRecord) -> Self {
        let mut samples: Vec<&Sample> = record.samples.iter().collect();
        samples.sort_by(|a, b| a.at.total_cmp(&b.at));
        let mut points: Vec<ConcurrencyPoint> = Vec::new();
        for sample in samples {
            let holders = u32::try_from(sample.holders.len()).unwrap_or(u32::MAX);
            let point = match points.last_mut() {
                Some(p) if p.at == sample.at => p,
                _ => {
                    points.push(ConcurrencyPoint {
                        at: sample.at,
                        shared: 0,
                        exclusive: 0,
                        busiest: 0,
                    });
                    points.last_mut().expect("just pushed")
                }
            };
            match sample.mode {
                Some(LockMode::Shared) => point.shared += holders,
                // Holders without a mode come from a server before shared holds: exclusive.
                Some(LockMode::Exclusive) | None => point.exclusive += holders,
            }
            point.busiest = point.busiest.max(holders);
        }
        Concurrency {
            points,
            limit: record.config.semaphore_limit,
            keys: record.config.keys,
        }
    }

    /// Most shared holders at one instant, over every key.
    pub fn peak_shared(&self) -> u32 {
        self.points.iter().map(|p| p.shared).max().unwrap_or(0)
    }

    /// Most holders of one key at one instant.
    pub fn peak_busiest(&self) -> u32 {
        self.points.iter().map(|p| p.busiest).max().unwrap_or(0)
    }

    /// Every permit of every key: the most shared holders the run may have at once.
    pub fn permits(&self) -> Option<u32> {
        self.limit
            .map(|limit| limit.saturating_mul(self.keys.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::ExperimentConfig;

    fn sample(at: f64, key: &str, mode: LockMode, holders: u64) -> Sample {
        Sample {
            at,
            key: key.into(),
            mode: (holders > 0).then_some(mode),
            holders: (0..holders).map(|t| (format!("h{t}"), t + 1)).collect(),
            limit: None,
            waiter_count: 0,
        }
    }

    #[test]
    fn each_instant_sums_its_keys_by_mode() {
        let mut r = RunRecord::new(
            "r",
            ExperimentConfig {
                keys: 2,
                semaphore_limit: Some(3),
                reader_percent: 50,
                ..Default::default()
            },
        );
        let (shared, exclusive) = (LockMode::Shared, LockMode::Exclusive);
        r.samples = vec![
            // Out of order on purpose: the series is in time order.
            sample(20.0, "a", exclusive, 1),
            sample(20.0, "b", shared, 3),
            sample(10.0, "a", shared, 2),
            sample(10.0, "b", shared, 1),
            sample(30.0, "a", shared, 0),
            // b's read of the 30 ms round failed: the round counts a alone.
        ];
        let c = Concurrency::build(&r);
        let points: Vec<(f64, u32, u32, u32)> = c
            .points
            .iter()
            .map(|p| (p.at, p.shared, p.exclusive, p.busiest))
            .collect();
        assert_eq!(points, [(10.0, 3, 0, 2), (20.0, 3, 1, 3), (30.0, 0, 0, 0)]);
        assert_eq!((c.peak_shared(), c.peak_busiest()), (3, 3));
        assert_eq!(c.permits(), Some(6), "3 permits on each of 2 keys");
    }

    #[test]
    fn holders_without_a_mode_count_as_exclusive_and_a_run_without_samples_is_empty() {
        let mut r = RunRecord::new("r", ExperimentConfig::default());
        let mut old = sample(5.0, "a", LockMode::Exclusive, 1);
        old.mode = None;
        r.samples = vec![old];
        let c = Concurrency::build(&r);
        assert_eq!(c.points[0].exclusive, 1);
        assert_eq!(c.permits(), None);
        let empty = Concurrency::build(&RunRecord::default());
        assert!(empty.points.is_empty());
        assert_eq!(empty.peak_shared(), 0);
    }
}
