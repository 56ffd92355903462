//! The server memory soak (`bench soak`; docs/RELIABILITY.md, "Server memory"): the release
//! lock-server binary as a child process on a fresh SQLite data dir, a long run of
//! acquire+release cycles against it, and its resident set (`VmRSS` of
//! `/proc/<pid>/status`) sampled every so many cycles. A fresh server does a short run first
//! (the baseline), so the long run's end is stated as a ratio to the short run's.
//!
//! Growth that stops after warm-up (allocator arenas, SQLite's page cache, connection
//! buffers reaching their working size) is fine; a steady slope after it is a leak. Nothing
//! here asserts: the figures are printed as a table and as JSON, to be read.
//!
//! The load: `clients` closed-loop clients, each with one long-lived session (heartbeated),
//! doing L4 + L6 ([`crate::cycles::http_cycle`]). Every `fresh_every`-th cycle of a client
//! takes a key never used before; the others reuse the client's own key. Keys are distinct
//! per client, so nothing contends: what is measured is what a grant and a release leave
//! behind, per key used once and per key used again and again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::paths;
use serde::Serialize;

use crate::cycles::{http_cycle, open_session, SESSION_TTL_MILLIS};
use crate::systems;

/// The knobs of the soak.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakSettings {
    /// Soak: acquire+release cycles of the long run.
    #[arg(long, default_value_t = 1_000_000)]
    pub soak_cycles: u64,
    /// Soak: cycles of the baseline run (a fresh server of its own), the ratio's base.
    #[arg(long, default_value_t = 100_000)]
    pub soak_baseline: u64,
    /// Soak: concurrent clients (one session each).
    #[arg(long, default_value_t = 8)]
    pub soak_clients: usize,
    /// Soak: take an RSS sample every this many cycles.
    #[arg(long, default_value_t = 5_000)]
    pub soak_every: u64,
    /// Soak: cycles of warm-up; the slope is fitted to the samples after it.
    #[arg(long, default_value_t = 50_000)]
    pub soak_warm_up: u64,
    /// Soak: every this many cycles a client takes a fresh key (used once); its other
    /// cycles reuse its own key.
    #[arg(long, default_value_t = 2)]
    pub soak_fresh_every: u64,
    /// Soak: the lock-server binary (default: `lock-server` beside this binary, i.e. the
    /// same target dir and profile).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Soak: also write the JSON of both runs to this file.
    #[arg(long)]
    pub soak_json: Option<PathBuf>,
}

/// One RSS sample.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Cycles completed when it was taken.
    pub cycles: u64,
    /// Seconds since the first cycle started.
    pub seconds: f64,
    /// The server's `VmRSS`, KiB.
    pub rss_kib: u64,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct SoakRun {
    /// Cycles completed.
    pub cycles: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// Wall time of the cycles, s.
    pub seconds: f64,
    /// Warm-up, cycles.
    pub warm_up: u64,
    /// RSS once the server listened and the sessions were open, before any cycle, KiB.
    pub start_kib: u64,
    /// RSS at the first sample at or after the warm-up, KiB.
    pub after_warm_up_kib: u64,
    /// RSS at the last cycle, KiB.
    pub end_kib: u64,
    /// Largest sampled RSS, KiB.
    pub peak_kib: u64,
    /// The kernel's own peak (`VmHWM`) at the end, KiB: a peak between samples shows here.
    pub hwm_kib: u64,
    /// Least-squares slope of RSS over cycles after warm-up, bytes per 1,000 cycles.
    pub slope_after_warm_up: f64,
    /// The same over the second half of the run only: a leak keeps it near the first; growth
    /// that levels off drops it towards 0.
    pub slope_second_half: f64,
    /// The cycle count of the last sample above its predecessor: RSS stayed the same or
    /// fell from there to the end (a leak keeps this near the end).
    pub last_growth_at: u64,
    /// Every sample, in cycle order.
    pub samples: Vec<Sample>,
}

impl SoakRun {
    /// Cycles per second.
    pub fn throughput(&self) -> f64 {
        self.cycles as f64 / self.seconds.max(1e-9)
    }
}

/// Both runs and the ratio of their ends.
#[derive(Debug, Clone, Serialize)]
pub struct Soak {
    /// Where it ran ([`crate::machine::describe`]).
    pub machine: String,
    /// The short run on its own fresh server.
    pub baseline: SoakRun,
    /// The long run on its own fresh server.
    pub long: SoakRun,
    /// `long.end_kib / baseline.end_kib`.
    pub end_ratio: f64,
}

/// Runs the baseline, then the long run, each on a fresh server; prints the table and the
/// JSON (and writes the JSON to `--soak-json`).
pub fn run(settings: &SoakSettings, machine: &str) -> Soak {
    let binary = settings
        .server_bin
        .clone()
        .unwrap_or_else(beside_this_binary);
    println!(
        "\n# Server memory soak: {} clients, a fresh key every {} cycles, RSS every {} cycles, \
         server {}",
        settings.soak_clients,
        settings.soak_fresh_every,
        settings.soak_every,
        binary.display()
    );
    let client_rt = systems::runtime("client");
    let one = |cycles| {
        let server = systems::start_lock_server_process(&binary);
        let run = client_rt.block_on(soak(settings, &server, cycles));
        println!("{}", row(&run));
        run
    };
    let baseline = one(settings.soak_baseline);
    let long = one(settings.soak_cycles);
    let soak = Soak {
        machine: machine.to_owned(),
        end_ratio: long.end_kib as f64 / baseline.end_kib as f64,
        baseline,
        long,
    };
    println!("\n{}", table(&soak));
    let json = serde_json::to_string_pretty(&soak).expect("soak JSON");
    if let Some(path) = &settings.soak_json {
        std::fs::write(path, &json).expect("write --soak-json");
    }
    println!("{json}");
    soak
}

/// `lock-server` in the directory of the running binary.
fn beside_this_binary() -> PathBuf {
    let me = std::env::current_exe().expect("current exe");
    me.with_file_name("lock-server")
}

/// One run of `cycles` against `server`.
async fn soak(settings: &SoakSettings, server: &systems::Process, cycles: u64) -> SoakRun {
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(settings.soak_clients)
        .build()
        .expect("reqwest client");
    let mut sessions = Vec::new();
    for _ in 0..settings.soak_clients {
        sessions.push(open_session(&http, &base, SESSION_TTL_MILLIS).await);
    }
    // Sessions outlive the run: each is renewed well inside its TTL.
    let heartbeats: Vec<_> = sessions
        .iter()
        .map(|s| {
            tokio::spawn(heartbeat(
                http.clone(),
                format!("{base}{}", paths::heartbeat(&s.holder_id)),
                s.session_id.clone(),
            ))
        })
        .collect();
    let pid = server.pid();
    let start_kib = status_kib(pid, "VmRSS");
    let shared = Arc::new(Shared {
        claimed: AtomicU64::new(0),
        done: AtomicU64::new(0),
        samples: Mutex::new(vec![Sample {
            cycles: 0,
            seconds: 0.0,
            rss_kib: start_kib,
        }]),
        start: Instant::now(),
    });
    let clients: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(n, session)| {
            let client = Client {
                http: http.clone(),
                base: base.clone(),
                session: session.session_id,
                name: format!("soak-{n}"),
            };
            tokio::spawn(client.run(shared.clone(), cycles, settings.clone(), pid))
        })
        .collect();
    for c in clients {
        c.await.expect("soak client panicked");
    }
    let seconds = shared.start.elapsed().as_secs_f64();
    for h in heartbeats {
        h.abort();
    }
    let end_kib = status_kib(pid, "VmRSS");
    let mut samples = std::mem::take(&mut *shared.samples.lock().expect("samples"));
    samples.push(Sample {
        cycles,
        seconds,
        rss_kib: end_kib,
    });
    samples.sort_by_key(|s| s.cycles);
    samples.dedup_by_key(|s| s.cycles);
    summarise(
        settings.soak_warm_up,
        settings.soak_clients,
        seconds,
        samples,
        status_kib(pid, "VmHWM"),
    )
}

/// What the clients of one run share: the cycle count and the samples.
struct Shared {
    /// Cycles handed out (a client claims one before it starts it).
    claimed: AtomicU64,
    /// Cycles completed.
    done: AtomicU64,
    samples: Mutex<Vec<Sample>>,
    start: Instant,
}

/// One closed-loop client: its session and its own key.
struct Client {
    http: reqwest::Client,
    base: String,
    session: String,
    /// Its own key, and the prefix of its fresh keys.
    name: String,
}

impl Client {
    /// Cycles until `total` cycles are claimed; whoever completes a multiple of
    /// `--soak-every` samples the server's RSS.
    async fn run(self, shared: Arc<Shared>, total: u64, settings: SoakSettings, pid: u32) {
        let own = (
            format!("{}{}", self.base, paths::acquire(&self.name)),
            format!("{}{}", self.base, paths::release(&self.name)),
        );
        let mut mine = 0u64;
        while shared.claimed.fetch_add(1, Ordering::Relaxed) < total {
            mine += 1;
            if mine.is_multiple_of(settings.soak_fresh_every) {
                let key = format!("{}-{mine}", self.name);
                let acquire = format!("{}{}", self.base, paths::acquire(&key));
                let release = format!("{}{}", self.base, paths::release(&key));
                http_cycle(
                    Instant::now(),
                    &self.http,
                    &acquire,
                    &release,
                    &self.session,
                )
                .await;
            } else {
                http_cycle(Instant::now(), &self.http, &own.0, &own.1, &self.session).await;
            }
            let done = shared.done.fetch_add(1, Ordering::Relaxed) + 1;
            if done.is_multiple_of(settings.soak_every) && done < total {
                let sample = Sample {
                    cycles: done,
                    seconds: shared.start.elapsed().as_secs_f64(),
                    rss_kib: status_kib(pid, "VmRSS"),
                };
                shared.samples.lock().expect("samples").push(sample);
            }
        }
    }
}

/// L2 every minute (the sessions' TTL is five), until aborted.
async fn heartbeat(http: reqwest::Client, url: String, session_id: String) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let status = http
            .post(&url)
            .header(paths::SESSION_ID_HEADER, &session_id)
            .send()
            .await
            .expect("L2")
            .status();
        assert!(status.is_success(), "L2 answered {status}");
    }
}

/// The figures of one run from its samples (sorted by cycles, the first at 0, the last at
/// the end).
fn summarise(
    warm_up: u64,
    clients: usize,
    seconds: f64,
    samples: Vec<Sample>,
    hwm_kib: u64,
) -> SoakRun {
    let first = samples.first().expect("a start sample");
    let last = samples.last().expect("an end sample");
    let after_warm_up = samples.iter().find(|s| s.cycles >= warm_up).unwrap_or(last);
    let half = last.cycles / 2;
    SoakRun {
        cycles: last.cycles,
        clients,
        seconds,
        warm_up,
        start_kib: first.rss_kib,
        after_warm_up_kib: after_warm_up.rss_kib,
        end_kib: last.rss_kib,
        peak_kib: samples.iter().map(|s| s.rss_kib).max().unwrap_or(0),
        hwm_kib,
        slope_after_warm_up: slope(samples.iter().filter(|s| s.cycles >= warm_up)),
        slope_second_half: slope(samples.iter().filter(|s| s.cycles >= half)),
        last_growth_at: samples
            .windows(2)
            .filter(|w| w[1].rss_kib > w[0].rss_kib)
            .map(|w| w[1].cycles)
            .next_back()
            .unwrap_or(0),
        samples,
    }
}

/// Least-squares slope of RSS over cycles, bytes per 1,000 cycles (0 with fewer than two
/// samples).
fn slope<'a>(samples: impl Iterator<Item = &'a Sample>) -> f64 {
    let points: Vec<(f64, f64)> = samples
        .map(|s| (s.cycles as f64, s.rss_kib as f64 * 1024.0))
        .collect();
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if var == 0.0 {
        return 0.0;
    }
    cov / var * 1000.0
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB; 0 if unreadable.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))
        .unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A run as one table row.
fn row(run: &SoakRun) -> String {
    format!(
        "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} |",
        thousands(run.cycles),
        run.clients,
        run.seconds,
        run.throughput(),
        mib(run.start_kib),
        mib(run.after_warm_up_kib),
        mib(run.end_kib),
        mib(run.peak_kib),
        mib(run.hwm_kib),
        run.slope_after_warm_up,
        run.slope_second_half,
        thousands(run.last_growth_at),
    )
}

/// Both runs, the ratio of their ends, and the long run's RSS at every tenth of it.
pub fn table(soak: &Soak) -> String {
    let mut out = format!(
        "| cycles | clients | wall s | cycles/s | RSS start | after warm-up ({} cycles) | end | \
         peak (sampled) | VmHWM | slope after warm-up, B / 1k cycles | slope, second half, B / 1k cycles | last grew at cycle |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n{}\n{}\n\n",
        thousands(soak.long.warm_up),
        row(&soak.baseline),
        row(&soak.long)
    );
    out.push_str(&format!(
        "End RSS at {} ÷ end RSS at {} = {:.2}.\n\nLong run, RSS by cycles:",
        thousands(soak.long.cycles),
        thousands(soak.baseline.cycles),
        soak.end_ratio
    ));
    let tenth = (soak.long.cycles / 10).max(1);
    for s in soak.long.samples.iter().filter(|s| s.cycles % tenth == 0) {
        out.push_str(&format!(" {}: {};", thousands(s.cycles), mib(s.rss_kib)));
    }
    out.pop();
    out.push_str(".\n");
    out
}

/// KiB as MiB with one decimal.
fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `1000000` as `1,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(cycles: u64, rss_kib: u64) -> Sample {
        Sample {
            cycles,
            seconds: 0.0,
            rss_kib,
        }
    }

    #[test]
    fn slope_is_bytes_per_thousand_cycles() {
        // 1 KiB more every 1,000 cycles.
        let samples = [at(0, 100), at(1_000, 101), at(2_000, 102)];
        assert_eq!(slope(samples.iter()), 1024.0);
        assert_eq!(slope([at(5, 7)].iter()), 0.0);
    }

    #[test]
    fn summary_separates_warm_up_from_what_follows() {
        let samples = vec![at(0, 10), at(50, 30), at(100, 30), at(150, 30), at(200, 30)];
        let run = summarise(50, 8, 1.0, samples, 31);
        assert_eq!(
            (run.start_kib, run.after_warm_up_kib, run.end_kib),
            (10, 30, 30)
        );
        assert_eq!((run.peak_kib, run.hwm_kib), (30, 31));
        assert_eq!(run.slope_after_warm_up, 0.0);
        assert_eq!(run.last_growth_at, 50);
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
    }
}
