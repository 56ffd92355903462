//! `JobButtons`: Run, Sweep and Cancel, and the exports of what the jobs produced.

use leptos::prelude::*;

use crate::model::record::RunRecord;
use crate::model::sweep::SweepResult;

use super::export::ExportButtons;

/// The job buttons. One job runs at a time, so Run and Sweep are disabled while one does,
/// and Cancel while none does.
#[component]
pub fn JobButtons(
    /// Whether a job is running.
    #[prop(into)]
    busy: Signal<bool>,
    /// Starts a live run of the experiment form.
    #[prop(into)]
    on_run: Callback<()>,
    /// Starts the sweep of the sweep form.
    #[prop(into)]
    on_sweep: Callback<()>,
    /// Asks the running job to stop.
    #[prop(into)]
    on_cancel: Callback<()>,
    /// The last run, for its exports.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
    /// The last sweep, for its exports.
    #[prop(into)]
    sweep: Signal<SweepResult>,
) -> impl IntoView {
    view! {
        <div class="buttons">
            <button data-testid="run" disabled=busy on:click=move |_| on_run.run(())>"Run"</button>
            <button data-testid="sweep" disabled=busy on:click=move |_| on_sweep.run(())>"Sweep"</button>
            <button data-testid="cancel" disabled=move || !busy.get() on:click=move |_| on_cancel.run(())>"Cancel"</button>
            <ExportButtons record=record sweep=sweep/>
        </div>
    }
}
