//! The runner in a browser global — the experiment worker's (`crate::worker`), or the page's
//! when no worker starts and the page loads the engine module itself: the SDK's browser
//! seams, and a [`Start`]ed job run to its end with [`Report`]s at the dashboard's redraw
//! cadence. Everything here is reached through the global object (fetch, timers,
//! `performance`), so it runs alike in a worker and a page.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use futures::future::{pending, select};
use futures::StreamExt;
use lock_wasm::clock::Clock;
use lock_wasm::transport::Intercepted;
use lock_wasm::wasm::{FetchTransport, JsClock, LocalSpawner};
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming};

use crate::model::lab_simulated::simulate;
use crate::model::protocol::Protocol;
use crate::model::sweep::{SweepConfig, SweepResult};

use super::admin::FetchAdmin;
use super::lab::LabRun;
use super::lanes::{WaitLanes, WAIT_LANES};
use super::ledger::FetchLedger;
use super::messages::{Injection, Job, LabJob, Report, Start};
use super::recorder::Recorder;
use super::simulated::simulate_sweep;
use super::sweep::{run_sweep, SweepState};
use super::{run_experiment, start_recorder, CancelFlag, Env};

/// A run id unique per page load and click: the epoch milliseconds in base 36.
pub(crate) fn new_run_id() -> String {
    let mut n = js_sys::Date::now() as u64;
    let mut out = Vec::new();
    while n > 0 {
        out.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// How often a run reports its record (ASSUMPTION: 150 ms is smooth enough for counters and
/// cheap enough for 200 sessions' records).
pub const REFRESH: Duration = Duration::from_millis(150);

/// The same during a sweep (ASSUMPTION: 1 s). Each report is serialised in the worker and
/// redrawn on the page; a sweep is timed, and measured at N = 50 with the contenders on the
/// page's thread, redrawing every 150 ms took 5 of the renderer's 12 CPU seconds of a sweep.
pub const SWEEP_REFRESH: Duration = Duration::from_secs(1);

/// The SDK's browser seams pointed at `base_url` ("" = the origin that served the page),
/// sending `token` as the bearer on every request when it is not empty (a server with an
/// auth file); requests that wait in the server's queue take lanes (`runner::lanes`). A
/// token that cannot be one is an error for the banner.
// The SDK's seams take `Arc`s; on wasm32 nothing is `Send` and needs not be (one thread).
#[allow(clippy::arc_with_non_send_sync)]
pub fn browser_env(base_url: &str, token: &str) -> Result<Env, String> {
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

/// Runs the job of `start` to its end (or cancellation), handing `report` where it stands
/// every [`REFRESH`] ([`SWEEP_REFRESH`] during a sweep) and once more, `done`, at the end.
/// A lab run takes the faults injected by hand from `injections`.
pub async fn execute(
    start: Start,
    cancel: &CancelFlag,
    injections: UnboundedReceiver<Injection>,
    report: &dyn Fn(Report),
) {
    let env = match browser_env(&start.base_url, &start.token) {
        Ok(env) => env,
        Err(e) => return report(Report::failed(e)),
    };
    let run_id = start.run_id.as_str();
    match start.job {
        Job::Run(config) => {
            let recorder = start_recorder(&env, run_id, &config);
            let work = run_experiment(&env, &recorder, cancel);
            let watch = every(REFRESH, || report(run_report(&recorder)));
            select(Box::pin(work), Box::pin(watch)).await;
            report(Report {
                done: true,
                ..run_report(&recorder)
            });
        }
        Job::Sweep(config) => {
            simulate_first(&config, run_id, report).await;
            let state = SweepState::default();
            let work = run_sweep(&env, &config, run_id, &state, cancel);
            let watch = every(SWEEP_REFRESH, || report(sweep_report(&state)));
            select(Box::pin(work), Box::pin(watch)).await;
            let last = sweep_report(&state);
            report(Report {
                error: last.sweep.as_ref().and_then(|s| s.error.clone()),
                done: true,
                ..last
            });
        }
        Job::Lab(job) => lab(&env, &start.base_url, job, run_id, injections, report).await,
    }
}

/// The sweep in the simulation (`super::simulated`): seconds of CPU at most, and the theory
/// to read the live points against as they come in; reported after each point.
async fn simulate_first(config: &SweepConfig, run_id: &str, report: &dyn Fn(Report)) {
    let theory = RefCell::new(SweepResult::default());
    let simulated = |result: SweepResult| Report {
        simulated: Some(result),
        ..Report::default()
    };
    simulate_sweep(config, run_id, &theory, || async {
        report(simulated(theory.borrow().clone()));
        // Yields, so a Cancel sent meanwhile is taken (the live sweep then stops at once).
        JsClock.sleep(Duration::ZERO).await;
    })
    .await;
    report(simulated(theory.into_inner()));
}

/// A fault-lab run: live (faults injected by hand as they come) and, reported first, in the
/// simulation.
async fn lab(
    env: &Env,
    base_url: &str,
    job: LabJob,
    run_id: &str,
    mut injections: UnboundedReceiver<Injection>,
    report: &dyn Fn(Report),
) {
    report(Report {
        lab_simulated: Some(simulate(&job.form)),
        ..Report::default()
    });
    let admin = Rc::new(FetchAdmin::new(base_url, &job.admin_token));
    let run = LabRun::new(env, admin, run_id, job.form);
    let injected = async {
        while let Some(i) = injections.next().await {
            // Concurrently: a revoke waits for its R1 answer.
            let run = run.clone();
            wasm_bindgen_futures::spawn_local(async move {
                run.inject(i.side, i.contender, i.fault).await
            });
        }
        pending::<()>().await
    };
    let lab_report = || Report {
        lab: Some(run.snapshot()),
        ..Report::default()
    };
    let watch = every(REFRESH, || report(lab_report()));
    let side_work = select(Box::pin(watch), Box::pin(injected));
    select(Box::pin(run.run()), side_work).await;
    report(Report {
        done: true,
        ..lab_report()
    });
}

/// Calls `f` now and every `period`, until dropped.
async fn every(period: Duration, f: impl Fn()) {
    loop {
        f();
        JsClock.sleep(period).await;
    }
}

fn run_report(recorder: &Recorder) -> Report {
    Report {
        record: Some(recorder.snapshot()),
        protocol: api_protocol(),
        ..Report::default()
    }
}

fn sweep_report(state: &SweepState) -> Report {
    Report {
        record: state.current().map(|r| r.snapshot()),
        sweep: Some(state.snapshot()),
        protocol: api_protocol(),
        ..Report::default()
    }
}

/// This global's `performance` (a page's or a worker's: each times its own requests).
fn performance() -> Option<Performance> {
    js_sys::Reflect::get(&js_sys::global(), &"performance".into())
        .ok()?
        .dyn_into()
        .ok()
}

/// The protocol of the latest API request (`/v1/…`) this global timed since the last call,
/// if any. Clears the resource-timing buffer: it holds 250 entries and then drops new ones,
/// so without the clearing a long run would only ever show its first requests.
fn api_protocol() -> Option<Protocol> {
    let performance = performance()?;
    let latest = performance
        .get_entries_by_type("resource")
        .iter()
        .rev()
        .filter_map(|entry| entry.dyn_into::<PerformanceResourceTiming>().ok())
        .find(|entry| entry.name().contains("/v1/"))
        .map(|entry| Protocol::from_next_hop(&entry.next_hop_protocol()));
    performance.clear_resource_timings();
    latest
}
