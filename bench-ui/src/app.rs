//! `App`: the dashboard's state (signals) and the Run / Sweep / Cancel actions, which start
//! the runner in a local task and copy its record into the signals every
//! [`REFRESH`] while it runs.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select;
use leptos::prelude::*;
use leptos::task::spawn_local;
use lock_wasm::clock::Clock;
use lock_wasm::transport::Intercepted;
use lock_wasm::wasm::{FetchTransport, JsClock, LocalSpawner};

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
use crate::runner::lanes::{WaitLanes, WAIT_LANES};
use crate::runner::ledger::FetchLedger;
use crate::runner::recorder::Recorder;
use crate::runner::simulated::simulate_sweep;
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

/// The SDK's browser seams pointed at `base_url` ("" = the origin that served the page),
/// sending `token` as the bearer on every request when it is not empty (a server with an
/// auth file); requests that wait in the server's queue take lanes (`runner::lanes`). A
/// token that cannot be one is an error for the banner.
// The SDK's seams take `Arc`s; on wasm32 nothing is `Send` and needs not be (one thread).
#[allow(clippy::arc_with_non_send_sync)]
fn browser_env(base_url: &str, token: &str) -> Result<Env, String> {
    let base = base_url.trim();
    let mut transport = FetchTransport::new(base);
    let token = token.trim();
    if !token.is_empty() {
        transport = transport
            .with_token(token)
            .map_err(|e| format!("Fix the token first — {e}"))?;
    }
    let ledger = FetchLedger::new(base, transport.authorization());
    let clock: Arc<dyn Clock> = Arc::new(JsClock);
    Ok(Env {
        transport: Arc::new(Intercepted::new(
            Arc::new(transport),
            WaitLanes::new(clock.clone(), WAIT_LANES),
        )),
        clock,
        spawner: Arc::new(LocalSpawner),
        ledger: Rc::new(ledger),
    })
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
        let env = match browser_env(&base.get_untracked(), &token.get_untracked()) {
            Ok(env) => env,
            Err(e) => return error.set(Some(e)),
        };
        let flag = begin();
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
        let env = match browser_env(&base.get_untracked(), &token.get_untracked()) {
            Ok(env) => env,
            Err(e) => return error.set(Some(e)),
        };
        let flag = begin();
        let state = SweepState::default();
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
                "Full jitter is the SDK's own acquire loop, and so is the server queue (each L4 waits in the key's FIFO queue on the server, waitMillis > 0); the other strategies exist only here, for comparison. "
                "A sweep also runs in the SDK's seeded simulation inside this page (no server), drawn beside the live one."
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
