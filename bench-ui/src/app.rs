//! `App`: the dashboard's state (signals) and the Run / Sweep / Cancel actions, which run
//! the job in the experiment worker (`crate::worker`; on the page's own thread when no worker
//! starts) and adopt its reports into the signals as they come.

use std::cell::RefCell;
use std::time::Duration;

use leptos::prelude::*;
use leptos::task::spawn_local;
use lock_wasm::clock::Clock;
use lock_wasm::wasm::JsClock;

use crate::components::config_form::{ConfigForm, SweepForm};
use crate::components::counters::CountersPanel;
use crate::components::error_banner::ErrorBanner;
use crate::components::export::ExportButtons;
use crate::components::plots::{FairnessPanel, HistogramPanel, SweepPanel, TimelinePanel};
use crate::components::progress::ProgressBar;
use crate::components::protocol::{self, ProtocolNote};
use crate::model::config::ExperimentConfig;
use crate::model::protocol::Protocol;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepResult};
use crate::runner::browser::browser_env;
use crate::runner::messages::{Job, Report, Start};
use crate::runner::simulated::simulate_sweep;
use crate::runner::CancelFlag;
use crate::worker::client::{run_job, Host};

/// Logs panics to the console instead of leaving a silent dead page. Installed once.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("bench-ui panic: {info}").into());
    }));
}

/// A run id unique per page load and click: the epoch milliseconds in base 36.
fn new_run_id() -> String {
    let mut n = js_sys::Date::now() as u64;
    let mut out = Vec::new();
    while n > 0 {
        out.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// What is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Run,
    Sweep,
}

/// The whole dashboard. `base_url` presets the server field ("" = same origin).
#[component]
pub fn App(
    /// Initial server base URL; empty for the origin that served the page.
    #[prop(optional, into)]
    base_url: String,
) -> impl IntoView {
    let config = RwSignal::new(ExperimentConfig::default());
    let sweep_config = RwSignal::new(SweepConfig::default());
    let base = RwSignal::new(base_url);
    // The bearer token lives in this signal only: never in the URL, web storage or a cookie,
    // so it is gone with the page.
    let token = RwSignal::new(String::new());
    let record = RwSignal::new(None::<RunRecord>);
    let sweep = RwSignal::new(SweepResult::default());
    let simulated = RwSignal::new(SweepResult::default());
    let running = RwSignal::new(None::<Mode>);
    let error = RwSignal::new(None::<String>);
    let cancel = StoredValue::new_local(CancelFlag::default());
    let sweep_runs = RwSignal::new(0usize);
    // Where the last job ran: the experiment worker, or the page when none started.
    let host = RwSignal::new(None::<Host>);
    // Until the first API request is timed: the page's own protocol, when it came from the
    // server the requests go to.
    let protocol = RwSignal::new(if base.get_untracked().trim().is_empty() {
        protocol::page_protocol()
    } else {
        Protocol::Unknown
    });
    let contenders = Signal::derive(move || {
        let sweep_max = sweep_config.with(|s| s.contender_counts().last().copied());
        config.with(|c| c.sessions).max(sweep_max.unwrap_or(0))
    });

    let begin = move || -> CancelFlag {
        error.set(None);
        let flag = CancelFlag::default();
        cancel.set_value(flag.clone());
        flag
    };
    // Adopts a report of the job running into the signals.
    let adopt = move |report: Report| {
        if let Some(r) = report.record {
            record.set(Some(r));
        }
        if let Some(s) = report.sweep {
            sweep.set(s);
        }
        if let Some(p) = report.protocol {
            protocol.set(p);
        }
        if let Some(e) = report.error {
            error.set(Some(e));
        }
    };
    // The job as the worker gets it: with the server and the token (in the message only).
    let start_of = move |job: Job, run_id: String| Start {
        job,
        run_id,
        base_url: base.get_untracked(),
        token: token.get_untracked(),
    };

    let on_run = move |_| {
        let cfg = config.get_untracked();
        if let Err(e) = cfg.validate() {
            error.set(Some(format!("Fix the form first — {e}")));
            return;
        }
        let env = match browser_env(&base.get_untracked(), &token.get_untracked()) {
            Ok(env) => env,
            Err(e) => return error.set(Some(e)),
        };
        let flag = begin();
        let start = start_of(Job::Run(cfg), new_run_id());
        running.set(Some(Mode::Run));
        spawn_local(async move {
            run_job(env, start, &flag, |h| host.set(Some(h)), &adopt).await;
            running.set(None);
        });
    };

    let on_sweep = move |_| {
        let cfg = sweep_config.get_untracked();
        if let Some(e) = cfg
            .runs()
            .first()
            .map(|(n, s)| cfg.experiment(*n, *s, 0).validate())
            .unwrap_or(Ok(()))
            .err()
        {
            error.set(Some(format!("Fix the sweep form first — {e}")));
            return;
        }
        let env = match browser_env(&base.get_untracked(), &token.get_untracked()) {
            Ok(env) => env,
            Err(e) => return error.set(Some(e)),
        };
        let flag = begin();
        sweep_runs.set(cfg.runs().len());
        running.set(Some(Mode::Sweep));
        let run_id = new_run_id();
        spawn_local(async move {
            // The same sweep in the simulation first: page-local, seconds at most, and the
            // theory to read the live points against as they come in.
            let theory = RefCell::new(SweepResult::default());
            simulate_sweep(&cfg, &run_id, &theory, || async {
                simulated.set(theory.borrow().clone());
                // Let the page draw between points.
                JsClock.sleep(Duration::ZERO).await;
            })
            .await;
            simulated.set(theory.into_inner());
            let start = start_of(Job::Sweep(cfg), run_id);
            run_job(env, start, &flag, |h| host.set(Some(h)), &adopt).await;
            running.set(None);
        });
    };

    let on_cancel = move |_| cancel.with_value(CancelFlag::cancel);

    let counters =
        Signal::derive(move || record.with(|r| r.as_ref().map(|r| r.counters).unwrap_or_default()));
    let fraction = Signal::derive(move || match running.get() {
        Some(Mode::Sweep) => {
            let done = sweep.with(|s| s.points.len()) as f64;
            let current = record.with(|r| r.as_ref().map(RunRecord::progress).unwrap_or(0.0));
            ((done + current) / sweep_runs.get().max(1) as f64).min(1.0)
        }
        _ => record.with(|r| r.as_ref().map(RunRecord::progress).unwrap_or(0.0)),
    });
    let label = Signal::derive(move || {
        let state = match running.get() {
            Some(Mode::Run) => "running",
            Some(Mode::Sweep) => "sweeping",
            None => "idle",
        };
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
    let shown_error = Signal::derive(move || {
        error
            .get()
            .or_else(|| record.with(|r| r.as_ref().and_then(|r| r.error.clone())))
    });
    let busy = move || running.get().is_some();

    view! {
        <header>
            <h1>"Lock contention dashboard"</h1>
            <p class="lede">
                "Runs live contention experiments against the lock server through the SDK. "
                "Full jitter is the SDK's own acquire loop, and so is the server queue (each L4 waits in the key's FIFO queue on the server, waitMillis > 0); the other strategies exist only here, for comparison. "
                "A sweep also runs in the SDK's seeded simulation inside this page (no server), drawn beside the live one. "
                "Live, no jitter is never quite in step here: a browser takes tens of milliseconds to send a wave of N requests and read their answers (about 30 and 45 ms for 50 on two cores, where Node takes 2 and 6), which spreads each wave of its retries over several 5 ms backoff windows and narrows full jitter's lead; the simulation keeps the waves together."
            </p>
            <ProtocolNote protocol=protocol contenders=contenders/>
        </header>
        <section class="controls">
            <label class="field wide">
                <span>"server"</span>
                <input type="text" data-testid="field-base-url" placeholder="same origin (the server that served this page)"
                    prop:value=move || base.get()
                    on:input=move |ev| base.set(event_target_value(&ev))/>
            </label>
            <label class="field wide">
                <span>"token"</span>
                <input type="password" data-testid="field-token" autocomplete="off"
                    placeholder="none (a server without an auth file); kept in this page only"
                    prop:value=move || token.get()
                    on:input=move |ev| token.set(event_target_value(&ev))/>
            </label>
            <div class="forms">
                <ConfigForm config=config/>
                <SweepForm sweep=sweep_config/>
            </div>
            <div class="buttons">
                <button data-testid="run" disabled=busy on:click=on_run>"Run"</button>
                <button data-testid="sweep" disabled=busy on:click=on_sweep>"Sweep"</button>
                <button data-testid="cancel" disabled=move || !busy() on:click=on_cancel>"Cancel"</button>
                <ExportButtons record=record sweep=sweep/>
            </div>
            <ProgressBar fraction=fraction label=label/>
            <div class="status" data-testid="status"
                data-run-id=move || record.with(|r| r.as_ref().map(|r| r.run_id.clone()).unwrap_or_default())
                data-host=move || host.get().map(Host::label).unwrap_or_default()
                data-state=move || match running.get() {
                Some(Mode::Run) => "running",
                Some(Mode::Sweep) => "sweeping",
                None => "idle",
            }></div>
        </section>
        <ErrorBanner message=shown_error/>
        <section class="counters" data-testid="counters">
            <CountersPanel counters=counters/>
        </section>
        <div class="plots">
            <HistogramPanel record=record/>
            <TimelinePanel record=record/>
            <FairnessPanel record=record/>
        </div>
        <SweepPanel sweep=sweep simulated=simulated/>
    }
}
