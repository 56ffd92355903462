//! Runs the SDK's seeded simulation with injected faults over many seeds and prints totals;
//! exits 1 with the first failing seed (replay it with `--start SEED --seeds 1`).
//!
//! `cargo run --release -p lock-chaos --bin sim-faults -- --seeds 10000`

use lock_chaos::sim_faults::{run_seed, FaultCounts};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} needs a number"))
            })
            .unwrap_or(default)
    };
    let seeds = value("--seeds", 10_000);
    let start = value("--start", 0);
    let (mut acquires, mut grants, mut lost) = (0, 0, 0);
    let mut faults = FaultCounts::default();
    let mut failed = Vec::new();
    for seed in start..start + seeds {
        match run_seed(seed) {
            Ok(r) => {
                acquires += r.acquires;
                grants += r.grants;
                lost += r.sessions_lost;
                faults.not_leader += r.faults.not_leader;
                faults.dropped += r.faults.dropped;
                faults.delayed += r.faults.delayed;
                faults.pauses += r.faults.pauses;
            }
            Err(e) => {
                eprintln!("FAILED {e}");
                failed.push(seed);
            }
        }
    }
    println!(
        "{seeds} seeds from {start}: {} failed; {acquires} acquires, {grants} grants, {lost} sessions lost",
        failed.len()
    );
    println!(
        "faults injected: {} 503 answers, {} dropped answers, {} delay spikes, {} paused clients",
        faults.not_leader, faults.dropped, faults.delayed, faults.pauses
    );
    if !failed.is_empty() {
        println!("failing seeds: {failed:?}");
        std::process::exit(1);
    }
}
