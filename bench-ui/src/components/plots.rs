//! The plot panels: `HistogramPanel` (with its attempt selector), `TimelinePanel`,
//! `FairnessPanel` and `SweepPanel`. Each derives its chart from the model with a memo, so a
//! refresh of the run record recomputes each chart once.

use leptos::prelude::*;

use crate::model::fairness::Fairness;
use crate::model::histogram::JitterHistogram;
use crate::model::record::RunRecord;
use crate::model::sweep::SweepResult;
use crate::model::timeline::Timeline;
use crate::plot::builders::{
    histogram_chart, sweep_chart, timeline_chart, waits_chart, SweepMetric,
};

use super::chart::SvgChart;

/// The jitter histogram of the last run, for one attempt number or all of them.
#[component]
pub fn HistogramPanel(
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    // `None` = all attempts.
    let attempt = RwSignal::new(None::<u32>);
    let attempts = Memo::new(move |_| {
        record.with(|r| {
            r.as_ref()
                .map(|r| JitterHistogram::attempts(&r.sleeps))
                .unwrap_or_default()
        })
    });
    let chart = Memo::new(move |_| {
        let chosen = attempt.get();
        record.with(|r| {
            let sleeps = r.as_ref().map(|r| r.sleeps.as_slice()).unwrap_or_default();
            histogram_chart(&JitterHistogram::build(sleeps, chosen))
        })
    });
    view! {
        <section class="panel">
            <label class="field inline">
                <span>"attempt"</span>
                <select data-testid="attempt-select" on:change=move |ev| {
                    attempt.set(event_target_value(&ev).parse::<u32>().ok());
                }>
                    <option value="all">"all"</option>
                    {move || attempts.get().into_iter().map(|a| view! {
                        <option value=a.to_string() selected=move || attempt.get() == Some(a)>{a.to_string()}</option>
                    }).collect_view()}
                </select>
            </label>
            <SvgChart chart=chart test_id="histogram"/>
        </section>
    }
}

/// The holder timeline of the last run, with its overlap verdict in words.
#[component]
pub fn TimelinePanel(
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    let timeline =
        Memo::new(move |_| record.with(|r| r.as_ref().map(Timeline::build).unwrap_or_default()));
    let chart = Memo::new(move |_| timeline.with(timeline_chart));
    let verdict = move || {
        timeline.with(|t| {
            format!(
                "{} holds seen by L7 in {} samples; {} overlaps in L7; {} overlaps among the client's own holds",
                t.bars.len(),
                record.with(|r| r.as_ref().map(|r| r.samples.len()).unwrap_or(0)),
                t.overlaps.len(),
                t.client_overlaps.len()
            )
        })
    };
    view! {
        <section class="panel">
            <p class="verdict" data-testid="timeline-verdict"
                data-holds=move || timeline.with(|t| t.bars.len())
                data-overlaps=move || timeline.with(|t| t.overlaps.len())>
                {verdict}
            </p>
            <SvgChart chart=chart test_id="timeline"/>
        </section>
    }
}

/// Utilisation and fairness of the last run: the figures in words (and as data attributes
/// for tests) and each contender's waits.
#[component]
pub fn FairnessPanel(
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    let fairness =
        Memo::new(move |_| record.with(|r| r.as_ref().map(Fairness::build).unwrap_or_default()));
    let chart = Memo::new(move |_| fairness.with(waits_chart));
    let share = |v: Option<f64>| {
        v.map(|v| format!("{:.0} %", v * 100.0))
            .unwrap_or("–".into())
    };
    let millis = |v: Option<f64>| v.map(|v| format!("{v:.0} ms")).unwrap_or("–".into());
    let attribute = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    let summary = move || {
        fairness.with(|f| {
            format!(
                "lock utilisation {} (client's holds), {} (L7 samples); \
                 max wait ÷ median wait {} (median {}, max {}); {} grants overtook an earlier ask",
                share(f.utilisation_client),
                share(f.utilisation_l7),
                f.max_over_median()
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or("–".into()),
                millis(f.median_wait),
                millis(f.max_wait),
                f.overtakes,
            )
        })
    };
    view! {
        <section class="panel">
            <p class="verdict" data-testid="fairness"
                data-utilisation-client=move || fairness.with(|f| attribute(f.utilisation_client))
                data-utilisation-l7=move || fairness.with(|f| attribute(f.utilisation_l7))
                data-max-over-median=move || fairness.with(|f| attribute(f.max_over_median()))
                data-overtakes=move || fairness.with(|f| f.overtakes)>
                {summary}
            </p>
            <SvgChart chart=chart test_id="waits"/>
        </section>
    }
}

/// The sweep's plots: each metric for the live server beside the same sweep in the
/// simulation.
#[component]
pub fn SweepPanel(
    /// The sweep against the live server.
    #[prop(into)]
    sweep: Signal<SweepResult>,
    /// The same sweep in the page's simulation.
    #[prop(into)]
    simulated: Signal<SweepResult>,
) -> impl IntoView {
    let metrics = [
        (SweepMetric::TotalCalls, "sweep-calls", "sim-calls"),
        (
            SweepMetric::CallsPerGrant,
            "sweep-calls-per-grant",
            "sim-calls-per-grant",
        ),
        (
            SweepMetric::Completion,
            "sweep-completion",
            "sim-completion",
        ),
        (
            SweepMetric::Utilisation,
            "sweep-utilisation",
            "sim-utilisation",
        ),
        (SweepMetric::Fairness, "sweep-fairness", "sim-fairness"),
    ];
    let rows = metrics
        .into_iter()
        .map(|(metric, live_id, sim_id)| {
            let live = Memo::new(move |_| sweep.with(|s| sweep_chart(s, metric, "live server")));
            let sim = Memo::new(move |_| simulated.with(|s| sweep_chart(s, metric, "simulation")));
            view! {
                <div class="sweep-row">
                    <SvgChart chart=live test_id=live_id/>
                    <SvgChart chart=sim test_id=sim_id/>
                </div>
            }
        })
        .collect_view();
    view! { <section class="panel sweep">{rows}</section> }
}
