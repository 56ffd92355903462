//! The experiment worker: live runs and sweeps run in a dedicated module Web Worker, off the
//! page's main thread, where Leptos renders. On the page's thread every contender's answer
//! waited behind rendering (20–60 ms at N = 50), which stretched holds over several backoff
//! windows and inflated the L4 calls the dashboard measures.
//!
//! - [`entry`]: inside the worker (`www/worker.js` loads the page's own `pkg/bench_ui.js`
//!   and calls `run_experiment_worker`): runs the job a [`Command`] starts with
//!   `runner::browser`, posting its reports.
//! - [`client`]: the page's side: starts the worker, sends the job (with the bearer token,
//!   in the message only), adopts the reports, forwards Cancel; falls back to the page's own
//!   thread when no worker starts.
//!
//! [`Command`]: crate::runner::messages::Command

pub mod client;
pub mod entry;
