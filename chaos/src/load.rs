//! Session load: many open sessions heartbeating through the native SDK against one server.
//! Measures spurious expiries (sessions the SDK declared lost, or the server no longer knows
//! at the end, with no fault injected), server RSS, and heartbeat traffic.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_lab::counting::{Counting, Operation};
use lock_lab::native::client_over;
use lock_wasm::native::HttpTransport;
use lock_wasm::ClientConfig;

use crate::server::{server_binary, ServerProcess};

/// Load settings.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Sessions to open and keep alive.
    pub sessions: usize,
    /// How long to keep them alive after all are open.
    pub hold: Duration,
    /// Session TTL asked for.
    pub session_ttl: Duration,
}

/// What the load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Sessions opened.
    pub opened: usize,
    /// Sessions the SDK declared lost with no fault injected (must be 0).
    pub lost_by_sdk: u64,
    /// Sessions the server no longer knew at the end (must be 0).
    pub missing_at_end: usize,
    /// Heartbeats sent during the hold.
    pub heartbeats: u64,
    /// Heartbeats that failed (any error).
    pub heartbeat_errors: u64,
    /// Heartbeats per second during the hold.
    pub heartbeat_rate: f64,
    /// Server RSS before opening sessions, KiB.
    pub rss_idle_kib: u64,
    /// Peak server RSS during the hold, KiB.
    pub rss_peak_kib: u64,
    /// Time to open every session.
    pub open_time: Duration,
    /// Session opens that failed and were retried.
    pub open_retries: u64,
}

/// Starts a server in `dir`, opens the sessions, holds them, checks every one survived.
pub async fn run(config: &LoadConfig, dir: &Path) -> std::io::Result<LoadReport> {
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let server = ServerProcess::start(&server_binary(), &data, vec![], &dir.join("server.log"))?;
    let mut report = LoadReport {
        rss_idle_kib: server.rss_kib().unwrap_or(0),
        ..LoadReport::default()
    };
    // Heartbeats counted on the way through to the real HTTP transport.
    let transport = Arc::new(Counting::new(HttpTransport::new(server.base_url())));
    let heartbeats = || transport.calls(Operation::Heartbeat);
    let failures = || transport.failures(Operation::Heartbeat);
    let client = client_over(transport.clone()).with_config(ClientConfig {
        session_ttl: Some(config.session_ttl),
        request_timeout: Duration::from_secs(5),
        backend: "load".into(),
        ..ClientConfig::default()
    });
    let started = Instant::now();
    let mut sessions = Vec::with_capacity(config.sessions);
    // Open in batches of 100; a failed open (the server busy with the heartbeats of those
    // already open) is retried and counted, it is not an expiry.
    while sessions.len() < config.sessions {
        let n = (config.sessions - sessions.len()).min(100);
        let opened = futures::future::join_all((0..n).map(|_| client.open_session())).await;
        for s in opened {
            match s {
                Ok(s) => sessions.push(s),
                Err(_) => report.open_retries += 1,
            }
        }
        if report.open_retries > config.sessions as u64 {
            return Err(std::io::Error::other("the server refuses to open sessions"));
        }
    }
    report.opened = sessions.len();
    report.open_time = started.elapsed();
    let (before, errors_before) = (heartbeats(), failures());
    let hold_start = Instant::now();
    while hold_start.elapsed() < config.hold {
        report.rss_peak_kib = report.rss_peak_kib.max(server.rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report.heartbeats = heartbeats() - before;
    report.heartbeat_errors = failures() - errors_before;
    report.heartbeat_rate = report.heartbeats as f64 / hold_start.elapsed().as_secs_f64();
    report.lost_by_sdk = client.session_lost_count();
    for chunk in sessions.chunks(200) {
        let statuses = futures::future::join_all(chunk.iter().map(|s| s.status())).await;
        report.missing_at_end += statuses.iter().filter(|s| s.is_err()).count();
    }
    for chunk in sessions.chunks(200) {
        futures::future::join_all(chunk.iter().map(|s| s.close())).await;
    }
    Ok(report)
}
