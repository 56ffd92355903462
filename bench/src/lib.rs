//! The benchmark suite (`scripts/bench.sh` runs it; nothing here is a test's
//! pass/fail). It measures what a user would compare us on, side by side in one run on one
//! machine, and writes the owned sections of `docs/BENCHMARKS.md` plus SVG charts.
//!
//! Layout:
//! - [`occ_sim`]: Brooker's OCC experiment as a seeded discrete-event simulation, over the
//!   backoff strategies of `lock_lab::strategy` (experiment-only; the SDK ships full jitter
//!   alone).
//! - [`stats`]: quantiles, means, run-to-run spread, ratios.
//! - [`figures`]: the doc figures, `lock_lab`'s charts as standalone SVG files.
//! - [`doc`]: replaces owned `## ` sections of a Markdown file, keeping everyone else's.
//! - [`output`]: where a run's results go: the doc's sections and summary rows, the charts.
//! - [`summary`]: the summary's rows (target, measured, met) and its section.
//! - [`machine`]: the CPU, cores and load every section states.
//! - [`systems`]: the compared systems, started for the bench only on 127.0.0.1: lock-server
//!   (in process, on SQLite or as an etcd-backend replica), a trivial axum handler, Redis
//!   (two persistence modes), etcd.
//! - [`cycles`]: one acquire+release cycle per system, and the closed-loop load generator.
//! - [`live_sweep`]: N contenders on one key against the real server: the SDK's acquire loop
//!   vs `lock_lab`'s comparison loop, both over one counted transport.
//! - [`queue_bench`]: the server's wait queue vs full jitter on one hot key (SDK both ways),
//!   with utilisation and fairness figures.
//! - [`shared_bench`]: shared holds on the live server: readers on one key vs exclusive keys
//!   of their own, a writer's wait under a continuous read load, a semaphore's utilisation.
//! - [`dashboard`]: the dashboard's sweep in the browser as `tests/browser/sweep.mjs` saves
//!   it, to set beside the native sweep.
//! - [`soak`]: the server memory soak: the release lock-server as a child process, a long
//!   run of cycles, its RSS sampled (docs/RELIABILITY.md, "Server memory"; printed only).
//! - [`sections`]: one module per measured section of the doc (and `quick`, printed only):
//!   what it runs, its body and its summary rows.
//! - `bin/bench.rs`: the command
//!   (`bench all|sim|server|tls|etcd|sweep|sweep-log|queue|shared|heartbeat|dashboard-sweep|record|quick|soak`):
//!   which part runs, a `match` on it.

pub mod cycles;
pub mod dashboard;
pub mod doc;
pub mod figures;
pub mod live_sweep;
pub mod machine;
pub mod occ_sim;
pub mod output;
pub mod queue_bench;
pub mod sections;
pub mod shared_bench;
pub mod soak;
pub mod stats;
pub mod summary;
pub mod systems;
