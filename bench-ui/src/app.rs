//! `App`: the dashboard's state (signals) and the Run / Sweep / Cancel actions, which start
//! the runner in a local task and copy its record into the signals every
//! [`REFRESH`] while it runs.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select;
use leptos::prelude::*;
use leptos::task::spawn_local;
use lock_wasm::clock::Clock;
use lock_wasm::wasm::{FetchTransport, JsClock, LocalSpawner};

use crate::components::config_form::{ConfigForm, SweepForm};
use crate::components::counters::CountersPanel;
use crate::components::error_banner::ErrorBanner;
use crate::components::export::ExportButtons;
use crate::components::plots::{HistogramPanel, SweepPanel, TimelinePanel};
use crate::components::progress::ProgressBar;
use crate::components::protocol::{self, ProtocolNote};
use crate::model::config::ExperimentConfig;
use crate::model::protocol::Protocol;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepResult};
use crate::runner::ledger::FetchLedger;
use crate::runner::recorder::Recorder;
use crate::runner::sweep::{run_sweep, SweepState};
use crate::runner::{run_experiment, start_recorder, CancelFlag, Env};

/// How often the UI copies the running record into its signals (ASSUMPTION: 150 ms is
/// smooth enough for counters and cheap enough for 200 sessions' records).
pub const REFRESH: Duration = Duration::from_millis(150);

/// Logs panics to the console instead of leaving a silent dead page. Installed once.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("bench-ui panic: {info}").into());
    }));
}

/// The SDK's browser seams pointed at `base_url` ("" = the origin that served the page).
fn browser_env(base_url: &str) -> Env {
    let base = base_url.trim();
    Env {
        transport: Arc::new(FetchTransport::new(base)),
        clock: Arc::new(JsClock),
        spawner: Arc::new(LocalSpawner),
        ledger: Rc::new(FetchLedger::new(base)),
    }
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

/// Copies the record into `target`, and the protocol of the latest requests into
/// `protocol`, until dropped.
async fn refresh_forever(
    recorder: Recorder,
    target: RwSignal<Option<RunRecord>>,
    protocol: RwSignal<Protocol>,
) {
    loop {
        target.set(Some(recorder.snapshot()));
        note_protocol(protocol);
        JsClock.sleep(REFRESH).await;
    }
}

/// Sets `protocol` from the latest API requests the browser timed, if any.
fn note_protocol(protocol: RwSignal<Protocol>) {
    if let Some(seen) = protocol::api_protocol() {
        protocol.set(seen);
    }
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
    let record = RwSignal::new(None::<RunRecord>);
    let sweep = RwSignal::new(SweepResult::default());
    let running = RwSignal::new(None::<Mode>);
    let error = RwSignal::new(None::<String>);
    let cancel = StoredValue::new_local(CancelFlag::default());
    let sweep_runs = RwSignal::new(0usize);
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

    let on_run = move |_| {
        let cfg = config.get_untracked();
        if let Err(e) = cfg.validate() {
            error.set(Some(format!("Fix the form first — {e}")));
            return;
        }
        let flag = begin();
        let env = browser_env(&base.get_untracked());
        let recorder = start_recorder(&env, &new_run_id(), &cfg);
        running.set(Some(Mode::Run));
        spawn_local(async move {
            let work = run_experiment(&env, &recorder, &flag);
            select(
                Box::pin(work),
                Box::pin(refresh_forever(recorder.clone(), record, protocol)),
            )
            .await;
            record.set(Some(recorder.snapshot()));
            note_protocol(protocol);
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
        let flag = begin();
        let env = browser_env(&base.get_untracked());
        let state = SweepState::default();
        sweep_runs.set(cfg.runs().len());
        running.set(Some(Mode::Sweep));
        let run_id = new_run_id();
        spawn_local(async move {
            let work = run_sweep(&env, &cfg, &run_id, &state, &flag);
            let watch = {
                let state = state.clone();
                async move {
                    loop {
                        sweep.set(state.snapshot());
                        if let Some(current) = state.current() {
                            record.set(Some(current.snapshot()));
                        }
                        note_protocol(protocol);
                        JsClock.sleep(REFRESH).await;
                    }
                }
            };
            select(Box::pin(work), Box::pin(watch)).await;
            let result = state.snapshot();
            if let Some(e) = &result.error {
                error.set(Some(e.clone()));
            }
            sweep.set(result);
            if let Some(current) = state.current() {
                record.set(Some(current.snapshot()));
            }
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
                "Full jitter is the SDK's own acquire loop; the other strategies exist only here, for comparison."
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
        </div>
        <SweepPanel sweep=sweep/>
    }
}
