//! The dashboard's charts, computed from the model on `lock_lab`'s chart geometry: the
//! jitter histogram, the holder timeline and the sweep's lines.

use lock_lab::chart::builders::{line_chart, Series};
use lock_lab::chart::scale::LinearScale;
use lock_lab::chart::{Axes, Chart, Frame, LegendEntry, Shape, Tick, Titles};
use lock_lab::strategy::Strategy;

use crate::model::histogram::JitterHistogram;
use crate::model::sweep::{SweepPoint, SweepResult};
use crate::model::timeline::Timeline;

/// Chart width, px (the SVG's viewBox; it scales with its container).
pub const WIDTH: f64 = 640.0;
/// Default chart height, px.
pub const HEIGHT: f64 = 300.0;

/// The dashboard's charts: legend in a row above the plot.
const PANEL: Frame = Frame::legend_above(WIDTH, HEIGHT);

/// Bars of sleeps per bin and the full-jitter expectation as a line over them.
pub fn histogram_chart(histogram: &JitterHistogram) -> Chart {
    let which = match histogram.attempt {
        Some(a) => format!("attempt {a}"),
        None => "all attempts".to_string(),
    };
    let title = format!("Backoff delays slept ({which}, n = {})", histogram.total);
    let titles = Titles::new(title, "delay slept (ms)", "sleeps (count)");
    let Some(last) = histogram.bins.last() else {
        return Chart::empty(PANEL, titles, "no backoff sleeps yet");
    };
    let axes = Axes::new(&PANEL, last.high, histogram.peak());
    let (x_scale, y_scale) = (axes.x, axes.y);
    let mut chart = Chart::new(PANEL, titles, axes);
    for bin in &histogram.bins {
        let x0 = x_scale.map(bin.low);
        let x1 = x_scale.map(bin.high);
        let y = y_scale.map(f64::from(bin.count));
        chart.shapes.push(Shape::Rect {
            x: x0 + 1.0,
            y,
            w: (x1 - x0 - 2.0).max(1.0),
            h: y_scale.map(0.0) - y,
            class: "bar",
            tip: format!(
                "{:.0}–{:.0} ms: {} slept, {:.1} expected",
                bin.low, bin.high, bin.count, bin.expected
            ),
        });
    }
    // The expectation is a step function over the bins: draw it as one.
    let mut points = Vec::new();
    for bin in &histogram.bins {
        let y = y_scale.map(bin.expected);
        points.push((x_scale.map(bin.low), y));
        points.push((x_scale.map(bin.high), y));
    }
    chart.shapes.push(Shape::Polyline {
        points,
        class: "expect",
    });
    chart.legend = legend(&[
        ("delays slept", "bar"),
        ("uniform expectation (full jitter)", "expect"),
    ]);
    chart
}

/// Legend entries from `(label, class)` pairs.
fn legend(entries: &[(&str, &'static str)]) -> Vec<LegendEntry> {
    entries
        .iter()
        .map(|(label, class)| LegendEntry {
            label: (*label).into(),
            class,
        })
        .collect()
}

/// Height of the timeline: more lanes, taller chart, within reason.
fn timeline_height(lanes: u32) -> f64 {
    (HEIGHT - 120.0 + f64::from(lanes) * 12.0).clamp(HEIGHT, 640.0)
}

/// One lane per session: L7 holds as bars, client grant/release marks as ticks, overlaps in
/// red across every lane.
pub fn timeline_chart(timeline: &Timeline) -> Chart {
    let title = format!(
        "Holders seen by L7 ({} holds, {} overlaps)",
        timeline.bars.len(),
        timeline.overlaps.len()
    );
    let titles = Titles::new(title, "time since start (ms)", "session");
    if timeline.bars.is_empty() && timeline.marks.is_empty() {
        return Chart::empty(PANEL, titles, "no holder seen yet");
    }
    let frame = Frame::legend_above(WIDTH, timeline_height(timeline.lanes));
    let lanes = timeline.lanes.max(1);
    let mut axes = Axes::new(&frame, timeline.end, 1.0);
    let (_, top, _, bottom) = frame.plot();
    let lane_h = (bottom - top) / f64::from(lanes);
    let lane_y = LinearScale::new((0.0, f64::from(lanes)), (top, bottom));
    axes.y_ticks = lane_ticks(lanes, &lane_y, lane_h);
    let x_scale = axes.x;
    let mut chart = Chart::new(frame, titles, axes);
    let shapes = &mut chart.shapes;
    for bar in &timeline.bars {
        let Some(lane) = bar.session else { continue };
        let x0 = x_scale.map(bar.start);
        let x1 = x_scale.map(bar.end);
        shapes.push(Shape::Rect {
            x: x0,
            y: lane_y.map(f64::from(lane)) + lane_h * 0.15,
            w: (x1 - x0).max(2.0),
            h: (lane_h * 0.7).max(1.0),
            class: "hold",
            tip: format!(
                "session {lane}, {} token {}: {:.0}–{:.0} ms",
                bar.key, bar.fencing_token, bar.start, bar.end
            ),
        });
    }
    for mark in &timeline.marks {
        let x = x_scale.map(mark.at);
        let y = lane_y.map(f64::from(mark.session));
        shapes.push(Shape::Line {
            x1: x,
            y1: y,
            x2: x,
            y2: y + lane_h.max(2.0),
            class: if mark.grant { "grant" } else { "release" },
        });
    }
    for overlap in &timeline.overlaps {
        let x0 = x_scale.map(overlap.start);
        let x1 = x_scale.map(overlap.end);
        shapes.push(Shape::Rect {
            x: x0,
            y: top,
            w: (x1 - x0).max(3.0),
            h: bottom - top,
            class: "overlap",
            tip: format!(
                "OVERLAP on {}: tokens {} and {}, {:.0}–{:.0} ms",
                overlap.key, overlap.tokens.0, overlap.tokens.1, overlap.start, overlap.end
            ),
        });
    }
    chart.legend = legend(&[
        ("hold seen by L7", "hold"),
        ("client grant", "grant"),
        ("client release", "release"),
        ("overlap (must not happen)", "overlap"),
    ]);
    chart
}

/// Lane labels, thinned so they never collide (at least 12 px apart).
fn lane_ticks(lanes: u32, lane_y: &LinearScale, lane_h: f64) -> Vec<Tick> {
    let every = (12.0 / lane_h).ceil().max(1.0) as u32;
    (0..lanes)
        .step_by(every as usize)
        .map(|lane| Tick {
            pos: lane_y.map(f64::from(lane)) + lane_h / 2.0,
            label: format!("s{lane}"),
        })
        .collect()
}

/// What a sweep chart puts on its y axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepMetric {
    /// Total L4 calls of the run.
    TotalCalls,
    /// L4 calls per grant.
    CallsPerGrant,
    /// Time until the last contender finished.
    Completion,
}

impl SweepMetric {
    fn value(self, point: &SweepPoint) -> f64 {
        match self {
            SweepMetric::TotalCalls => f64::from(point.counters.l4_calls),
            SweepMetric::CallsPerGrant => point.counters.calls_per_grant().unwrap_or(0.0),
            SweepMetric::Completion => point.completion_millis,
        }
    }

    fn labels(self) -> (&'static str, &'static str) {
        match self {
            SweepMetric::TotalCalls => ("Total L4 calls vs contenders", "L4 calls (count)"),
            SweepMetric::CallsPerGrant => ("L4 calls per grant vs contenders", "calls per grant"),
            SweepMetric::Completion => ("Completion time vs contenders", "completion (ms)"),
        }
    }
}

/// One line per strategy of `metric` against N.
pub fn sweep_chart(sweep: &SweepResult, metric: SweepMetric) -> Chart {
    let (title, y_label) = metric.labels();
    let titles = Titles::new(title, "contenders N (sessions)", y_label);
    if sweep.points.is_empty() {
        return Chart::empty(PANEL, titles, "run a sweep to fill this plot");
    }
    let series: Vec<Series> = Strategy::ALL
        .into_iter()
        .map(|strategy| Series {
            label: strategy.label().into(),
            class: strategy.class(),
            points: sweep
                .series(strategy)
                .iter()
                .map(|p| (f64::from(p.contenders), metric.value(p)))
                .collect(),
        })
        .collect();
    line_chart(PANEL, titles, "N", &series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::counters::Counters;
    use crate::model::record::{RunRecord, Sample, Sleep};
    use crate::model::sweep::SweepPoint;

    fn rects(chart: &Chart, class: &str) -> usize {
        chart
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Rect { class: c, .. } if *c == class))
            .count()
    }

    #[test]
    fn empty_inputs_say_so() {
        let h = histogram_chart(&JitterHistogram::build(&[], None));
        assert!(h.empty_message.is_some());
        assert!(h.shapes.is_empty());
        let t = timeline_chart(&Timeline::default());
        assert!(t.empty_message.is_some());
        let s = sweep_chart(&SweepResult::default(), SweepMetric::Completion);
        assert!(s.empty_message.is_some());
    }

    #[test]
    fn histogram_bars_stand_on_the_x_axis_inside_the_plot() {
        let sleeps: Vec<Sleep> = (0..30)
            .map(|i| Sleep {
                session: 0,
                attempt: 0,
                delay_millis: i * 3,
                ceiling_millis: 90,
            })
            .collect();
        let chart = histogram_chart(&JitterHistogram::build(&sleeps, Some(0)));
        let (left, top, right, bottom) = chart.frame.plot();
        assert_eq!(rects(&chart, "bar"), crate::model::histogram::BINS);
        for shape in &chart.shapes {
            if let Shape::Rect { x, y, w, h, .. } = shape {
                assert!(*x >= left && x + w <= right + 0.01, "{x} {w}");
                assert!(*y >= top && (y + h - bottom).abs() < 0.01, "{y} {h}");
            }
        }
        assert_eq!(chart.legend.len(), 2);
        assert!(chart.titles.title.contains("n = 30"));
    }

    #[test]
    fn timeline_draws_holds_in_lanes_and_overlaps_in_red() {
        let mut r = RunRecord::new("r", Default::default());
        r.config.sessions = 2;
        r.session_ids = vec!["a".into(), "b".into()];
        let s = |at, holder: &str, token| Sample {
            at,
            key: "k".into(),
            holder: Some((holder.into(), token)),
            waiter_count: 0,
        };
        r.samples = vec![s(10.0, "a", 1), s(20.0, "b", 2), s(30.0, "b", 2)];
        let chart = timeline_chart(&Timeline::build(&r));
        assert_eq!(rects(&chart, "hold"), 2);
        assert_eq!(rects(&chart, "overlap"), 0);
        assert_eq!(chart.axes.y_ticks.len(), 2);
        r.samples.push(s(40.0, "a", 1));
        let chart = timeline_chart(&Timeline::build(&r));
        assert_eq!(rects(&chart, "overlap"), 1);
    }

    #[test]
    fn many_lanes_thin_their_labels() {
        let lane_y = LinearScale::new((0.0, 200.0), (0.0, 400.0));
        assert_eq!(lane_ticks(200, &lane_y, 2.0).len(), 34);
    }

    #[test]
    fn sweep_has_one_series_per_strategy_present() {
        let point = |strategy, n, calls| SweepPoint {
            strategy,
            contenders: n,
            counters: Counters {
                grants: n,
                l4_calls: calls,
                ..Default::default()
            },
            completion_millis: f64::from(calls),
        };
        let sweep = SweepResult {
            points: vec![
                point(Strategy::FullJitter, 10, 20),
                point(Strategy::FullJitter, 40, 90),
                point(Strategy::NoJitter, 10, 40),
            ],
            ..Default::default()
        };
        let chart = sweep_chart(&sweep, SweepMetric::CallsPerGrant);
        assert_eq!(chart.legend.len(), 2);
        let lines = chart
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Polyline { .. }))
            .count();
        assert_eq!(lines, 2);
    }
}
