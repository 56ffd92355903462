//! The fault lab's timeline: one lane per contender of each side (fenced A, fenced B,
//! unfenced A, unfenced B). A lane shows the contender's lease (grant to its server-side
//! end), its faults (pause, partition, crash as spans, a revoke as a tick), the client's
//! deadline and the SDK's `lost` report as ticks, and each of its writes as a dot coloured
//! by outcome: accepted, fenced out, corrupted.

use lock_lab::chart::scale::LinearScale;
use lock_lab::chart::{Axes, Chart, Frame, LegendEntry, Shape, Tick, Titles};

use crate::model::lab_record::{outcome_name, FaultMark, LabContender, LabRecord, LabSide};

use super::builders::WIDTH;

/// The lab timeline's frame: four lanes, wide enough for "unfenced A" labels on the left
/// and the legend's ten entries in a column on the right.
const FRAME: Frame = Frame {
    margin_left: 84.0,
    ..Frame::legend_beside(WIDTH + 200.0, 270.0)
};

/// The style class of a write's dot.
fn write_class(outcome: &str) -> &'static str {
    match outcome {
        "accepted" => "write accepted",
        "fencedOut" => "write fenced-out",
        _ => "write corrupted",
    }
}

/// The style class of a fault span.
fn fault_class(kind: FaultMark) -> &'static str {
    match kind {
        FaultMark::Pause => "fault pause",
        FaultMark::Partition => "fault partition",
        FaultMark::Crash => "fault crash",
        FaultMark::Revoke => "revoke",
    }
}

/// The chart of a lab run.
pub fn lab_timeline_chart(record: &LabRecord) -> Chart {
    let frame = FRAME;
    let titles = Titles::new(
        format!("Fault lab: {}", record.form.scenario.title()),
        "time since start (ms)",
        "contender",
    );
    let lanes: Vec<(&LabSide, &LabContender, u32)> = record
        .sides
        .iter()
        .flat_map(|s| {
            s.contenders
                .iter()
                .enumerate()
                .map(move |(i, c)| (s, c, i as u32))
        })
        .collect();
    if lanes.iter().all(|(_, c, _)| c.granted_at.is_none()) {
        return Chart::empty(frame, titles, "no grant yet");
    }
    // Some room after the last event, so a mark there is not on the axis.
    let end = record.end() * 1.05 + 1.0;
    let mut axes = Axes::new(&frame, end, 1.0);
    let (_, top, _, bottom) = frame.plot();
    let lane_h = (bottom - top) / lanes.len() as f64;
    let lane_y = LinearScale::new((0.0, lanes.len() as f64), (top, bottom));
    axes.y_ticks = lanes
        .iter()
        .enumerate()
        .map(|(i, (side, c, _))| Tick {
            pos: lane_y.map(i as f64) + lane_h / 2.0,
            label: format!("{} {}", side.label(), c.name),
        })
        .collect();
    let x = axes.x;
    let mut chart = Chart::new(frame, titles, axes);
    for (lane, (side, c, index)) in lanes.iter().enumerate() {
        let y = lane_y.map(lane as f64);
        draw_lane(&mut chart.shapes, side, c, *index, (y, lane_h), end, &|t| {
            x.map(t)
        });
    }
    chart.legend = [
        ("lease", "hold"),
        ("pause", "fault pause"),
        ("partition", "fault partition"),
        ("crash", "fault crash"),
        ("revoke", "revoke"),
        ("deadline", "deadline"),
        ("lost", "lost"),
        ("accepted", "write accepted"),
        ("fenced out", "write fenced-out"),
        ("corrupted", "write corrupted"),
    ]
    .into_iter()
    .map(|(label, class)| LegendEntry {
        label: label.into(),
        class,
    })
    .collect();
    chart
}

/// One contender's lane at `(top, height)`.
fn draw_lane(
    shapes: &mut Vec<Shape>,
    side: &LabSide,
    c: &LabContender,
    index: u32,
    (top, h): (f64, f64),
    end: f64,
    x: &dyn Fn(f64) -> f64,
) {
    let span = |shapes: &mut Vec<Shape>, start: f64, stop: f64, class, tip: String| {
        shapes.push(Shape::Rect {
            x: x(start),
            y: top + h * 0.2,
            w: (x(stop) - x(start)).max(2.0),
            h: h * 0.6,
            class,
            tip,
        });
    };
    let tick = |shapes: &mut Vec<Shape>, at: f64, class| {
        shapes.push(Shape::Line {
            x1: x(at),
            y1: top + 2.0,
            x2: x(at),
            y2: top + h - 2.0,
            class,
        });
    };
    if let Some(granted) = c.granted_at {
        let stop = c.lease_end_at.unwrap_or(end);
        let token = c.token.unwrap_or_default();
        let tip = format!("{} token {token}: {granted:.0}–{stop:.0} ms", c.name);
        span(shapes, granted, stop, "hold", tip);
    }
    for f in &c.faults {
        let class = fault_class(f.kind);
        match (f.kind, f.end) {
            (FaultMark::Revoke, _) => tick(shapes, f.start, class),
            (_, stop) => {
                let stop = stop.unwrap_or(end);
                let tip = format!("{}: {:.0}–{stop:.0} ms", f.kind.as_str(), f.start);
                span(shapes, f.start, stop, class, tip);
            }
        }
    }
    if let Some(at) = c.deadline_at {
        tick(shapes, at, "deadline");
    }
    if let Some(at) = c.lost_at {
        tick(shapes, at, "lost");
    }
    for w in side.writes.iter().filter(|w| w.contender == index) {
        let outcome = outcome_name(w.outcome);
        shapes.push(Shape::Circle {
            cx: x(w.at),
            cy: top + h / 2.0,
            r: 5.0,
            class: write_class(outcome),
            tip: format!(
                "{} wrote token {} at {:.0} ms: {outcome}",
                c.name, w.token, w.at
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lab_form::LabForm;
    use crate::model::lab_record::tests::gc_pause;

    fn count(chart: &Chart, class: &str) -> usize {
        chart
            .shapes
            .iter()
            .filter(|s| match s {
                Shape::Rect { class: c, .. }
                | Shape::Line { class: c, .. }
                | Shape::Circle { class: c, .. } => *c == class,
                _ => false,
            })
            .count()
    }

    #[test]
    fn a_gc_pause_draws_the_pause_the_leases_and_each_write_by_outcome() {
        let chart = lab_timeline_chart(&gc_pause());
        let lanes: Vec<&str> = chart
            .axes
            .y_ticks
            .iter()
            .map(|t| t.label.as_str())
            .collect();
        assert_eq!(lanes, ["fenced A", "fenced B", "unfenced A", "unfenced B"]);
        assert_eq!(count(&chart, "fault pause"), 2);
        assert_eq!(count(&chart, "hold"), 4);
        assert_eq!(count(&chart, "deadline"), 2);
        assert_eq!(count(&chart, "lost"), 2);
        assert_eq!(count(&chart, "write accepted"), 2);
        assert_eq!(count(&chart, "write fenced-out"), 1);
        assert_eq!(count(&chart, "write corrupted"), 1);
    }

    #[test]
    fn a_run_without_grants_says_so() {
        let chart = lab_timeline_chart(&LabRecord::new("r", LabForm::default()));
        assert!(chart.empty_message.is_some());
    }
}
