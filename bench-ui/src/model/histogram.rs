//! The jitter histogram: how long the contenders actually slept between attempts, against
//! what full jitter's uniform distribution predicts for the same attempts.
//!
//! The expectation is computed per sleep: a sleep at attempt `a` would, under full jitter,
//! be uniform on `[0, ceiling(a)]`, so it contributes to each bin the fraction of that
//! interval the bin covers. Summed over the sleeps this is exact for one attempt number and
//! for a mix of them, and it is the same reference line whichever strategy ran, which is
//! what makes the strategies comparable at a glance.

use serde::Serialize;

use super::record::Sleep;

/// Bins of the histogram.
pub const BINS: usize = 12;

/// One bin: `[low, high)` in ms (the last bin is closed).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bin {
    /// Lower edge, ms.
    pub low: f64,
    /// Upper edge, ms.
    pub high: f64,
    /// Sleeps that fell into it.
    pub count: u32,
    /// Sleeps full jitter would put into it, on average.
    pub expected: f64,
}

/// A histogram of sleeps for one attempt number (or all of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JitterHistogram {
    /// The attempt number shown, or `None` for every attempt.
    pub attempt: Option<u32>,
    /// The bins, lowest first; empty when there was no sleep.
    pub bins: Vec<Bin>,
    /// Sleeps counted.
    pub total: u32,
}

impl JitterHistogram {
    /// Builds the histogram of `sleeps` at `attempt` (all attempts when `None`).
    pub fn build(sleeps: &[Sleep], attempt: Option<u32>) -> Self {
        let chosen: Vec<&Sleep> = sleeps
            .iter()
            .filter(|s| attempt.is_none_or(|a| s.attempt == a))
            .collect();
        let top = chosen
            .iter()
            .map(|s| s.ceiling_millis.max(s.delay_millis))
            .max()
            .unwrap_or(0) as f64;
        if chosen.is_empty() || top <= 0.0 {
            return JitterHistogram {
                attempt,
                bins: Vec::new(),
                total: chosen.len() as u32,
            };
        }
        let width = top / BINS as f64;
        let mut bins: Vec<Bin> = (0..BINS)
            .map(|i| Bin {
                low: i as f64 * width,
                high: (i + 1) as f64 * width,
                count: 0,
                expected: 0.0,
            })
            .collect();
        for sleep in &chosen {
            let index = ((sleep.delay_millis as f64 / width) as usize).min(BINS - 1);
            bins[index].count += 1;
            add_uniform_expectation(&mut bins, sleep.ceiling_millis as f64);
        }
        JitterHistogram {
            attempt,
            bins,
            total: chosen.len() as u32,
        }
    }

    /// The attempt numbers present in `sleeps`, ascending, for the attempt selector.
    pub fn attempts(sleeps: &[Sleep]) -> Vec<u32> {
        let mut attempts: Vec<u32> = sleeps.iter().map(|s| s.attempt).collect();
        attempts.sort_unstable();
        attempts.dedup();
        attempts
    }

    /// The tallest bar or expectation, for the y axis.
    pub fn peak(&self) -> f64 {
        self.bins
            .iter()
            .map(|b| f64::from(b.count).max(b.expected))
            .fold(0.0, f64::max)
    }
}

/// Adds one uniform-on-`[0, ceiling]` sample's expected share to every bin.
fn add_uniform_expectation(bins: &mut [Bin], ceiling: f64) {
    if ceiling <= 0.0 {
        // A zero ceiling means "retry at once": the whole mass sits in the first bin.
        bins[0].expected += 1.0;
        return;
    }
    for bin in bins.iter_mut() {
        let overlap = (bin.high.min(ceiling) - bin.low.max(0.0)).max(0.0);
        bin.expected += overlap / ceiling;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleep(attempt: u32, delay: u64, ceiling: u64) -> Sleep {
        Sleep {
            session: 0,
            attempt,
            delay_millis: delay,
            ceiling_millis: ceiling,
        }
    }

    #[test]
    fn no_sleeps_give_no_bins() {
        let h = JitterHistogram::build(&[], None);
        assert!(h.bins.is_empty());
        assert_eq!(h.total, 0);
        assert_eq!(h.peak(), 0.0);
    }

    #[test]
    fn counts_land_in_the_right_bins_and_expectation_sums_to_total() {
        let sleeps = [
            sleep(0, 0, 120),
            sleep(0, 119, 120),
            sleep(0, 120, 120),
            sleep(0, 55, 120),
        ];
        let h = JitterHistogram::build(&sleeps, Some(0));
        assert_eq!(h.bins.len(), BINS);
        assert_eq!(h.bins[0].count, 1);
        assert_eq!(
            h.bins[BINS - 1].count,
            2,
            "the top edge belongs to the last bin"
        );
        assert_eq!(h.bins[5].count, 1);
        let expected: f64 = h.bins.iter().map(|b| b.expected).sum();
        assert!((expected - 4.0).abs() < 1e-9, "{expected}");
        // Uniform over the whole range: every bin expects the same share.
        assert!(h
            .bins
            .iter()
            .all(|b| (b.expected - 4.0 / 12.0).abs() < 1e-9));
    }

    #[test]
    fn mixed_attempts_weight_the_low_bins() {
        let sleeps = [sleep(0, 5, 10), sleep(3, 70, 80)];
        let all = JitterHistogram::build(&sleeps, None);
        assert_eq!(all.total, 2);
        assert!(all.bins[0].expected > all.bins[BINS - 1].expected);
        let only_third = JitterHistogram::build(&sleeps, Some(3));
        assert_eq!(only_third.total, 1);
        assert_eq!(JitterHistogram::attempts(&sleeps), [0, 3]);
    }
}
