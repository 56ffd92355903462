//! Session load: many open sessions heartbeating through the native SDK against one server.
//! Measures spurious expiries (sessions the SDK declared lost, or the server no longer knows
//! at the end, with no fault injected), server RSS, and heartbeat traffic.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_lab::counting::counted;
use lock_lab::native::client_over;
use lock_wasm::native::HttpTransport;
use lock_wasm::transport::Route;
use lock_wasm::{AcquirePolicy, ClientConfig, LockClientSession, LockHandle};

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
    /// If set, every session holds one lock of this TTL (its own key) through the hold, so
    /// heartbeats follow the lock's schedule (a third of its TTL) instead of the session's.
    pub lock_ttl: Option<Duration>,
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
    /// Locks the SDK reported lost during the hold (must be 0).
    pub locks_lost: usize,
    /// CPU time (user + system) the server used during the hold.
    pub server_cpu: Duration,
}

/// One lock of `ttl` per session, each on its own key (none without a TTL).
async fn hold_locks(
    sessions: &[LockClientSession],
    ttl: Option<Duration>,
) -> std::io::Result<Vec<LockHandle>> {
    let Some(ttl) = ttl else {
        return Ok(Vec::new());
    };
    let policy = AcquirePolicy::default();
    let mut locks = Vec::with_capacity(sessions.len());
    for (n, chunk) in sessions.chunks(100).enumerate() {
        // Keys by position: a session id must not show up in keys (they are logged).
        let granted = futures::future::join_all(chunk.iter().enumerate().map(|(i, s)| {
            let key = format!("load/{}", n * 100 + i);
            async move { s.acquire(&key, ttl, &policy).await }
        }))
        .await;
        for grant in granted {
            match grant {
                Ok(Some(handle)) => locks.push(handle),
                other => return Err(std::io::Error::other(format!("lock not held: {other:?}"))),
            }
        }
    }
    Ok(locks)
}

/// User plus system CPU time of `pid` so far (`/proc/PID/stat`, in clock ticks).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces), from field 3 on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the running system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(Duration::from_secs_f64(ticks as f64 / per_second as f64))
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
    let transport = Arc::new(counted(HttpTransport::new(server.base_url())));
    let heartbeats = || transport.intercept().calls(Route::Heartbeat);
    let failures = || transport.intercept().failures(Route::Heartbeat);
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
    let locks = hold_locks(&sessions, config.lock_ttl).await?;
    let cpu_before = server.pid().and_then(cpu_time).unwrap_or_default();
    let (before, errors_before) = (heartbeats(), failures());
    let hold_start = Instant::now();
    while hold_start.elapsed() < config.hold {
        report.rss_peak_kib = report.rss_peak_kib.max(server.rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report.heartbeats = heartbeats() - before;
    report.heartbeat_errors = failures() - errors_before;
    report.heartbeat_rate = report.heartbeats as f64 / hold_start.elapsed().as_secs_f64();
    report.server_cpu = server.pid().and_then(cpu_time).unwrap_or_default() - cpu_before;
    report.locks_lost = locks.iter().filter(|h| h.is_lost()).count();
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
