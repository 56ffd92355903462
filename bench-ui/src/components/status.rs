//! `JobStatus`: what the page is doing and with which run, as data attributes of the status
//! element, which the tests and the end-to-end run wait on.

use leptos::prelude::*;

use crate::model::record::RunRecord;
use crate::worker::client::Host;

/// What the page is doing: one job at a time, or none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Activity {
    /// No job is running.
    #[default]
    Idle,
    /// A live run of the experiment form.
    Running,
    /// A sweep: the simulated one, then the live one.
    Sweeping,
}

impl Activity {
    /// As the status element's `data-state` and the progress label name it.
    pub fn label(self) -> &'static str {
        match self {
            Activity::Idle => "idle",
            Activity::Running => "running",
            Activity::Sweeping => "sweeping",
        }
    }

    /// Whether a job is running (so no other may start).
    pub fn busy(self) -> bool {
        self != Activity::Idle
    }
}

/// The status element: empty, its state in `data-state`, the run shown in `data-run-id` and
/// where the last job ran in `data-host`.
#[component]
pub fn JobStatus(
    /// What the page is doing.
    #[prop(into)]
    activity: Signal<Activity>,
    /// The run shown.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
    /// Where the last job ran: the experiment worker, or the page when none started.
    #[prop(into)]
    host: Signal<Option<Host>>,
) -> impl IntoView {
    view! {
        <div class="status" data-testid="status"
            data-run-id=move || record.with(|r| r.as_ref().map(|r| r.run_id.clone()).unwrap_or_default())
            data-host=move || host.get().map(Host::label).unwrap_or_default()
            data-state=move || activity.get().label()></div>
    }
}
