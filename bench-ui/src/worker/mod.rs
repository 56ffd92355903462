//! The experiment engine: every job of the dashboard (a live run, a sweep and its
//! simulation, a fault-lab run) runs in a second wasm module built from this crate, in a
//! dedicated module Web Worker, off the page's main thread where Leptos renders. On the
//! page's thread every contender's answer waited behind rendering (20–60 ms at N = 50),
//! which stretched holds over several backoff windows and inflated the L4 calls the
//! dashboard measures. And the page's own module, holding none of it, is a third smaller.
//!
//! - [`entry`]: the engine (`www/worker.js` loads `pkg/engine/bench_engine.js` and calls
//!   `run_experiment_worker`): runs the job a [`Command`] starts with `runner::browser`,
//!   posting its reports; takes Cancel and the lab's faults injected by hand.
//! - [`client`]: the page's side: starts an engine per job, sends the job (with the bearer
//!   tokens, in the message only), adopts the reports, forwards the page's commands; when no
//!   worker starts, it imports the engine module into the page and runs it there.
//!
//! [`Command`]: crate::runner::messages::Command

pub mod client;
pub mod entry;
