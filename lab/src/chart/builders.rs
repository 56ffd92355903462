//! Charts of series: a line chart (dots joined by a line, one per series) and a grouped bar
//! chart. The dashboard's sweep plots and the bench's figures are both built here; charts of
//! one program's own model (the dashboard's histogram and timeline) build on [`Chart`]
//! directly.

use super::{Axes, Chart, Frame, LegendEntry, Shape, Tick, Titles};

/// One series of a line chart, in data units.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text, and the start of each point's hover tip.
    pub label: String,
    /// Style class of its dots, line and swatch.
    pub class: &'static str,
    /// `(x, y)` points, drawn in this order.
    pub points: Vec<(f64, f64)>,
}

/// One bar per group of a grouped bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    /// Legend text.
    pub label: String,
    /// Style class of its bars and swatch.
    pub class: &'static str,
    /// One value per group (a missing one draws no bar).
    pub values: Vec<f64>,
}

/// Radius of a line chart's dots, px.
const DOT: f64 = 3.5;

/// One line per non-empty series over axes from 0 that cover every point. Each dot's tip
/// reads `label, {x_name} = x: y`.
pub fn line_chart(frame: Frame, titles: Titles, x_name: &str, series: &[Series]) -> Chart {
    let points = series.iter().flat_map(|s| &s.points);
    let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max);
    let y_max = points.map(|p| p.1).fold(0.0, f64::max);
    let axes = Axes::new(&frame, x_max, y_max);
    let (x_scale, y_scale) = (axes.x, axes.y);
    let mut chart = Chart::new(frame, titles, axes);
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let pixels: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|(x, y)| (x_scale.map(*x), y_scale.map(*y)))
            .collect();
        for ((x, y), (cx, cy)) in s.points.iter().zip(&pixels) {
            chart.shapes.push(Shape::Circle {
                cx: *cx,
                cy: *cy,
                r: DOT,
                class: s.class,
                tip: format!("{}, {x_name} = {x}: {y:.1}", s.label),
            });
        }
        chart.shapes.push(Shape::Polyline {
            points: pixels,
            class: s.class,
        });
        chart.legend.push(LegendEntry {
            label: s.label.clone(),
            class: s.class,
        });
    }
    chart
}

/// Groups along x (labelled by `groups`), one bar of each [`Bars`] in every group, over a y
/// axis from 0. Each bar's tip reads `label, group: value`.
pub fn bar_chart(frame: Frame, titles: Titles, groups: &[String], bars: &[Bars]) -> Chart {
    let y_max = bars
        .iter()
        .flat_map(|b| &b.values)
        .fold(0.0, |m, v| v.max(m));
    let (left, _, right, _) = frame.plot();
    let group_w = (right - left) / groups.len().max(1) as f64;
    let bar_w = group_w * 0.8 / bars.len().max(1) as f64;
    let mut axes = Axes::new(&frame, 1.0, y_max);
    axes.x_ticks = groups
        .iter()
        .enumerate()
        .map(|(g, label)| Tick {
            pos: left + group_w * (g as f64 + 0.5),
            label: label.clone(),
        })
        .collect();
    let y_scale = axes.y;
    let mut chart = Chart::new(frame, titles, axes);
    for (g, group) in groups.iter().enumerate() {
        let x0 = left + group_w * (g as f64 + 0.1);
        for (b, series) in bars.iter().enumerate() {
            let Some(value) = series.values.get(g) else {
                continue;
            };
            let y = y_scale.map(*value);
            chart.shapes.push(Shape::Rect {
                x: x0 + bar_w * b as f64,
                y,
                w: bar_w * 0.9,
                h: (y_scale.map(0.0) - y).max(0.0),
                class: series.class,
                tip: format!("{}, {group}: {value:.0}", series.label),
            });
        }
    }
    chart.legend = bars
        .iter()
        .map(|b| LegendEntry {
            label: b.label.clone(),
            class: b.class,
        })
        .collect();
    chart
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Frame {
        Frame::legend_above(640.0, 300.0)
    }

    fn count(chart: &Chart, pick: impl Fn(&Shape) -> bool) -> usize {
        chart.shapes.iter().filter(|s| pick(s)).count()
    }

    #[test]
    fn a_line_chart_has_a_line_dots_and_a_legend_entry_per_non_empty_series() {
        let series = |label: &str, points: Vec<(f64, f64)>| Series {
            label: label.into(),
            class: "c",
            points,
        };
        let chart = line_chart(
            frame(),
            Titles::new("t", "x", "y"),
            "N",
            &[
                series("a", vec![(10.0, 2.0), (40.0, 9.0)]),
                series("b", vec![]),
                series("c", vec![(10.0, 4.0)]),
            ],
        );
        assert_eq!(count(&chart, |s| matches!(s, Shape::Polyline { .. })), 2);
        assert_eq!(count(&chart, |s| matches!(s, Shape::Circle { .. })), 3);
        assert_eq!(chart.legend.len(), 2);
        let Shape::Circle { cy, tip, .. } = &chart.shapes[1] else {
            panic!("dots come first")
        };
        assert_eq!(tip, "a, N = 40: 9.0");
        // The y axis ends on its round last tick (10), so 9 stands just below the top.
        let (_, top, _, bottom) = chart.frame.plot();
        assert!((cy - (bottom - (bottom - top) * 0.9)).abs() < 1e-9, "{cy}");
    }

    #[test]
    fn bars_stand_on_the_x_axis_within_their_group() {
        let chart = bar_chart(
            frame(),
            Titles::new("t", "x", "y"),
            &["one".into(), "two".into()],
            &[
                Bars {
                    label: "p".into(),
                    class: "p",
                    values: vec![2.0, 4.0],
                },
                Bars {
                    label: "q".into(),
                    class: "q",
                    values: vec![3.0],
                },
            ],
        );
        assert_eq!(count(&chart, |s| matches!(s, Shape::Rect { .. })), 3);
        assert_eq!(chart.axes.x_ticks.len(), 2);
        assert_eq!(chart.axes.x_ticks[1].label, "two");
        let (left, _, right, bottom) = chart.frame.plot();
        let middle = (left + right) / 2.0;
        for shape in &chart.shapes {
            let Shape::Rect {
                x, y, w, h, tip, ..
            } = shape
            else {
                continue;
            };
            assert!((y + h - bottom).abs() < 1e-9, "{tip}");
            let in_first = tip.contains("one");
            assert_eq!(x + w <= middle, in_first, "{tip}");
        }
    }
}
