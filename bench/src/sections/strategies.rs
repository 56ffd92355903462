//! One figure per backoff strategy and N: the samples of repeated rounds, their spreads and
//! medians, and the table and chart that show a figure for every strategy of
//! [`STRATEGIES`] at every N.

use std::collections::BTreeMap;
use std::fmt::Write;

use lock_lab::chart::Titles;
use lock_lab::strategy::Strategy;

use crate::figures::{self, STRATEGIES};
use crate::output::Output;
use crate::stats::Spread;

/// Samples per (strategy, N), one per round or seed (the dashboard's saved sweep has the
/// same shape).
pub type Samples = crate::dashboard::Samples;

/// The spread of each (strategy, N)'s samples.
pub type Spreads = BTreeMap<(Strategy, usize), Spread>;

/// The median of each (strategy, N).
pub type Medians = BTreeMap<(Strategy, usize), f64>;

/// The spread of every (strategy, N) of `samples`.
pub fn spreads(samples: &Samples) -> Spreads {
    samples.iter().map(|(k, v)| (*k, Spread::of(v))).collect()
}

/// The median of every (strategy, N) of `cells`.
pub fn medians(cells: &Spreads) -> Medians {
    cells.iter().map(|(k, v)| (*k, v.median)).collect()
}

/// Appends a table with a row per N of `ns` (the first column headed `N (what)`) and a
/// column per strategy, each cell `median (min–max)` with `decimals` places (`–` if
/// missing).
pub fn table(out: &mut String, what: &str, ns: &[usize], cells: &Spreads, decimals: usize) {
    let _ = write!(out, "| N ({what}) |");
    for s in STRATEGIES {
        let _ = write!(out, " {} |", s.label());
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(STRATEGIES.len()));
    out.push('\n');
    for n in ns {
        let _ = write!(out, "| {n} |");
        for s in STRATEGIES {
            let cell = cells.get(&(s, *n)).map_or("–".into(), |c| c.show(decimals));
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
}

/// A chart of one line per strategy through `values` at `ns`, written as `file`; the
/// Markdown link to it.
pub fn chart(
    output: &Output,
    file: &str,
    alt: &str,
    titles: Titles,
    values: &Medians,
    ns: &[usize],
) -> String {
    output.chart(file, alt, &figures::strategy_lines(titles, values, ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_has_a_column_per_strategy_and_a_dash_where_nothing_was_measured() {
        let samples: Samples = [((Strategy::NoJitter, 10), vec![3.0, 1.0, 2.0])].into();
        let mut out = String::new();
        table(&mut out, "clients", &[10], &spreads(&samples), 1);
        assert_eq!(
            out,
            "| N (clients) | no jitter | equal jitter | full jitter (SDK) | decorrelated jitter |\n\
             |---|---|---|---|---|\n\
             | 10 | 2.0 (1.0–3.0) | – | – | – |\n"
        );
    }
}
