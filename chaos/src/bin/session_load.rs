//! 10,000 open sessions heartbeating against one lock-server: spurious expiries, RSS,
//! heartbeat rate. Exit status 1 on any spurious expiry.
//!
//! `cargo run --release -p lock-chaos --bin session-load -- --sessions 10000 --hold-secs 60`
//!
//! With `--lock-ttl-ms T`, every session holds one lock of TTL `T` through the hold. With
//! `--compare-rounds N` as well, it measures the heartbeat cost of holding those locks: N
//! interleaved pairs of runs, one without locks and one with (each run its own server), and
//! prints both side by side with the ratios of heartbeat rate and server CPU.
//!
//! `cargo run --release -p lock-chaos --bin session-load -- --sessions 1000 --hold-secs 30 \
//!  --lock-ttl-ms 1000 --compare-rounds 2`

use std::time::Duration;

use clap::Parser;
use lock_chaos::load::{run, LoadConfig, LoadReport};

/// Many open sessions heartbeating against one lock-server.
#[derive(Parser)]
#[command(name = "session-load")]
struct Args {
    /// Sessions to open.
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,
    /// How long to keep them heartbeating, seconds.
    #[arg(long, default_value_t = 60)]
    hold_secs: u64,
    /// Session TTL, ms (the SDK heartbeats at a third of it).
    #[arg(long, default_value_t = 15_000)]
    session_ttl_ms: u64,
    /// Every session holds one lock of this TTL, ms (heartbeats then come every third of it).
    #[arg(long)]
    lock_ttl_ms: Option<u64>,
    /// Compare: this many interleaved pairs of runs without and with the locks.
    #[arg(long, requires = "lock_ttl_ms")]
    compare_rounds: Option<usize>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let config = LoadConfig {
        sessions: args.sessions,
        hold: Duration::from_secs(args.hold_secs),
        session_ttl: Duration::from_millis(args.session_ttl_ms),
        lock_ttl: args.lock_ttl_ms.map(Duration::from_millis),
    };
    let reports = match args.compare_rounds {
        None => vec![load(&config).await],
        Some(rounds) => compare(&config, rounds).await,
    };
    if reports
        .iter()
        .any(|r| r.lost_by_sdk > 0 || r.missing_at_end > 0 || r.locks_lost > 0)
    {
        std::process::exit(1);
    }
}

/// One run, printed.
async fn load(config: &LoadConfig) -> LoadReport {
    let dir = tempfile::Builder::new()
        .prefix("chaos-load-")
        .tempdir()
        .expect("temp dir");
    let r = run(config, dir.path()).await.expect("load run");
    println!(
        "sessions opened:      {} in {:?} ({} opens retried)",
        r.opened, r.open_time, r.open_retries
    );
    match config.lock_ttl {
        Some(ttl) => println!(
            "locks held:           one of {ttl:?} per session ({} lost)",
            r.locks_lost
        ),
        None => println!("locks held:           none"),
    }
    println!("held for:             {:?}", config.hold);
    println!(
        "heartbeats:           {} ({:.0}/s, {} failed)",
        r.heartbeats, r.heartbeat_rate, r.heartbeat_errors
    );
    println!(
        "server CPU:           {:.2} s ({:.0} % of one core)",
        r.server_cpu.as_secs_f64(),
        100.0 * r.server_cpu.as_secs_f64() / config.hold.as_secs_f64()
    );
    println!("lost by SDK:          {}", r.lost_by_sdk);
    println!("missing at end (L5):  {}", r.missing_at_end);
    println!(
        "server RSS:           idle {} KiB, peak {} KiB ({:.1} MB)",
        r.rss_idle_kib,
        r.rss_peak_kib,
        r.rss_peak_kib as f64 / 1024.0
    );
    r
}

/// `rounds` interleaved pairs (no locks, then locks), and the table of both with ratios.
async fn compare(config: &LoadConfig, rounds: usize) -> Vec<LoadReport> {
    let without = LoadConfig {
        lock_ttl: None,
        ..config.clone()
    };
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for round in 1..=rounds {
        println!("== round {round}: no locks");
        let none = load(&without).await;
        println!("== round {round}: one lock per session");
        let held = load(config).await;
        rows.push((round, none.clone(), held.clone()));
        all.extend([none, held]);
    }
    let cpu = |r: &LoadReport| r.server_cpu.as_secs_f64() / config.hold.as_secs_f64();
    println!();
    println!("| round | L2/s, no locks | L2/s, one lock each | ratio | server CPU, no locks | server CPU, one lock each | ratio |");
    println!("|---|---|---|---|---|---|---|");
    for (round, none, held) in rows {
        println!(
            "| {round} | {:.0} | {:.0} | {:.1}× | {:.1} % | {:.1} % | {:.1}× |",
            none.heartbeat_rate,
            held.heartbeat_rate,
            held.heartbeat_rate / none.heartbeat_rate,
            100.0 * cpu(&none),
            100.0 * cpu(&held),
            cpu(&held) / cpu(&none)
        );
    }
    all
}
