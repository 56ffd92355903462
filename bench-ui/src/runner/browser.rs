//! The runner in a browser global — the experiment worker's (`crate::worker`), or the page's
//! own when no worker can start: the SDK's browser seams, and a [`Job`] run to its end with
//! [`Report`]s at the dashboard's redraw cadence. Everything here is reached through the
//! global object (fetch, timers, `performance`), so it runs alike in a worker and a page.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select;
use lock_wasm::clock::Clock;
use lock_wasm::transport::Intercepted;
use lock_wasm::wasm::{FetchTransport, JsClock, LocalSpawner};
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming};

use crate::model::protocol::Protocol;

use super::lanes::{WaitLanes, WAIT_LANES};
use super::ledger::FetchLedger;
use super::messages::{Job, Report};
use super::recorder::Recorder;
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

/// Runs `job` to its end (or cancellation), handing `report` the record every [`REFRESH`]
/// ([`SWEEP_REFRESH`] during a sweep) and once more, `done`, at the end.
pub async fn execute(
    env: &Env,
    job: Job,
    run_id: &str,
    cancel: &CancelFlag,
    report: &dyn Fn(Report),
) {
    match job {
        Job::Run(config) => {
            let recorder = start_recorder(env, run_id, &config);
            let work = run_experiment(env, &recorder, cancel);
            let watch = every(REFRESH, || report(run_report(&recorder)));
            select(Box::pin(work), Box::pin(watch)).await;
            report(Report {
                done: true,
                ..run_report(&recorder)
            });
        }
        Job::Sweep(config) => {
            let state = SweepState::default();
            let work = run_sweep(env, &config, run_id, &state, cancel);
            let watch = every(SWEEP_REFRESH, || report(sweep_report(&state)));
            select(Box::pin(work), Box::pin(watch)).await;
            let last = sweep_report(&state);
            report(Report {
                error: last.sweep.as_ref().and_then(|s| s.error.clone()),
                done: true,
                ..last
            });
        }
    }
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
