//! The chaos command: lock-server + N contender processes + seeded faults + the checker.
//! Exit status 0 only when the checker found no violation and faults were injected.
//!
//! `cargo run -p lock-chaos --bin chaos -- --contenders 50 --duration-secs 240 --server-kills 20`
//! (add `--etcd-members 3 --etcd-kills 5` for the etcd backend with etcd leader kills,
//! `--wait-ms 1000` for contenders that wait in the server's queue, and `--readers 8
//! --writers 4 --semaphore-holders 8 --permits 3` for shared holds beside the exclusive ones)

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use lock_chaos::run::{run, ChaosConfig, Mix};

/// Chaos run settings (defaults: the long run in docs/RELIABILITY.md).
#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value_t = 50)]
    contenders: usize,
    #[arg(long, default_value_t = 5)]
    keys: usize,
    #[arg(long, default_value_t = 240)]
    duration_secs: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 40)]
    pauses: usize,
    #[arg(long, default_value_t = 20)]
    server_kills: usize,
    /// Output directory (histories, server log); default a fresh dir under /tmp.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run on the etcd backend over this many etcd members started on 127.0.0.1 (0: SQLite).
    #[arg(long, default_value_t = 0)]
    etcd_members: usize,
    /// SIGKILLs of the etcd leader, each followed by a restart (needs --etcd-members ≥ 3).
    #[arg(long, default_value_t = 0)]
    etcd_kills: usize,
    /// `waitMillis` of the contenders' L4s (0: full-jitter polling; more: the server's queue).
    #[arg(long, default_value_t = 0)]
    wait_ms: u64,
    /// Readers (shared, no limit) of the read-write key `chaos/rw`.
    #[arg(long, default_value_t = 0)]
    readers: usize,
    /// Writers (exclusive) of the read-write key.
    #[arg(long, default_value_t = 0)]
    writers: usize,
    /// Holders of the semaphore key `chaos/sem`.
    #[arg(long, default_value_t = 0)]
    semaphore_holders: usize,
    /// The semaphore's permits.
    #[arg(long, default_value_t = 3)]
    permits: u32,
    /// Extra lock-server arguments, e.g. `--server-arg=--default-lock-ttl-ms=5000`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Only re-run the checker on a merged history file from an earlier run.
    #[arg(long)]
    check: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if let Some(path) = &args.check {
        let events = lock_chaos::history::read_history(path).expect("read history");
        let report = lock_chaos::checker::check(&events, Default::default());
        println!(
            "operations: {}, faults: {:?}, violations: {}",
            report.operations(),
            report.faults,
            report.violations.len()
        );
        for v in &report.violations {
            println!("  {:?}: {}", v.check, v.message);
        }
        std::process::exit(i32::from(!report.violations.is_empty()));
    }
    let out = args.out.unwrap_or_else(|| {
        tempfile::Builder::new()
            .prefix("chaos-run-")
            .tempdir()
            .expect("temp dir")
            .keep()
    });
    let mut config = ChaosConfig::long(out, args.seed);
    config.contenders = args.contenders;
    config.keys = args.keys;
    config.duration = Duration::from_secs(args.duration_secs);
    config.pauses = args.pauses;
    config.server_kills = args.server_kills;
    config.server_args = args.server_args;
    config.etcd_members = args.etcd_members;
    config.etcd_kills = args.etcd_kills;
    config.wait = Duration::from_millis(args.wait_ms);
    config.mix = Mix {
        readers: args.readers,
        writers: args.writers,
        semaphore_holders: args.semaphore_holders,
        permits: args.permits,
    };
    let outcome = run(&config).expect("chaos run");
    let r = &outcome.report;
    println!("history:              {}", outcome.history.display());
    println!(
        "contenders:           {} exclusive, {:?}",
        config.contenders, config.mix
    );
    println!("operations:           {}", r.operations());
    println!(
        "  acquires / grants:  {} / {} ({} shared)",
        r.acquires, r.grants, r.shared_grants
    );
    println!("  releases (204):     {}", r.releases);
    println!(
        "  ledger writes:      {} accepted, {} fenced out, {} indeterminate",
        r.ledger_writes[0], r.ledger_writes[1], r.ledger_writes[2]
    );
    println!("  L7 samples:         {}", r.samples);
    println!("  ledger reads:       {}", r.ledger_reads);
    println!("most holders in one L7: {:?}", r.most_holders);
    println!("faults injected:      {:?}", r.faults);
    println!(
        "worst acquire overrun: {} ms past budget (+pauses)",
        r.worst_budget_overrun_micros / 1_000
    );
    println!("server peak RSS:      {} KiB", outcome.server_peak_rss_kib);
    println!("violations:           {}", r.violations.len());
    for v in r.violations.iter().take(20) {
        println!("  {:?}: {}", v.check, v.message);
    }
    if !r.violations.is_empty() || r.faults.is_empty() {
        std::process::exit(1);
    }
}
