//! 10,000 open sessions heartbeating against one lock-server: spurious expiries, RSS,
//! heartbeat rate. Exit status 1 on any spurious expiry.
//!
//! `cargo run --release -p lock-chaos --bin session-load -- --sessions 10000 --hold-secs 60`

use std::time::Duration;

use lock_chaos::load::{run, LoadConfig};

#[tokio::main]
async fn main() {
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
    let config = LoadConfig {
        sessions: value("--sessions", 10_000) as usize,
        hold: Duration::from_secs(value("--hold-secs", 60)),
        session_ttl: Duration::from_millis(value("--session-ttl-ms", 15_000)),
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
