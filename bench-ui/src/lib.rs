//! bench-ui: the contention dashboard. A Leptos (CSR) app that runs live lock
//! experiments against a real lock-server through the SDK (`lock-wasm`, used as a Rust
//! dependency with its fetch transport and JS-timer clock) and plots what happened in SVG.
//!
//! Layout:
//! - [`model`]: plain data and pure logic, host-tested: [`model::config`] (the form and its
//!   limits), [`model::record`] (one run's events), [`model::counters`],
//!   [`model::histogram`] (delays slept vs the uniform expectation), [`model::timeline`]
//!   (holder bars by mode from the L8 stream or, without one, L7 samples; client marks, the
//!   overlaps that must not happen), [`model::event_bars`] (bars from L8 events),
//!   [`model::server_clock`] (the server's times on the run's clock), [`model::coverage`]
//!   (what L7 sampling missed),
//!   [`model::concurrency`] (concurrent holders over time), [`model::mode_waits`] (readers'
//!   waits beside writers'), [`model::sweep`], [`model::export`] (JSON, CSV).
//! - [`plot`]: the charts as `lock_lab::chart::Chart`s. Host-tested.
//! - [`runner`]: runs experiments over the SDK's seams: contenders (the SDK's loop for full
//!   jitter, [`runner::comparison`] for the others), the L7 sampler, the L8 watchers, the
//!   fenced ledger, cancellation, sweeps.
//! - `components` and `app` (wasm32 only): the Leptos components and the `App` root;
//!   `run_dashboard` mounts it (called from `www/index.html`).
//! - `worker` (wasm32 only): every job (live runs, sweeps and their simulation, the fault
//!   lab) runs in the experiment engine, a second wasm module built from this crate, in a
//!   dedicated module Web Worker off the page's main thread; `run_experiment_worker` is its
//!   entry (called from `www/worker.js`, which loads `pkg/engine/bench_engine.js`). Without
//!   worker support the page imports the engine module and runs it itself
//!   (`run_engine_on_page`). The page's module (`pkg/bench_ui.js`) holds no experiment code,
//!   so a first visit downloads the dashboard only.
//!
//! The experiment code the dashboard shares with the bench lives in `lock-lab`: the four
//! backoff strategies (`lock_lab::strategy`), the comparison retry loop
//! (`lock_lab::comparison`), the chart geometry and its SVG text (`lock_lab::chart`).
//!
//! Invariants: full jitter is the SDK's acquire, unchanged (`runner::sdk`); no jitter, equal
//! jitter and decorrelated jitter exist only in `lock-lab`, never in the SDK. Readers (shared
//! holds) go through the SDK's acquire only, and write nothing to the fenced ledger.
//!
//! ASSUMPTIONS (values chosen here, not by the contract; each is documented where defined):
//! - Run defaults: 20 sessions, 1 key, 2 acquisitions each, 40 ms holds, 3 s TTL, backoff
//!   base 10 ms / cap 400 ms / budget 8 s / 40 attempts, seed 42, L7 sampled every 10 ms,
//!   full jitter ([`model::config`]): about 40 serialised grants, a few seconds.
//! - Sweep defaults: N = 10, 40, 70, 100 (step 30), 5 ms holds, Brooker's policy as in the
//!   native bench (base 5 ms, cap 2 s), budget 120 s, 1000 attempts, L7 sampled every
//!   250 ms ([`model::sweep`]).
//! - Over HTTP/1.1 a browser keeps at most 6 connections per server; the page names the
//!   protocol of its requests and warns above 6 contenders ([`model::protocol`]).
//! - Limits: sessions 1–200, keys 1–sessions, 1–20 acquisitions each, sampling 5 ms–10 s,
//!   readers 0–100 % (none by default), semaphore permits 1–10,000 (none by default: the
//!   readers of a read-write lock). Contender `i` is a reader when `⌊(i+1)·p/100⌋ > ⌊i·p/100⌋`.
//! - Every request times out after 5 s; the comparison loop budgets 5 ms of round trip
//!   before a sleep (`lock_lab::comparison::{REQUEST_TIMEOUT, RTT_ESTIMATE}`); the UI
//!   refreshes every 150 ms (a sweep every second); Cancel is noticed within 50 ms; the
//!   histogram has 12 bins.
//! - Keys are `bench/{runId}/k{i}` with a fresh run id per run; contender `i` is seeded with
//!   `seed · 1000003 + i`.

pub mod model;
pub mod plot;
pub mod runner;

#[cfg(target_arch = "wasm32")]
pub mod app;
#[cfg(target_arch = "wasm32")]
pub mod components;
#[cfg(target_arch = "wasm32")]
pub mod worker;

// Two wasm modules are built from this crate (`scripts/build-ui.sh`), each with its own
// exports, so that each links only the code its exports reach: the page (feature "page":
// the dashboard, no experiment code) and the engine (feature "engine": the runners, the SDK,
// its simulation; no Leptos). Tests and lints build both (the default).

/// Mounts the dashboard on `<body>`. Exported to JS; `www/index.html` calls it after
/// `init()`. Not a `#[wasm_bindgen(start)]` so the component tests, which link the same
/// crate, do not mount a second dashboard.
#[cfg(all(target_arch = "wasm32", feature = "page"))]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn run_dashboard() {
    app::install_panic_hook();
    leptos::mount::mount_to_body(|| leptos::view! { <app::App/> });
}

/// Runs the engine in a dedicated worker: listens for the page's commands and runs its jobs
/// off the page's main thread. Exported to JS; `www/worker.js` calls it after `init()`,
/// inside a dedicated module worker.
#[cfg(all(target_arch = "wasm32", feature = "engine"))]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn run_experiment_worker() {
    app::install_panic_hook();
    worker::entry::listen_in_worker();
}

/// The engine run on the page's own thread (no worker could start): the page's commands go
/// in through [`EnginePort::post`], its messages out through `on_message` (JSON text each).
#[cfg(all(target_arch = "wasm32", feature = "engine"))]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn run_engine_on_page(on_message: js_sys::Function) -> EnginePort {
    EnginePort(worker::entry::Engine::on_page(on_message))
}

/// The page's way into an engine on its own thread.
#[cfg(all(target_arch = "wasm32", feature = "engine"))]
#[wasm_bindgen::prelude::wasm_bindgen]
pub struct EnginePort(std::rc::Rc<worker::entry::Engine>);

#[cfg(all(target_arch = "wasm32", feature = "engine"))]
#[wasm_bindgen::prelude::wasm_bindgen]
impl EnginePort {
    /// Hands the engine one command's JSON text.
    pub fn post(&self, text: &str) {
        self.0.handle(text);
    }
}
