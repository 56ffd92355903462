//! 10,000 open sessions heartbeating against one lock-server: spurious expiries, RSS,
//! heartbeat rate. Exit status 1 on any spurious expiry.
//!
//! `cargo run --release -p lock-chaos --bin session-load -- --sessions 10000 --hold-secs 60`

use std::time::Duration;

use clap::Parser;
use lock_chaos::load::{run, LoadConfig};

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
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let config = LoadConfig {
        sessions: args.sessions,
        hold: Duration::from_secs(args.hold_secs),
        session_ttl: Duration::from_millis(args.session_ttl_ms),
    };
    let dir = tempfile::Builder::new()
        .prefix("chaos-load-")
        .tempdir()
        .expect("temp dir");
    let r = run(&config, dir.path()).await.expect("load run");
    println!(
        "sessions opened:      {} in {:?} ({} opens retried)",
        r.opened, r.open_time, r.open_retries
    );
    println!("held for:             {:?}", config.hold);
    println!(
        "heartbeats:           {} ({:.0}/s, {} failed)",
        r.heartbeats, r.heartbeat_rate, r.heartbeat_errors
    );
    println!("lost by SDK:          {}", r.lost_by_sdk);
    println!("missing at end (L5):  {}", r.missing_at_end);
    println!(
        "server RSS:           idle {} KiB, peak {} KiB ({:.1} MB)",
        r.rss_idle_kib,
        r.rss_peak_kib,
        r.rss_peak_kib as f64 / 1024.0
    );
    if r.lost_by_sdk > 0 || r.missing_at_end > 0 {
        std::process::exit(1);
    }
}
