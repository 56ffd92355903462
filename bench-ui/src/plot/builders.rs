//! The dashboard's charts, computed from the model on `lock_lab`'s chart geometry: the
//! jitter histogram, the holder timeline, concurrent holders over time, the waits per
//! contender and per mode, and the sweep's lines.

use lock_lab::chart::builders::{bar_chart, line_chart, Bars, Series};
use lock_lab::chart::scale::LinearScale;
use lock_lab::chart::{Axes, Chart, Frame, LegendEntry, Shape, Tick, Titles};
use lock_lab::strategy::Strategy;

use lock_api::LockMode;

use crate::model::bar::{Breach, Overlap};
use crate::model::concurrency::Concurrency;
use crate::model::fairness::Fairness;
use crate::model::histogram::JitterHistogram;
use crate::model::mode_waits::ModeWaits;
use crate::model::sweep::{SweepPoint, SweepResult};
use crate::model::timeline::{Source, Timeline};

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

/// Style class of an L7 bar: every bar is a `hold`; a shared one is also `shared`, coloured
/// apart from the exclusive ones.
fn hold_class(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Exclusive => "hold",
        LockMode::Shared => "hold shared",
    }
}

/// An overlap's hover text: the rule it broke and the tokens involved.
fn overlap_tip(overlap: &Overlap) -> String {
    let tokens: Vec<String> = overlap.tokens.iter().map(u64::to_string).collect();
    let what = match overlap.breach {
        Breach::Exclusive => "an exclusive hold beside another".to_string(),
        Breach::OverLimit { limit } => {
            format!(
                "{} shared holds over a limit of {limit}",
                overlap.tokens.len()
            )
        }
    };
    format!(
        "OVERLAP on {}: {what}, tokens {}, {:.0}–{:.0} ms",
        overlap.key,
        tokens.join(", "),
        overlap.start,
        overlap.end
    )
}

/// One lane per session: holds as bars, from the L8 stream or L7's samples as the title says
/// (concurrent shared holds one above the other, in their own colour), client grant/release
/// marks as ticks, overlaps in red across every lane, the stream's gaps (its resets) as dashed
/// lines across every lane.
pub fn timeline_chart(timeline: &Timeline) -> Chart {
    let seen_by = match timeline.source {
        Source::Stream => "Holders from the L8 event stream",
        Source::Samples => "Holders seen by L7 samples",
    };
    let title = format!(
        "{seen_by} ({} holds, {} overlaps)",
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
            class: hold_class(bar.mode),
            tip: format!(
                "session {lane}, {} token {} ({}): {:.0}–{:.0} ms",
                bar.key,
                bar.fencing_token,
                bar.mode.as_str(),
                bar.start,
                bar.end
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
            tip: overlap_tip(overlap),
        });
    }
    for gap in &timeline.gaps {
        let x = x_scale.map(gap.at);
        shapes.push(Shape::Line {
            x1: x,
            y1: top,
            x2: x,
            y2: bottom,
            class: "gap",
        });
    }
    let mut entries = vec![
        // One row of legend within the chart's width: short labels (the title names the
        // source).
        ("exclusive", "hold"),
        ("shared", "hold shared"),
        ("client grant", "grant"),
        ("client release", "release"),
        ("overlap (must not happen)", "overlap"),
    ];
    if !timeline.gaps.is_empty() {
        entries.push(("stream gap", "gap"));
    }
    chart.legend = legend(&entries);
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

/// A count as it stood from one sample to the next: `(x, y)` steps over `values`.
fn steps(values: impl Iterator<Item = (f64, f64)>, end: f64) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (x, y) in values {
        if let Some(&(_, before)) = points.last() {
            points.push((x, before));
        }
        points.push((x, y));
    }
    if let Some(&(x, y)) = points.last() {
        if end > x {
            points.push((end, y));
        }
    }
    points
}

/// Shared and exclusive holders at each sampling instant, over every key, as steps; with a
/// semaphore, its permits (limit × keys) as a dashed ceiling the shared line must stay under.
pub fn concurrency_chart(concurrency: &Concurrency) -> Chart {
    let title = format!(
        "Concurrent holders seen by L7 (most shared at once: {})",
        concurrency.peak_shared()
    );
    let titles = Titles::new(title, "time since start (ms)", "holders at once");
    let (Some(first), Some(last)) = (concurrency.points.first(), concurrency.points.last()) else {
        return Chart::empty(PANEL, titles, "no sample yet");
    };
    let permits = concurrency.permits().map(f64::from);
    let peak = concurrency
        .points
        .iter()
        .map(|p| f64::from(p.shared.max(p.exclusive)))
        .fold(1.0, f64::max);
    let axes = Axes::new(&PANEL, last.at, peak.max(permits.unwrap_or(0.0)));
    let (x, y) = (axes.x, axes.y);
    let mut chart = Chart::new(PANEL, titles, axes);
    let line = |value: fn(&crate::model::concurrency::ConcurrencyPoint) -> u32| {
        let values = concurrency
            .points
            .iter()
            .map(|p| (x.map(p.at), y.map(f64::from(value(p)))));
        steps(values, x.map(last.at))
    };
    let mut entries = vec![
        ("exclusive holders", "conc-exclusive"),
        ("shared holders", "conc-shared"),
    ];
    chart.shapes.push(Shape::Polyline {
        points: line(|p| p.exclusive),
        class: "conc-exclusive",
    });
    chart.shapes.push(Shape::Polyline {
        points: line(|p| p.shared),
        class: "conc-shared",
    });
    if let Some(permits) = permits {
        chart.shapes.push(Shape::Polyline {
            points: vec![
                (x.map(first.at), y.map(permits)),
                (x.map(last.at), y.map(permits)),
            ],
            class: "conc-limit",
        });
        entries.push(("permits (semaphore limit × keys)", "conc-limit"));
    }
    chart.legend = legend(&entries);
    chart
}

/// The readers' waits beside the writers', bin by bin on one scale.
pub fn mode_waits_chart(waits: &ModeWaits) -> Chart {
    let titles = Titles::new(
        format!(
            "Waits for a grant: readers (n = {}) beside writers (n = {})",
            waits.readers.grants, waits.writers.grants
        ),
        "wait (ms)",
        "grants (count)",
    );
    if waits.bins.is_empty() {
        return Chart::empty(PANEL, titles, "no grant yet");
    }
    let groups: Vec<String> = waits
        .bins
        .iter()
        .map(|b| format!("{:.0}–{:.0}", b.low, b.high))
        .collect();
    let count = |label: &str, class, value: fn(&crate::model::mode_waits::WaitBin) -> u32| Bars {
        label: label.into(),
        class,
        values: waits.bins.iter().map(|b| f64::from(value(b))).collect(),
    };
    let mut chart = bar_chart(
        PANEL,
        titles,
        &groups,
        &[
            count("readers (shared)", "wait-readers", |b| b.readers),
            count("writers (exclusive)", "wait-writers", |b| b.writers),
        ],
    );
    // Every other bin's range as a label: twelve of them side by side run together (each
    // bar's tip still names its own).
    chart.axes.x_ticks = chart.axes.x_ticks.into_iter().step_by(2).collect();
    chart
}

/// Each contender's median, 99th percentile and longest wait, as grouped bars.
pub fn waits_chart(fairness: &Fairness) -> Chart {
    let titles = Titles::new("Wait for a grant, per contender", "contender", "wait (ms)");
    if fairness.contenders.is_empty() {
        return Chart::empty(PANEL, titles, "no grant yet");
    }
    let groups: Vec<String> = fairness
        .contenders
        .iter()
        .map(|c| format!("s{}", c.session))
        .collect();
    let bars =
        |label: &str, class, value: fn(&crate::model::fairness::ContenderWaits) -> f64| Bars {
            label: label.into(),
            class,
            values: fairness.contenders.iter().map(value).collect(),
        };
    let mut chart = bar_chart(
        PANEL,
        titles,
        &groups,
        &[
            bars("p50", "wait-p50", |c| c.p50),
            bars("p99", "wait-p99", |c| c.p99),
            bars("max", "wait-max", |c| c.max),
        ],
    );
    // Up to 200 contenders: thin the group labels so they never collide.
    let every = (chart.axes.x_ticks.len() / 20).max(1);
    chart.axes.x_ticks = chart.axes.x_ticks.into_iter().step_by(every).collect();
    chart
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
    /// Share of the run the key was held.
    Utilisation,
    /// Max wait ÷ median wait.
    Fairness,
}

impl SweepMetric {
    fn value(self, point: &SweepPoint) -> f64 {
        match self {
            SweepMetric::TotalCalls => f64::from(point.counters.l4_calls),
            SweepMetric::CallsPerGrant => point.counters.calls_per_grant().unwrap_or(0.0),
            SweepMetric::Completion => point.completion_millis,
            SweepMetric::Utilisation => point.utilisation.unwrap_or(0.0),
            SweepMetric::Fairness => point.max_over_median.unwrap_or(0.0),
        }
    }

    fn labels(self) -> (&'static str, &'static str) {
        match self {
            SweepMetric::TotalCalls => ("Total L4 calls vs contenders", "L4 calls (count)"),
            SweepMetric::CallsPerGrant => ("L4 calls per grant vs contenders", "calls per grant"),
            SweepMetric::Completion => ("Completion time vs contenders", "completion (ms)"),
            SweepMetric::Utilisation => ("Lock utilisation vs contenders", "share of the run held"),
            SweepMetric::Fairness => ("Fairness: max wait ÷ median wait", "max ÷ median wait"),
        }
    }
}

/// One line per strategy of `metric` against N; `source` names where the sweep ran (the
/// live server, the simulation).
pub fn sweep_chart(sweep: &SweepResult, metric: SweepMetric, source: &str) -> Chart {
    let (title, y_label) = metric.labels();
    let titles = Titles::new(
        format!("{title} ({source})"),
        "contenders N (sessions)",
        y_label,
    );
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
    use crate::model::record::{Hold, RunRecord, Sample, Sleep};
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
        let s = sweep_chart(&SweepResult::default(), SweepMetric::Completion, "live");
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

    fn hold(session: u32, fencing_token: u64) -> Hold {
        Hold {
            session,
            key: "k".into(),
            fencing_token,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 1,
            asked_at: 0.0,
            granted_at: 0.0,
            released_at: None,
            ledger_accepted: true,
        }
    }

    #[test]
    fn timeline_draws_holds_in_lanes_and_overlaps_in_red() {
        let mut r = RunRecord::new("r", Default::default());
        r.config.sessions = 2;
        // Lanes come from the client's own grants: token 1 went to contender 0, 2 to 1.
        r.holds = vec![hold(0, 1), hold(1, 2)];
        let s = |at, holder: &str, token| Sample {
            at,
            key: "k".into(),
            mode: Some(LockMode::Exclusive),
            holders: vec![(holder.into(), token)],
            limit: None,
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
    fn timeline_from_the_stream_says_so_and_draws_its_gaps() {
        use crate::model::event_bars::Gap;
        let mut r = RunRecord::new("r", Default::default());
        r.config.sessions = 1;
        r.holds = vec![hold(0, 1)];
        let mut t = Timeline::build(&r);
        t.source = Source::Stream;
        t.gaps = vec![Gap {
            key: "k".into(),
            at: 5.0,
        }];
        let chart = timeline_chart(&t);
        assert!(chart
            .titles
            .title
            .starts_with("Holders from the L8 event stream"));
        let gaps = chart
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Line { class: "gap", .. }))
            .count();
        assert_eq!(gaps, 1);
        assert!(chart.legend.iter().any(|e| e.class == "gap"));
    }

    #[test]
    fn timeline_colours_shared_holds_apart_and_never_flags_them() {
        let mut r = RunRecord::new("r", Default::default());
        r.config.sessions = 3;
        r.holds = vec![hold(0, 1), hold(1, 2), hold(2, 3)];
        let sample = |at, mode, holders: &[u64]| Sample {
            at,
            key: "k".into(),
            mode: Some(mode),
            holders: holders.iter().map(|t| (format!("h{t}"), *t)).collect(),
            limit: None,
            waiter_count: 0,
        };
        r.samples = vec![
            sample(10.0, LockMode::Shared, &[1, 2]),
            sample(20.0, LockMode::Shared, &[1, 2]),
            sample(30.0, LockMode::Exclusive, &[3]),
        ];
        let chart = timeline_chart(&Timeline::build(&r));
        assert_eq!(rects(&chart, "hold shared"), 2);
        assert_eq!(rects(&chart, "hold"), 1);
        assert_eq!(rects(&chart, "overlap"), 0);
        assert!(chart.legend.iter().any(|e| e.class == "hold shared"));
        // The same two readers under a limit of 1 are one hold too many.
        for s in &mut r.samples[..2] {
            s.limit = Some(1);
        }
        let chart = timeline_chart(&Timeline::build(&r));
        assert_eq!(rects(&chart, "overlap"), 1);
        let tip = chart.shapes.iter().find_map(|s| match s {
            Shape::Rect {
                class: "overlap",
                tip,
                ..
            } => Some(tip.clone()),
            _ => None,
        });
        assert!(
            tip.as_deref()
                .is_some_and(|t| t.contains("over a limit of 1")),
            "{tip:?}"
        );
    }

    fn polyline<'a>(chart: &'a Chart, class: &str) -> Option<&'a Vec<(f64, f64)>> {
        chart.shapes.iter().find_map(|s| match s {
            Shape::Polyline { points, class: c } if *c == class => Some(points),
            _ => None,
        })
    }

    #[test]
    fn concurrency_steps_each_count_and_draws_the_permits() {
        let mut r = RunRecord::new("r", Default::default());
        let sample = |at, mode, n: u64| Sample {
            at,
            key: "k".into(),
            mode: (n > 0).then_some(mode),
            holders: (0..n).map(|t| (format!("h{t}"), t)).collect(),
            limit: None,
            waiter_count: 0,
        };
        r.samples = vec![
            sample(0.0, LockMode::Shared, 2),
            sample(10.0, LockMode::Exclusive, 1),
            sample(20.0, LockMode::Shared, 3),
        ];
        let chart = concurrency_chart(&Concurrency::build(&r));
        assert!(chart.titles.title.contains("most shared at once: 3"));
        // Three samples: a step (two points) between each, the first point alone.
        assert_eq!(polyline(&chart, "conc-shared").map(Vec::len), Some(5));
        assert_eq!(polyline(&chart, "conc-exclusive").map(Vec::len), Some(5));
        assert!(polyline(&chart, "conc-limit").is_none(), "no semaphore");
        r.config.semaphore_limit = Some(3);
        let chart = concurrency_chart(&Concurrency::build(&r));
        let ceiling = polyline(&chart, "conc-limit").expect("the permits line");
        let shared = polyline(&chart, "conc-shared").unwrap();
        let top = shared.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        assert!(
            (ceiling[0].1 - top).abs() < 1e-9,
            "3 shared touch 3 permits"
        );
        assert_eq!(chart.legend.len(), 3);
        assert!(concurrency_chart(&Concurrency::default())
            .empty_message
            .is_some());
    }

    #[test]
    fn steps_hold_each_value_until_the_next() {
        let points = steps([(0.0, 5.0), (10.0, 7.0)].into_iter(), 15.0);
        assert_eq!(points, [(0.0, 5.0), (10.0, 5.0), (10.0, 7.0), (15.0, 7.0)]);
        assert!(steps(std::iter::empty(), 1.0).is_empty());
    }

    #[test]
    fn mode_waits_draw_readers_beside_writers() {
        let mut reader = hold(0, 1);
        reader.mode = LockMode::Shared;
        reader.granted_at = 10.0;
        let mut writer = hold(1, 2);
        writer.granted_at = 120.0;
        let r = RunRecord {
            holds: vec![reader, writer],
            ..Default::default()
        };
        let chart = mode_waits_chart(&ModeWaits::build(&r));
        let bins = crate::model::mode_waits::BINS;
        assert_eq!(rects(&chart, "wait-readers"), bins);
        assert_eq!(rects(&chart, "wait-writers"), bins);
        assert_eq!(
            chart.axes.x_ticks.len(),
            bins / 2,
            "every other bin labelled"
        );
        assert!(
            chart.titles.title.contains("n = 1"),
            "{}",
            chart.titles.title
        );
        assert!(mode_waits_chart(&ModeWaits::default())
            .empty_message
            .is_some());
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
            utilisation: None,
            max_over_median: None,
        };
        let sweep = SweepResult {
            points: vec![
                point(Strategy::FullJitter, 10, 20),
                point(Strategy::FullJitter, 40, 90),
                point(Strategy::NoJitter, 10, 40),
            ],
            ..Default::default()
        };
        let chart = sweep_chart(&sweep, SweepMetric::CallsPerGrant, "live");
        assert_eq!(chart.legend.len(), 2);
        let lines = chart
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Polyline { .. }))
            .count();
        assert_eq!(lines, 2);
    }
}
