//! Small statistics over measured samples: mean, percentiles, and run-to-run spread.

/// `p`-quantile (0.0…1.0) of `sorted` by nearest rank on `(len − 1) · p`; `None` if empty.
pub fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p.clamp(0.0, 1.0)).round() as usize;
    Some(sorted[i])
}

/// Arithmetic mean; 0 for no samples (a table cell, never a divisor).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Median, min and max of repeated runs of one figure: the run-to-run spread we report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median of the runs (the figure a table shows).
    pub median: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
}

impl Spread {
    /// The spread of `runs`; all zeros for none.
    pub fn of(runs: &[f64]) -> Spread {
        let mut sorted = runs.to_vec();
        sorted.sort_by(f64::total_cmp);
        // True median: the mean of the middle two for an even count (nearest rank would
        // report the larger of two rounds as their "median").
        let mid = sorted.len() / 2;
        let median = match sorted.len() {
            0 => 0.0,
            n if n % 2 == 0 => (sorted[mid - 1] + sorted[mid]) / 2.0,
            _ => sorted[mid],
        };
        Spread {
            median,
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }

    /// `median (min–max)` with `decimals` places.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}–{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }
}

/// `a / b` as a table cell (`–` when `b` is zero).
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "–".into()
    } else {
        format!("{:.2}×", a / b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(51.0));
        assert_eq!(quantile(&v, 0.99), Some(100.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(101.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn spread_is_median_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(s.show(1), "2.0 (1.0–3.0)");
        assert_eq!(Spread::of(&[]).median, 0.0);
        assert_eq!(Spread::of(&[4.0, 2.0]).median, 3.0);
    }

    #[test]
    fn mean_and_ratio() {
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(ratio(1.0, 4.0), "0.25×");
        assert_eq!(ratio(1.0, 0.0), "–");
    }
}
