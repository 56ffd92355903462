//! The doc figures: `lock_lab`'s charts in one frame and one palette, written as standalone
//! SVG files (`lock_lab::chart::svg::document`) that GitHub renders inline in
//! `docs/BENCHMARKS.md`.

use std::collections::BTreeMap;

use lock_lab::chart::builders::{bar_chart, line_chart, Bars, Series};
use lock_lab::chart::{svg, Chart, Frame, Titles};
use lock_lab::strategy::Strategy;

/// Every figure's frame: 640 × 380 px, the legend beside the plot (its labels are long).
const FRAME: Frame = Frame::legend_beside(640.0, 380.0);

/// The order tables and legends list the strategies in: Brooker's, worst first.
pub const STRATEGIES: [Strategy; 4] = [
    Strategy::NoJitter,
    Strategy::EqualJitter,
    Strategy::FullJitter,
    Strategy::DecorrelatedJitter,
];

/// A strategy's colour, fixed so every figure reads the same.
fn colour(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::NoJitter => "#d62728",
        Strategy::EqualJitter => "#ff7f0e",
        Strategy::FullJitter => "#2ca02c",
        Strategy::DecorrelatedJitter => "#1f77b4",
    }
}

/// One line per strategy through its value at each N of `ns` (N along x).
pub fn strategy_lines(
    titles: Titles,
    values: &BTreeMap<(Strategy, usize), f64>,
    ns: &[usize],
) -> String {
    let series: Vec<Series> = STRATEGIES
        .iter()
        .map(|s| Series {
            label: s.label().into(),
            class: s.class(),
            points: ns
                .iter()
                .filter_map(|n| values.get(&(*s, *n)).map(|v| (*n as f64, *v)))
                .collect(),
        })
        .collect();
    let colours = STRATEGIES.map(|s| (s.class(), colour(s)));
    document(&line_chart(FRAME, titles, "N", &series), &colours)
}

/// Grouped bars: `groups` along x, one bar of each entry of `bars` per group, coloured by
/// `(class, colour)`.
pub fn grouped_bars(
    titles: Titles,
    groups: &[String],
    bars: &[Bars],
    colours: &[(&str, &str)],
) -> String {
    document(&bar_chart(FRAME, titles, groups, bars), colours)
}

fn document(chart: &Chart, colours: &[(&str, &str)]) -> String {
    svg::document(chart, &svg::palette(colours))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strategy_figure_draws_every_strategy_in_its_colour() {
        let values: BTreeMap<_, _> = STRATEGIES
            .iter()
            .flat_map(|s| [((*s, 10), 1.0), ((*s, 20), 3.0)])
            .collect();
        let svg = strategy_lines(Titles::new("t", "x", "y"), &values, &[10, 20]);
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert_eq!(svg.matches("<circle").count(), 8);
        for s in STRATEGIES {
            assert!(svg.contains(s.label()), "{s:?}");
            assert!(svg.contains(&format!(".{}{{stroke:{}}}", s.class(), colour(s))));
        }
    }
}
