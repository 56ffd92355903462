//! Runs the SDK's seeded simulation with injected faults (`lock_wasm::sim` with
//! `Injection::Chaos`: 503 bursts, dropped answers, delay spikes, frequent pauses) over many
//! seeds and prints totals; exits 1 with the failing seeds (replay one with
//! `--start SEED --seeds 1`).
//!
//! `cargo run --release -p lock-chaos --bin sim-faults -- --seeds 10000`

use clap::Parser;
use lock_wasm::sim::{run_seeds, Faults, Injection};

/// The SDK's seeded simulation with injected faults, over consecutive seeds.
#[derive(Debug, Parser)]
#[command(name = "sim-faults")]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 10_000)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    start: u64,
}

fn main() {
    let Args { seeds, start } = Args::parse();
    let totals = run_seeds(
        start..start + seeds,
        Faults::default(),
        Injection::Chaos,
        |e| {
            eprintln!("FAILED {e}");
            true // report every failing seed
        },
    );
    let faults = totals.faults;
    println!(
        "{seeds} seeds from {start}: {} failed; {} acquires, {} grants ({} shared), {} sessions lost",
        totals.failed.len(),
        totals.acquires,
        totals.grants,
        totals.shared_grants,
        totals.sessions_lost
    );
    println!(
        "faults injected: {} 503 NOT_LEADER and {} 503 STORE_UNAVAILABLE answers, {} dropped answers, {} delay spikes, {} paused clients",
        faults.not_leader, faults.store_unavailable, faults.dropped, faults.delayed, faults.pauses
    );
    if !totals.failed.is_empty() {
        println!("failing seeds: {:?}", totals.failed);
        std::process::exit(1);
    }
}
