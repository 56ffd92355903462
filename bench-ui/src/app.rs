//! `App`: the dashboard's root. It holds the signals its parts share — what the user set
//! (`Inputs`) and what the jobs reported (`Outcome`) — and the Run / Sweep / Cancel actions
//! (`Jobs`), which run the job in the experiment engine (`crate::worker`: in a worker, or on
//! the page's own thread when no worker starts) and adopt its reports into the signals as
//! they come. The parts are `crate::components`: each reads the signals it is handed, and
//! only the actions write what the jobs report.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::components::config_form::{ConfigForm, SweepForm};
use crate::components::error_banner::ErrorBanner;
use crate::components::header::PageHeader;
use crate::components::job_buttons::JobButtons;
use crate::components::lab::FaultLab;
use crate::components::plots::SweepPanel;
use crate::components::progress::JobProgress;
use crate::components::protocol::{self, ProtocolNote};
use crate::components::run_results::RunResults;
use crate::components::server_fields::ServerFields;
use crate::components::status::{Activity, JobStatus};
use crate::model::config::ExperimentConfig;
use crate::model::protocol::Protocol;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepResult};
use crate::runner::browser::new_run_id;
use crate::runner::messages::{Command, Job, Report, Start};
use crate::worker::client::{run_job, Host, JobCommands};

/// Logs panics to the console instead of leaving a silent dead page. Installed once.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("bench-ui panic: {info}").into());
    }));
}

/// What the user sets before a job: the two forms, the server and its bearer token.
#[derive(Clone, Copy)]
struct Inputs {
    config: RwSignal<ExperimentConfig>,
    sweep: RwSignal<SweepConfig>,
    base: RwSignal<String>,
    // The bearer token lives in this signal only: never in the URL, web storage or a cookie,
    // so it is gone with the page.
    token: RwSignal<String>,
}

impl Inputs {
    fn new(base_url: String) -> Self {
        Self {
            config: RwSignal::new(ExperimentConfig::default()),
            sweep: RwSignal::new(SweepConfig::default()),
            base: RwSignal::new(base_url),
            token: RwSignal::new(String::new()),
        }
    }

    /// The most contenders the forms would run at once.
    fn contenders(self) -> Signal<u32> {
        Signal::derive(move || {
            let sweep_max = self.sweep.with(|s| s.contender_counts().last().copied());
            self.config.with(|c| c.sessions).max(sweep_max.unwrap_or(0))
        })
    }

    /// The job as the worker gets it: with the server and the token (in the message only).
    fn start(self, job: Job, run_id: String) -> Start {
        Start {
            job,
            run_id,
            base_url: self.base.get_untracked(),
            token: self.token.get_untracked(),
        }
    }
}

/// What the jobs reported. Only `Jobs` writes it; the page's parts get read-only views.
#[derive(Clone, Copy)]
struct Outcome {
    record: RwSignal<Option<RunRecord>>,
    sweep: RwSignal<SweepResult>,
    simulated: RwSignal<SweepResult>,
    protocol: RwSignal<Protocol>,
    error: RwSignal<Option<String>>,
    // Where the last job ran: the experiment worker, or the page when none started.
    host: RwSignal<Option<Host>>,
}

impl Outcome {
    fn new(inputs: Inputs) -> Self {
        // Until the first API request is timed: the page's own protocol, when it came from
        // the server the requests go to.
        let protocol = if inputs.base.with_untracked(|b| b.trim().is_empty()) {
            protocol::page_protocol()
        } else {
            Protocol::Unknown
        };
        Self {
            record: RwSignal::new(None),
            sweep: RwSignal::new(SweepResult::default()),
            simulated: RwSignal::new(SweepResult::default()),
            protocol: RwSignal::new(protocol),
            error: RwSignal::new(None),
            host: RwSignal::new(None),
        }
    }

    /// Adopts a report of the job running.
    fn adopt(self, report: Report) {
        if let Some(r) = report.record {
            self.record.set(Some(r));
        }
        if let Some(s) = report.sweep {
            self.sweep.set(s);
        }
        if let Some(s) = report.simulated {
            self.simulated.set(s);
        }
        if let Some(p) = report.protocol {
            self.protocol.set(p);
        }
        if let Some(e) = report.error {
            self.error.set(Some(e));
        }
    }

    /// The error to show: the page's own (the form, the server), else the run's.
    fn shown_error(self) -> Signal<Option<String>> {
        Signal::derive(move || {
            self.error.get().or_else(|| {
                self.record
                    .with(|r| r.as_ref().and_then(|r| r.error.clone()))
            })
        })
    }
}

/// The Run / Sweep / Cancel actions: one job at a time, its reports adopted into `Outcome`.
#[derive(Clone, Copy)]
struct Jobs {
    inputs: Inputs,
    outcome: Outcome,
    activity: RwSignal<Activity>,
    // How many runs the sweep in progress has in all, for its progress.
    sweep_runs: RwSignal<usize>,
    // Where Cancel goes.
    commands: JobCommands,
}

impl Jobs {
    fn new(inputs: Inputs, outcome: Outcome) -> Self {
        Self {
            inputs,
            outcome,
            activity: RwSignal::new(Activity::Idle),
            sweep_runs: RwSignal::new(0),
            commands: JobCommands::default(),
        }
    }

    /// Starts `job` in a fresh engine and adopts its reports until it ends; an invalid
    /// form's error is shown instead.
    fn start(self, job: Result<Job, String>, activity: Activity) {
        let job = match job {
            Ok(job) => job,
            Err(e) => return self.outcome.error.set(Some(e)),
        };
        self.outcome.error.set(None);
        if activity == Activity::Sweeping {
            self.outcome.simulated.set(SweepResult::default());
        }
        let commands = self.commands.next_job();
        self.activity.set(activity);
        let start = self.inputs.start(job, new_run_id());
        let host = self.outcome.host;
        spawn_local(async move {
            let adopt = move |report| self.outcome.adopt(report);
            run_job(start, commands, |h| host.set(Some(h)), &adopt).await;
            self.activity.set(Activity::Idle);
        });
    }

    /// A live run of the experiment form.
    fn run(self) {
        let cfg = self.inputs.config.get_untracked();
        let job = cfg
            .validate()
            .map(|()| Job::Run(cfg))
            .map_err(|e| format!("Fix the form first — {e}"));
        self.start(job, Activity::Running);
    }

    /// The sweep of the sweep form: in the simulation, then against the live server.
    fn sweep(self) {
        let cfg = self.inputs.sweep.get_untracked();
        let invalid = cfg
            .runs()
            .first()
            .and_then(|(n, s)| cfg.experiment(*n, *s, 0).validate().err())
            .map(|e| format!("Fix the sweep form first — {e}"));
        self.sweep_runs.set(cfg.runs().len());
        let job = match invalid {
            Some(e) => Err(e),
            None => Ok(Job::Sweep(cfg)),
        };
        self.start(job, Activity::Sweeping);
    }

    /// Asks the job running to stop.
    fn cancel(self) {
        self.commands.send(Command::Cancel);
    }
}

/// The whole dashboard. `base_url` presets the server field ("" = same origin).
#[component]
pub fn App(
    /// Initial server base URL; empty for the origin that served the page.
    #[prop(optional, into)]
    base_url: String,
) -> impl IntoView {
    let inputs = Inputs::new(base_url);
    let outcome = Outcome::new(inputs);
    let jobs = Jobs::new(inputs, outcome);
    let record = outcome.record.read_only();
    let sweep = outcome.sweep.read_only();
    let activity = jobs.activity.read_only();
    view! {
        <PageHeader>
            <ProtocolNote protocol=outcome.protocol.read_only() contenders=inputs.contenders()/>
        </PageHeader>
        <section class="controls">
            <ServerFields base=inputs.base token=inputs.token/>
            <div class="forms">
                <ConfigForm config=inputs.config/>
                <SweepForm sweep=inputs.sweep/>
            </div>
            <JobButtons busy=Signal::derive(move || activity.get().busy())
                on_run=move || jobs.run() on_sweep=move || jobs.sweep() on_cancel=move || jobs.cancel()
                record=record sweep=sweep/>
            <JobProgress activity=activity record=record sweep=sweep
                sweep_runs=jobs.sweep_runs.read_only()/>
            <JobStatus activity=activity record=record host=outcome.host.read_only()/>
        </section>
        <ErrorBanner message=outcome.shown_error()/>
        <RunResults record=record/>
        <SweepPanel sweep=sweep simulated=outcome.simulated.read_only()/>
        <FaultLab base=inputs.base token=inputs.token/>
    }
}
