//! The measured sections of the doc, one module each: what a section runs, its Markdown
//! body, and the summary rows of its targets. A section measures and renders; where its
//! results are written is [`crate::output`]'s, and which sections run is the command's.
//!
//! - [`sim`]: Brooker's experiment in simulation.
//! - [`server`]: lock-server vs the trivial handler, Redis and etcd.
//! - [`tls`]: lock-server over TLS (HTTP/2 and HTTP/1.1) vs plain HTTP/1.1.
//! - [`sweep`]: the backoff strategies against the live server; [`sweep_log`] re-renders it
//!   from a saved run.
//! - [`etcd`]: an etcd-backend replica vs raw etcd.
//! - [`queue`]: the server's wait queue vs full jitter.
//! - [`shared`]: shared holds: readers, a writer under a read load, a semaphore.
//! - [`dashboard_sweep`]: the dashboard's sweep in the browser beside the native one.
//! - [`heartbeat`]: L2's answer with many locks: full list, unchanged, delta.
//! - [`quick`]: the A/B used while profiling, printed only.
//!
//! Shared by several: [`interleaved`] (closed-loop windows of several targets, taken in
//! turn) and [`strategies`] (a figure per strategy and N: tables and charts).

pub mod dashboard_sweep;
pub mod etcd;
pub mod heartbeat;
pub mod interleaved;
pub mod queue;
pub mod quick;
pub mod server;
pub mod shared;
pub mod sim;
pub mod strategies;
pub mod sweep;
pub mod sweep_log;
pub mod tls;

use crate::output::Output;
use crate::summary::SummaryRow;

/// The knobs of the measurements: how long, how often, at which sizes.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Server bench: seconds per window.
    #[arg(long, default_value_t = 3)]
    pub seconds: u64,
    /// Server bench and live sweep: interleaved rounds (the run-to-run spread).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Simulation: experiments per point (Brooker: 100).
    #[arg(long, default_value_t = 100)]
    pub sim_runs: u32,
    /// Simulation: independent seeds (the spread of the per-point means).
    #[arg(long, default_value_t = 3)]
    pub sim_seeds: u64,
    /// Live sweep: interleaved rounds per N (the run-to-run spread).
    #[arg(long, default_value_t = 3)]
    pub sweep_rounds: usize,
    /// Live sweep: contender counts.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,20,30,40,50,60,70,80,90,100"
    )]
    pub sweep_n: Vec<usize>,
    /// Queue bench: interleaved rounds per N and backend (the run-to-run spread).
    #[arg(long, default_value_t = 3)]
    pub queue_rounds: usize,
    /// Queue bench: contender counts.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100")]
    pub queue_n: Vec<usize>,
    /// Heartbeat bench: locks the one session holds.
    #[arg(long, default_value_t = 20_000)]
    pub heartbeat_locks: usize,
}

/// What every section is measured with.
#[derive(Debug, Clone)]
pub struct Context {
    /// The knobs.
    pub settings: Settings,
    /// Where charts go (a section links them from its body).
    pub output: Output,
    /// Where the run takes place ([`crate::machine::describe`]).
    pub machine: String,
}

/// A measured section: its Markdown body, and its rows of the summary.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// The section's body, without its heading.
    pub body: String,
    /// Its targets, in the order the summary lists them.
    pub rows: Vec<SummaryRow>,
}

/// A section the full run measures.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    /// Its title in the doc (without the `## `).
    pub title: &'static str,
    /// What measures it.
    pub measure: fn(&Context) -> Measured,
}

/// The sections of a full run, in the order it measures them.
pub const FULL_RUN: [Section; 7] = [
    sim::SECTION,
    server::SECTION,
    tls::SECTION,
    sweep::SECTION,
    etcd::SECTION,
    queue::SECTION,
    shared::SECTION,
];
