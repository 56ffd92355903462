//! The plot panels: `HistogramPanel` (with its attempt selector), `TimelinePanel`,
//! `ConcurrencyPanel`, `ModeWaitsPanel`, `FairnessPanel` and `SweepPanel`. Each derives its chart from the model with a memo, so a
//! refresh of the run record recomputes each chart once.

use leptos::prelude::*;

use crate::model::concurrency::Concurrency;
use crate::model::fairness::Fairness;
use crate::model::histogram::JitterHistogram;
use crate::model::mode_waits::{ModeWaits, Waits};
use crate::model::record::RunRecord;
use crate::model::sweep::SweepResult;
use crate::model::timeline::{Source, Timeline};
use crate::plot::builders::{
    concurrency_chart, histogram_chart, mode_waits_chart, sweep_chart, timeline_chart, waits_chart,
    SweepMetric,
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
    let samples = move || record.with(|r| r.as_ref().map(|r| r.samples.len()).unwrap_or(0));
    let stream_error = move || record.with(|r| r.as_ref().and_then(|r| r.stream_error.clone()));
    let verdict = move || {
        timeline.with(|t| {
            let rule = "(an overlap is an exclusive hold beside any other, or more shared holds \
                        than the limit)";
            let seen = match t.source {
                Source::Stream => format!(
                    "{} holds from the L8 event stream, {} of them missed by L7 sampling \
                     ({} samples), {} of the client's grants not in the stream, {} stream \
                     gaps; {} overlaps in the stream, {} in L7",
                    t.bars.len(),
                    t.missed_by_sampling.unwrap_or(0),
                    samples(),
                    t.grants_unseen.unwrap_or(0),
                    t.gaps.len(),
                    t.overlaps.len(),
                    t.sample_overlaps,
                ),
                Source::Samples => format!(
                    "{} holds seen by L7 in {} samples (no event stream{}); {} overlaps in L7",
                    t.bars.len(),
                    samples(),
                    stream_error().map(|e| format!(": {e}")).unwrap_or_default(),
                    t.overlaps.len(),
                ),
            };
            format!(
                "{seen}; {} overlaps among the client's own holds {rule}; up to {} shared \
                 holds at once on one key",
                t.client_overlaps.len(),
                t.peak_shared,
            )
        })
    };
    view! {
        <section class="panel">
            <p class="verdict" data-testid="timeline-verdict"
                data-source=move || timeline.with(|t| t.source.as_str())
                data-holds=move || timeline.with(|t| t.bars.len())
                data-overlaps=move || timeline.with(|t| t.overlaps.len())
                data-sample-overlaps=move || timeline.with(|t| t.sample_overlaps)
                data-client-overlaps=move || timeline.with(|t| t.client_overlaps.len())
                data-peak-shared=move || timeline.with(|t| t.peak_shared)
                data-missed-by-sampling=move || timeline.with(|t| t.missed_by_sampling)
                data-grants-unseen=move || timeline.with(|t| t.grants_unseen)
                data-gaps=move || timeline.with(|t| t.gaps.len())>
                {verdict}
            </p>
            <SvgChart chart=chart test_id="timeline"/>
        </section>
    }
}

/// Concurrent holders of the last run over time, by mode, under the semaphore's permits.
#[component]
pub fn ConcurrencyPanel(
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    let concurrency =
        Memo::new(move |_| record.with(|r| r.as_ref().map(Concurrency::build).unwrap_or_default()));
    let chart = Memo::new(move |_| concurrency.with(concurrency_chart));
    let summary = move || {
        concurrency.with(|c| {
            let permits = match c.limit {
                Some(limit) => format!("semaphore limit {limit} per key"),
                None => "no semaphore limit".to_string(),
            };
            format!(
                "at most {} shared holders at once over every key, {} holders on one key ({permits})",
                c.peak_shared(),
                c.peak_busiest(),
            )
        })
    };
    view! {
        <section class="panel">
            <p class="verdict" data-testid="concurrency-verdict"
                data-peak-shared=move || concurrency.with(Concurrency::peak_shared)
                data-peak-busiest=move || concurrency.with(Concurrency::peak_busiest)>
                {summary}
            </p>
            <SvgChart chart=chart test_id="concurrency"/>
        </section>
    }
}

/// One mode's waits in words: grants, median, 99th percentile and longest.
fn describe_waits(who: &str, w: &Waits) -> String {
    let millis = |v: Option<f64>| v.map(|v| format!("{v:.0} ms")).unwrap_or("–".into());
    format!(
        "{who}: {} grants, waited median {}, p99 {}, max {}",
        w.grants,
        millis(w.p50),
        millis(w.p99),
        millis(w.max)
    )
}

/// The writers' wait beside the readers': both summaries, then both histograms on one
/// scale.
#[component]
pub fn ModeWaitsPanel(
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    let waits =
        Memo::new(move |_| record.with(|r| r.as_ref().map(ModeWaits::build).unwrap_or_default()));
    let chart = Memo::new(move |_| waits.with(mode_waits_chart));
    let attribute = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    view! {
        <section class="panel">
            <p class="verdict" data-testid="mode-waits"
                data-readers=move || waits.with(|w| w.readers.grants)
                data-writers=move || waits.with(|w| w.writers.grants)
                data-reader-p50=move || waits.with(|w| attribute(w.readers.p50))
                data-writer-p50=move || waits.with(|w| attribute(w.writers.p50))>
                <span>{move || waits.with(|w| describe_waits("writers (exclusive)", &w.writers))}</span>
                <br/>
                <span>{move || waits.with(|w| describe_waits("readers (shared)", &w.readers))}</span>
            </p>
            <SvgChart chart=chart test_id="mode-waits-chart"/>
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
