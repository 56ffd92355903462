//! `ProgressBar`: how far the job is, as finished acquisitions over planned ones (over every
//! run of a sweep); `JobProgress` works that out for the job in progress.

use leptos::prelude::*;

use crate::model::record::RunRecord;
use crate::model::sweep::SweepResult;

use super::status::Activity;

/// A labelled progress bar for a fraction in `[0, 1]`.
#[component]
pub fn ProgressBar(
    /// Fraction done.
    #[prop(into)]
    fraction: Signal<f64>,
    /// Text next to the bar ("12 / 40 acquisitions").
    #[prop(into)]
    label: Signal<String>,
) -> impl IntoView {
    view! {
        <div class="progress" data-testid="progress">
            <progress max="1" prop:value=move || fraction.get()></progress>
            <span>{move || label.get()}</span>
        </div>
    }
}

/// The progress of the job in progress (or of the last one): a live run's share of its
/// acquisitions, or during a sweep the runs done plus the current run's share, over all runs.
#[component]
pub fn JobProgress(
    /// What the page is doing.
    #[prop(into)]
    activity: Signal<Activity>,
    /// The run in progress, or the last one.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
    /// The sweep so far: one point per finished run.
    #[prop(into)]
    sweep: Signal<SweepResult>,
    /// How many runs the sweep in progress has in all.
    #[prop(into)]
    sweep_runs: Signal<usize>,
) -> impl IntoView {
    let run_progress = move || record.with(|r| r.as_ref().map(RunRecord::progress).unwrap_or(0.0));
    let fraction = Signal::derive(move || match activity.get() {
        Activity::Sweeping => {
            let done = sweep.with(|s| s.points.len()) as f64;
            ((done + run_progress()) / sweep_runs.get().max(1) as f64).min(1.0)
        }
        _ => run_progress(),
    });
    let label = Signal::derive(move || {
        let state = activity.get().label();
        record.with(|r| match r {
            Some(r) => format!(
                "{state}: {} / {} acquisitions{}",
                r.finished_acquisitions(),
                r.config.planned_acquisitions(),
                r.completed_millis
                    .map(|ms| format!(", done in {ms:.0} ms"))
                    .unwrap_or_default()
            ),
            None => format!("{state}: press Run"),
        })
    });
    view! { <ProgressBar fraction=fraction label=label/> }
}
