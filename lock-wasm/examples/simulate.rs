//! Runs the seeded simulation over any number of seeds and prints the first failing one.
//!
//! `cargo run -p lock-wasm --example simulate -- --seeds 10000 --start 0 [--double-grant]
//! [--fast-expiry] [--lifo-queue] [--shared-beside-exclusive] [--ignore-limit]
//! [--readers-barge] [--faults] [--keep-going]` (the first six flags plant deliberate bugs: the run must
//! then fail; `--faults` injects infrastructure faults, as lock-chaos's `sim-faults` does;
//! `--keep-going` reports every failing seed instead of stopping at the first).

use lock_wasm::sim::{run_seeds, Faults, Injection};

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
    let seeds = value("--seeds", 1_000);
    let start = value("--start", 0);
    let faults = Faults {
        double_grant: args.iter().any(|a| a == "--double-grant"),
        fast_expiry: args.iter().any(|a| a == "--fast-expiry"),
        lifo_queue: args.iter().any(|a| a == "--lifo-queue"),
        shared_beside_exclusive: args.iter().any(|a| a == "--shared-beside-exclusive"),
        ignore_limit: args.iter().any(|a| a == "--ignore-limit"),
        readers_barge: args.iter().any(|a| a == "--readers-barge"),
        forget_tokens: args.iter().any(|a| a == "--forget-tokens"),
    };
    let injection = if args.iter().any(|a| a == "--faults") {
        Injection::Chaos
    } else {
        Injection::None
    };
    // Stop at the first failing seed, or (`--keep-going`) report every one, as sim-faults does.
    let keep_going = args.iter().any(|a| a == "--keep-going");
    let totals = run_seeds(start..start + seeds, faults, injection, |e| {
        eprintln!("FAILED {e}");
        keep_going
    });
    if !totals.failed.is_empty() {
        eprintln!(
            "{} of {seeds} seeds failed: {:?}",
            totals.failed.len(),
            totals.failed
        );
        std::process::exit(1);
    }
    println!(
        "{seeds} seeds from {start} passed: {} acquires, {} grants ({} shared), {} sessions lost",
        totals.acquires, totals.grants, totals.shared_grants, totals.sessions_lost
    );
}
