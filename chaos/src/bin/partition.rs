//! The partition command: three etcd members and two lock-server replicas, each in a network
//! namespace of its own, the chaos workload through both replicas, a seeded nemesis of link
//! cuts and SIGSTOPs, then the checker (`lock_chaos::partition`). Runs as root. Exit status 0
//! only when the checker found no violation and every kind of fault was injected.
//!
//! `target/debug/partition --duration-secs 600 --seed 5` (docs/RELIABILITY.md, "Partitions")

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use lock_chaos::partition::{run, Nemesis, PartitionConfig};

/// Partition run settings (defaults: the long run in docs/RELIABILITY.md).
#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Exclusive contenders (besides 2 readers, 2 writers, 2 semaphore holders).
    #[arg(long, default_value_t = 16)]
    contenders: usize,
    #[arg(long, default_value_t = 3)]
    keys: usize,
    /// Holder pauses (SIGSTOP past the TTL).
    #[arg(long, default_value_t = 30)]
    pauses: usize,
    /// Output directory (histories, logs); default a fresh dir under /tmp.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    let out = args.out.unwrap_or_else(|| {
        tempfile::Builder::new()
            .prefix("partition-run-")
            .tempdir()
            .expect("temp dir")
            .keep()
    });
    let mut config = PartitionConfig::long(out, args.seed);
    config.chaos.duration = Duration::from_secs(args.duration_secs);
    config.chaos.contenders = args.contenders;
    config.chaos.keys = args.keys;
    config.chaos.pauses = args.pauses;
    let outcome = match run(&config) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("partition run failed: {e}");
            std::process::exit(2);
        }
    };
    let r = &outcome.report;
    println!("history:              {}", outcome.history.display());
    println!("operations:           {}", r.operations());
    println!(
        "  acquires / grants:  {} / {} ({} shared); per replica {:?}; during faults {}",
        r.acquires,
        r.grants,
        r.shared_grants,
        outcome.grants_per_replica,
        outcome.grants_during_faults
    );
    println!("  releases (204):     {}", r.releases);
    println!(
        "  ledger writes:      {} accepted, {} fenced out, {} indeterminate",
        r.ledger_writes[0], r.ledger_writes[1], r.ledger_writes[2]
    );
    println!("  L7 samples:         {}", r.samples);
    println!("faults injected:      {:?}", r.faults);
    println!(
        "worst acquire overrun: {} ms past budget (+pauses)",
        r.worst_budget_overrun_micros / 1_000
    );
    println!("replica peak RSS:     {} KiB", outcome.replica_peak_rss_kib);
    println!("violations:           {}", r.violations.len());
    for v in r.violations.iter().take(20) {
        println!("  {:?}: {}", v.check, v.message);
    }
    let every_kind = Nemesis::ALL.iter().all(|k| r.faults.contains_key(k.name()));
    if !r.violations.is_empty() || !every_kind {
        std::process::exit(1);
    }
}
