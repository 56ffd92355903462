//! The dashboard's charts, computed from the model: the jitter histogram, the holder
//! timeline and the sweep's lines.

use crate::model::histogram::JitterHistogram;
use crate::model::strategy::Strategy;
use crate::model::sweep::SweepResult;
use crate::model::timeline::Timeline;

use super::chart::{plot_area, Axes, Chart, LegendEntry, Shape, Tick, HEIGHT, WIDTH};
use super::scale::LinearScale;

fn empty(title: &str, x_label: &str, y_label: &str, message: &str) -> Chart {
    let axes = Axes::new(1.0, 1.0, HEIGHT);
    Chart {
        width: WIDTH,
        height: HEIGHT,
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_ticks: axes.x_ticks,
        y_ticks: axes.y_ticks,
        shapes: Vec::new(),
        legend: Vec::new(),
        empty_message: Some(message.into()),
    }
}

/// Bars of sleeps per bin and the full-jitter expectation as a line over them.
pub fn histogram_chart(histogram: &JitterHistogram) -> Chart {
    let which = match histogram.attempt {
        Some(a) => format!("attempt {a}"),
        None => "all attempts".to_string(),
    };
    let title = format!("Backoff delays slept ({which}, n = {})", histogram.total);
    let (x_label, y_label) = ("delay slept (ms)", "sleeps (count)");
    let Some(last) = histogram.bins.last() else {
        return empty(&title, x_label, y_label, "no backoff sleeps yet");
    };
    let axes = Axes::new(last.high, histogram.peak(), HEIGHT);
    let mut shapes = Vec::new();
    for bin in &histogram.bins {
        let x0 = axes.x.map(bin.low);
        let x1 = axes.x.map(bin.high);
        let y = axes.y.map(f64::from(bin.count));
        shapes.push(Shape::Rect {
            x: x0 + 1.0,
            y,
            w: (x1 - x0 - 2.0).max(1.0),
            h: axes.y.map(0.0) - y,
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
        let y = axes.y.map(bin.expected);
        points.push((axes.x.map(bin.low), y));
        points.push((axes.x.map(bin.high), y));
    }
    shapes.push(Shape::Polyline {
        points,
        class: "expect",
    });
    Chart {
        width: WIDTH,
        height: HEIGHT,
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_ticks: axes.x_ticks,
        y_ticks: axes.y_ticks,
        shapes,
        legend: vec![
            LegendEntry {
                label: "delays slept".into(),
                class: "bar",
            },
            LegendEntry {
                label: "uniform expectation (full jitter)".into(),
                class: "expect",
            },
        ],
        empty_message: None,
    }
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
    let (x_label, y_label) = ("time since start (ms)", "session");
    if timeline.bars.is_empty() && timeline.marks.is_empty() {
        return empty(&title, x_label, y_label, "no holder seen yet");
    }
    let height = timeline_height(timeline.lanes);
    let lanes = timeline.lanes.max(1);
    let mut axes = Axes::new(timeline.end, 1.0, height);
    let (_, top, _, bottom) = plot_area(height);
    let lane_h = (bottom - top) / f64::from(lanes);
    let lane_y = LinearScale::new((0.0, f64::from(lanes)), (top, bottom));
    axes.y_ticks = lane_ticks(lanes, &lane_y, lane_h);
    let mut shapes = Vec::new();
    for bar in &timeline.bars {
        let Some(lane) = bar.session else { continue };
        let x0 = axes.x.map(bar.start);
        let x1 = axes.x.map(bar.end);
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
        let x = axes.x.map(mark.at);
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
        let x0 = axes.x.map(overlap.start);
        let x1 = axes.x.map(overlap.end);
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
    Chart {
        width: WIDTH,
        height,
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_ticks: axes.x_ticks,
        y_ticks: axes.y_ticks,
        shapes,
        legend: vec![
            LegendEntry {
                label: "hold seen by L7".into(),
                class: "hold",
            },
            LegendEntry {
                label: "client grant".into(),
                class: "grant",
            },
            LegendEntry {
                label: "client release".into(),
                class: "release",
            },
            LegendEntry {
                label: "overlap (must not happen)".into(),
                class: "overlap",
            },
        ],
        empty_message: None,
    }
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
    fn value(self, point: &crate::model::sweep::SweepPoint) -> f64 {
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

/// The colour class of a strategy's series.
pub fn strategy_class(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::FullJitter => "s-full",
        Strategy::NoJitter => "s-none",
        Strategy::EqualJitter => "s-equal",
        Strategy::DecorrelatedJitter => "s-deco",
    }
}

/// One line per strategy of `metric` against N.
pub fn sweep_chart(sweep: &SweepResult, metric: SweepMetric) -> Chart {
    let (title, y_label) = metric.labels();
    let x_label = "contenders N (sessions)";
    if sweep.points.is_empty() {
        return empty(title, x_label, y_label, "run a sweep to fill this plot");
    }
    let x_max = sweep
        .points
        .iter()
        .map(|p| f64::from(p.contenders))
        .fold(0.0, f64::max);
    let y_max = sweep
        .points
        .iter()
        .map(|p| metric.value(p))
        .fold(0.0, f64::max);
    let axes = Axes::new(x_max, y_max, HEIGHT);
    let mut shapes = Vec::new();
    let mut legend = Vec::new();
    for strategy in Strategy::ALL {
        let series = sweep.series(strategy);
        if series.is_empty() {
            continue;
        }
        let class = strategy_class(strategy);
        let points: Vec<(f64, f64)> = series
            .iter()
            .map(|p| {
                (
                    axes.x.map(f64::from(p.contenders)),
                    axes.y.map(metric.value(p)),
                )
            })
            .collect();
        for (point, (cx, cy)) in series.iter().zip(&points) {
            shapes.push(Shape::Circle {
                cx: *cx,
                cy: *cy,
                r: 3.5,
                class,
                tip: format!(
                    "{}, N = {}: {:.1}",
                    strategy.label(),
                    point.contenders,
                    metric.value(point)
                ),
            });
        }
        shapes.push(Shape::Polyline { points, class });
        legend.push(LegendEntry {
            label: strategy.label().into(),
            class,
        });
    }
    Chart {
        width: WIDTH,
        height: HEIGHT,
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_ticks: axes.x_ticks,
        y_ticks: axes.y_ticks,
        shapes,
        legend,
        empty_message: None,
    }
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
        let (left, top, right, bottom) = plot_area(chart.height);
        assert_eq!(rects(&chart, "bar"), crate::model::histogram::BINS);
        for shape in &chart.shapes {
            if let Shape::Rect { x, y, w, h, .. } = shape {
                assert!(*x >= left && x + w <= right + 0.01, "{x} {w}");
                assert!(*y >= top && (y + h - bottom).abs() < 0.01, "{y} {h}");
            }
        }
        assert_eq!(chart.legend.len(), 2);
        assert!(chart.title.contains("n = 30"));
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
        assert_eq!(chart.y_ticks.len(), 2);
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
