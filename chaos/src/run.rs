//! One chaos run: a lock-server on a fixed port, N contender processes, an L7 sampler, and
//! faults on a seeded schedule (SIGSTOP/SIGCONT of holders for longer than their TTL,
//! kill -9 + restart of the server and, on the etcd backend, SIGKILL of the etcd leader
//! followed by its restart); then the merged history goes through the checker.
//!
//! Beside the exclusive contenders, a run may have a [`Mix`] of shared holds: readers and
//! writers of one read-write key ([`RW_KEY`]) and holders of one semaphore key
//! ([`SEMAPHORE_KEY`]), each an OS process of its own role (`contender --role`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_api::paths;
use lock_api::{LedgerEntries, LockState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::checker::{check, CheckerConfig, Report};
use crate::history::{now_micros, read_history, Event, HistoryWriter, Window};
use crate::server::{contender_binary, server_binary, ServerProcess};
use lock_e2e::etcd::EtcdCluster;

/// Shape of a run. Every random choice is drawn from `seed`.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Contender processes.
    pub contenders: usize,
    /// Keys they contend for.
    pub keys: usize,
    /// How long contenders loop.
    pub duration: Duration,
    /// Seed of the fault schedule (and of each contender's RNG).
    pub seed: u64,
    /// SIGSTOP/SIGCONT faults.
    pub pauses: usize,
    /// kill -9 + restart faults of lock-server.
    pub server_kills: usize,
    /// Lock TTL the contenders ask for.
    pub lock_ttl: Duration,
    /// Session TTL the contenders ask for.
    pub session_ttl: Duration,
    /// Acquire budget of the contenders.
    pub budget: Duration,
    /// `waitMillis` of the contenders' L4s: 0 polls with full jitter (the SDK default); more
    /// queues each L4 in the server's wait queue for up to that long.
    pub wait: Duration,
    /// Pause length range; the low end must exceed the session TTL.
    pub pause_range: (Duration, Duration),
    /// Where histories and logs go.
    pub out_dir: PathBuf,
    /// Extra lock-server arguments.
    pub server_args: Vec<String>,
    /// etcd members to start on 127.0.0.1 for the etcd backend; 0 runs the SQLite store.
    pub etcd_members: usize,
    /// SIGKILLs of the etcd leader (each followed by a restart of that member).
    pub etcd_kills: usize,
    /// How long a killed etcd member stays down.
    pub etcd_downtime: Duration,
    /// Contenders of shared holds, beside the `contenders` on exclusive keys.
    pub mix: Mix,
}

/// The read-write key of a run's [`Mix`].
pub const RW_KEY: &str = "chaos/rw";
/// The semaphore key of a run's [`Mix`].
pub const SEMAPHORE_KEY: &str = "chaos/sem";

/// Contenders of shared holds: readers (shared, no limit) and writers (exclusive) of
/// [`RW_KEY`], and holders of [`SEMAPHORE_KEY`] (shared under `permits`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Mix {
    /// Readers of the read-write key (`r0`, `r1`, …): they never write.
    pub readers: usize,
    /// Writers of the read-write key (`w0`, …): exclusive, writing its ledger.
    pub writers: usize,
    /// Holders of the semaphore key (`s0`, …), each writing a ledger of its own.
    pub semaphore_holders: usize,
    /// The semaphore's permits: the limit of every shared hold of its key.
    pub permits: u32,
}

/// How long the readers and writers of [`RW_KEY`] wait in the server's queue on each L4 (at
/// least; a run's own `wait` may be longer). Readers take the key in turn without a gap
/// between them, so a writer that only polls finds it free by luck alone (the try-lock of any
/// read-write lock starves writers that way), and polling readers starve behind queued
/// writers the same way. In the queue each is served in its turn: no reader is granted past
/// a waiting writer, and the readers queued behind it are granted together after it.
pub const RW_WAIT: Duration = Duration::from_millis(1_000);

/// One contender process to start: its name, role, keys and queue wait.
pub(crate) struct Contender {
    name: String,
    role: &'static str,
    keys: Vec<String>,
    wait: Duration,
}

impl ChaosConfig {
    /// Every contender of the run: the exclusive ones first (`c0`, …, as before shared holds,
    /// so a seed draws what it drew then), then the mix's writers, readers and semaphore
    /// holders.
    pub(crate) fn contenders(&self, keys: &[String]) -> Vec<Contender> {
        let one = |prefix: &str, i: usize, role, key: &str| Contender {
            name: format!("{prefix}{i}"),
            role,
            keys: vec![key.to_owned()],
            wait: self.wait,
        };
        let mut all: Vec<Contender> = (0..self.contenders)
            .map(|i| Contender {
                name: format!("c{i}"),
                role: "exclusive",
                keys: keys.to_vec(),
                wait: self.wait,
            })
            .collect();
        let rw = |prefix, i, role| Contender {
            wait: self.wait.max(RW_WAIT),
            ..one(prefix, i, role, RW_KEY)
        };
        all.extend((0..self.mix.writers).map(|i| rw("w", i, "exclusive")));
        all.extend((0..self.mix.readers).map(|i| rw("r", i, "reader")));
        all.extend(
            (0..self.mix.semaphore_holders).map(|i| one("s", i, "semaphore", SEMAPHORE_KEY)),
        );
        all
    }

    /// The lock keys of the run: the exclusive ones, then the mix's.
    pub(crate) fn lock_keys(&self, keys: &[String]) -> Vec<String> {
        let mut all = keys.to_vec();
        if self.mix.readers + self.mix.writers > 0 {
            all.push(RW_KEY.to_owned());
        }
        if self.mix.semaphore_holders > 0 {
            all.push(SEMAPHORE_KEY.to_owned());
        }
        all
    }

    /// Every ledger written in the run: the lock keys' own, and each semaphore holder's.
    pub(crate) fn ledgers(&self, keys: &[String]) -> Vec<String> {
        let mut all = self.lock_keys(keys);
        all.extend((0..self.mix.semaphore_holders).map(|i| format!("{SEMAPHORE_KEY}/by/s{i}")));
        all
    }
}

impl ChaosConfig {
    /// The long run in docs/RELIABILITY.md: 50 contenders, 20 server kills.
    pub fn long(out_dir: PathBuf, seed: u64) -> ChaosConfig {
        ChaosConfig {
            contenders: 50,
            keys: 5,
            duration: Duration::from_secs(240),
            seed,
            pauses: 40,
            server_kills: 20,
            lock_ttl: Duration::from_millis(2_000),
            session_ttl: Duration::from_millis(3_000),
            budget: Duration::from_millis(2_000),
            wait: Duration::ZERO,
            pause_range: (Duration::from_millis(3_500), Duration::from_millis(6_000)),
            out_dir,
            server_args: vec![],
            etcd_members: 0,
            etcd_kills: 0,
            etcd_downtime: Duration::from_millis(3_000),
            mix: Mix::default(),
        }
    }
}

/// What a run did and what the checker found.
#[derive(Debug)]
pub struct ChaosOutcome {
    /// Checker figures and violations.
    pub report: Report,
    /// Where the merged history is.
    pub history: PathBuf,
    /// Peak RSS of the server seen by the sampler, in KiB.
    pub server_peak_rss_kib: u64,
}

/// Runs the whole thing; `Err` only for harness failures (server would not start, ...).
pub fn run(config: &ChaosConfig) -> std::io::Result<ChaosOutcome> {
    check_etcd_kills(config)?;
    std::fs::create_dir_all(&config.out_dir)?;
    let data_dir = config.out_dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let contender_bin = contender_binary();
    let mut etcd = (config.etcd_members > 0).then(|| EtcdCluster::start(config.etcd_members));
    let mut server = start_server(config, &data_dir, etcd.as_ref())?;
    let url = server.base_url();
    let keys: Vec<String> = (0..config.keys).map(|i| format!("chaos/key-{i}")).collect();
    // Every random choice comes from here, in this order: contender seeds, the schedule, the
    // holders paused.
    let mut rng = StdRng::seed_from_u64(config.seed);
    let urls = [url.clone()];
    let mut children = spawn_contenders(config, &contender_bin, &urls, &keys, &mut rng)?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let lock_keys = config.lock_keys(&keys);
    let sampler_out = config.out_dir.join("sampler.jsonl");
    let sampler = spawn_sampler(
        url.clone(),
        "sampler",
        lock_keys,
        &sampler_out,
        stop.clone(),
    )?;
    let mut injector = Injector {
        server: &mut server,
        etcd: etcd.as_mut(),
        etcd_down: None,
        contenders: &children,
        out_dir: &config.out_dir,
        log: HistoryWriter::create(&config.out_dir.join("faults.jsonl"))?,
        pauses: Vec::new(),
        peak_rss: 0,
    };
    for fault in draw_schedule(config, &mut rng) {
        injector.wait_until(started + fault.at);
        injector.inject(fault.kind, &mut rng)?;
    }
    let mut peak_rss = injector.finish()?;
    wait_for_contenders(&mut children, config.duration + Duration::from_secs(60));
    peak_rss = peak_rss.max(server.rss_kib().unwrap_or(0));
    stop.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    snapshot_ledger(&url, &config.ledgers(&keys), &config.out_dir)?;
    drop(server);
    drop(etcd);

    let merged = merge(&config.out_dir, &children, &["sampler.jsonl"])?;
    let report = check(&merged, CheckerConfig::default());
    Ok(ChaosOutcome {
        report,
        history: config.out_dir.join("history.jsonl"),
        server_peak_rss_kib: peak_rss,
    })
}

/// Refuses etcd kills a run cannot survive: with fewer than 3 members, or too many for the
/// run's length.
fn check_etcd_kills(config: &ChaosConfig) -> std::io::Result<()> {
    if config.etcd_kills > 0 && config.etcd_members < 3 {
        return Err(std::io::Error::other(
            "etcd kills need at least 3 members, so a quorum survives one loss",
        ));
    }
    // Each kill and its restart must fit in the kill's own slot of the fault window, or two
    // members could be down at once.
    if config.etcd_kills > 0 && etcd_slot_ms(config) <= config.etcd_downtime.as_millis() as u64 {
        return Err(std::io::Error::other(
            "too many etcd kills for the run's length: one must end before the next begins",
        ));
    }
    Ok(())
}

/// lock-server on `data_dir` with the run's arguments, on the etcd backend if there is a
/// cluster.
fn start_server(
    config: &ChaosConfig,
    data_dir: &Path,
    etcd: Option<&EtcdCluster>,
) -> std::io::Result<ServerProcess> {
    let mut server_args = config.server_args.clone();
    if let Some(cluster) = etcd {
        server_args.extend(["--backend".into(), "etcd".into()]);
        server_args.extend(["--etcd-endpoints".into(), cluster.endpoints_arg()]);
    }
    ServerProcess::start(
        &server_binary(),
        data_dir,
        server_args,
        &config.out_dir.join("server.log"),
    )
}

/// The contender processes (`c0`, `c1`, …, then the mix's), each with a seed drawn from
/// `rng`, writing its history into the run's directory; contender `i` talks to
/// `urls[i % urls.len()]` (one replica each, when there are several).
pub(crate) fn spawn_contenders(
    config: &ChaosConfig,
    bin: &Path,
    urls: &[String],
    keys: &[String],
    rng: &mut StdRng,
) -> std::io::Result<Vec<(String, Child)>> {
    let mut children = Vec::new();
    for (
        i,
        Contender {
            name,
            role,
            keys,
            wait,
        },
    ) in config.contenders(keys).into_iter().enumerate()
    {
        let url = &urls[i % urls.len()];
        let child = Command::new(bin)
            .args(["--url", url, "--name", &name, "--keys", &keys.join(",")])
            .args(["--role", role])
            .args(["--permits", &config.mix.permits.max(1).to_string()])
            .arg("--history")
            .arg(history_path(&config.out_dir, &name))
            .args(["--duration-ms", &config.duration.as_millis().to_string()])
            .args(["--lock-ttl-ms", &config.lock_ttl.as_millis().to_string()])
            .args([
                "--session-ttl-ms",
                &config.session_ttl.as_millis().to_string(),
            ])
            .args(["--budget-ms", &config.budget.as_millis().to_string()])
            .args(["--wait-ms", &wait.as_millis().to_string()])
            .args(["--seed", &rng.random::<u64>().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        children.push((name, child));
    }
    Ok(children)
}

/// The processes a run's faults hit, and where the faults are recorded.
struct Injector<'a> {
    server: &'a mut ServerProcess,
    etcd: Option<&'a mut EtcdCluster>,
    /// The etcd member killed and not restarted yet.
    etcd_down: Option<usize>,
    contenders: &'a [(String, Child)],
    out_dir: &'a Path,
    /// `faults.jsonl`.
    log: HistoryWriter,
    /// Pauses under way; each ends with its fault event, if its SIGSTOP was delivered.
    pauses: Vec<std::thread::JoinHandle<Option<Event>>>,
    /// The server's peak RSS seen so far, KiB.
    peak_rss: u64,
}

impl Injector<'_> {
    /// Sleeps until `at`, sampling the server's RSS every 50 ms meanwhile.
    fn wait_until(&mut self, at: Instant) {
        while Instant::now() < at {
            self.sample_rss();
            std::thread::sleep(Duration::from_millis(50).min(at - Instant::now()));
        }
    }

    fn sample_rss(&mut self) {
        self.peak_rss = self.peak_rss.max(self.server.rss_kib().unwrap_or(0));
    }

    fn inject(&mut self, kind: FaultKind, rng: &mut StdRng) -> std::io::Result<()> {
        match kind {
            FaultKind::Pause(length) => {
                let target = pick_holder(self.out_dir, self.contenders, rng);
                let pid = self.contenders[target].1.id();
                let name = self.contenders[target].0.clone();
                self.pauses
                    .push(std::thread::spawn(move || pause(pid, name, length)));
            }
            FaultKind::ServerKill => {
                let sent = now_micros();
                self.server.restart()?;
                self.record("server_kill", "server".into(), sent)?;
            }
            FaultKind::EtcdKill => {
                let cluster = self
                    .etcd
                    .as_mut()
                    .expect("etcd faults need an etcd cluster");
                // The leader: its loss forces an election, the window in which replicas
                // answer 503 NOT_LEADER and clients must retry within their budget.
                let victim = cluster.leader().unwrap_or(0);
                let sent = now_micros();
                cluster.kill(victim);
                self.etcd_down = Some(victim);
                self.record("etcd_kill", format!("etcd-{victim}"), sent)?;
            }
            FaultKind::EtcdRestart => {
                if let (Some(cluster), Some(victim)) = (self.etcd.as_mut(), self.etcd_down.take()) {
                    cluster.restart(victim);
                }
            }
        }
        Ok(())
    }

    /// Records a fault of `kind` on `target`, sent at `sent` and done now.
    fn record(&mut self, kind: &str, target: String, sent: u64) -> std::io::Result<()> {
        self.log.record(&Event::Fault {
            kind: kind.into(),
            target,
            window: Window::since(sent),
        })
    }

    /// Waits for every pause to end and records it; the server's peak RSS seen.
    fn finish(mut self) -> std::io::Result<u64> {
        for t in std::mem::take(&mut self.pauses) {
            if let Ok(Some(event)) = t.join() {
                self.log.record(&event)?;
            }
        }
        Ok(self.peak_rss)
    }
}

pub(crate) fn history_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.jsonl"))
}

enum FaultKind {
    Pause(Duration),
    ServerKill,
    EtcdKill,
    EtcdRestart,
}

struct Fault {
    at: Duration,
    kind: FaultKind,
}

/// When faults may start, ms into the run: from 10 % to 85 % of it (so contenders are busy
/// before, and every pause ends before they stop).
fn fault_window_ms(config: &ChaosConfig) -> (u64, u64) {
    let span = config.duration.as_millis() as u64;
    (span / 10, span * 85 / 100)
}

/// The share of the fault window each etcd kill (and its restart) gets.
fn etcd_slot_ms(config: &ChaosConfig) -> u64 {
    let (lo, hi) = fault_window_ms(config);
    (hi - lo) / config.etcd_kills.max(1) as u64
}

/// The run's faults, drawn from `rng` over the fault window, sorted by time.
fn draw_schedule(config: &ChaosConfig, rng: &mut StdRng) -> Vec<Fault> {
    let (lo, hi) = fault_window_ms(config);
    let mut faults: Vec<Fault> = (0..config.pauses)
        .map(|_| Fault {
            at: Duration::from_millis(rng.random_range(lo..=hi)),
            kind: FaultKind::Pause(Duration::from_millis(rng.random_range(
                config.pause_range.0.as_millis() as u64..=config.pause_range.1.as_millis() as u64,
            ))),
        })
        .collect();
    faults.extend((0..config.server_kills).map(|_| Fault {
        at: Duration::from_millis(rng.random_range(lo..=hi)),
        kind: FaultKind::ServerKill,
    }));
    // etcd kills get a slot each, so one member is down at a time and a quorum remains.
    let slot = etcd_slot_ms(config);
    let downtime = config.etcd_downtime.as_millis() as u64;
    for k in 0..config.etcd_kills as u64 {
        let kill_at = lo + k * slot + rng.random_range(0..=slot.saturating_sub(downtime) / 2);
        faults.push(Fault {
            at: Duration::from_millis(kill_at),
            kind: FaultKind::EtcdKill,
        });
        faults.push(Fault {
            at: Duration::from_millis(kill_at + downtime),
            kind: FaultKind::EtcdRestart,
        });
    }
    // Stable: a restart drawn at the same instant as its kill stays after it.
    faults.sort_by_key(|f| f.at);
    faults
}

/// A contender that currently holds a lock (its last history line is a grant or a write),
/// else any contender.
pub(crate) fn pick_holder(dir: &Path, children: &[(String, Child)], rng: &mut StdRng) -> usize {
    let holders: Vec<usize> = children
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| {
            std::fs::read_to_string(history_path(dir, name))
                .ok()
                .and_then(|text| text.lines().last().map(str::to_owned))
                .is_some_and(|last| {
                    [
                        "grant",
                        "ledger_write",
                        "l7_sample",
                        "hold_check",
                        "ledger_read",
                    ]
                    .iter()
                    .any(|kind| last.contains(&format!("\"type\":\"{kind}\"")))
                })
        })
        .map(|(i, _)| i)
        .collect();
    if holders.is_empty() {
        rng.random_range(0..children.len())
    } else {
        holders[rng.random_range(0..holders.len())]
    }
}

/// SIGSTOP, wait, SIGCONT; the fault event spans both signals.
pub(crate) fn pause(pid: u32, name: String, length: Duration) -> Option<Event> {
    let sent = now_micros();
    // SAFETY: kill(2) on a child we spawned and have not reaped (it runs until its duration
    // ends, which is after every scheduled pause has ended).
    let stopped = unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) } == 0;
    std::thread::sleep(length);
    // SAFETY: as above.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
    stopped.then(|| Event::Fault {
        kind: "pause".into(),
        target: name,
        window: Window::since(sent),
    })
}

/// Polls L7 for every key every 25 ms into `out` (as process `name`).
pub(crate) fn spawn_sampler(
    url: String,
    name: &'static str,
    keys: Vec<String>,
    out: &Path,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut out = HistoryWriter::create(out)?;
    Ok(std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .expect("http client");
            while !stop.load(Ordering::SeqCst) {
                for key in &keys {
                    let sent = now_micros();
                    let answer = http.get(format!("{url}{}", paths::lock(key))).send().await;
                    let Ok(answer) = answer else { continue };
                    if !answer.status().is_success() {
                        continue;
                    }
                    let Ok(state) = answer.json::<LockState>().await else {
                        continue;
                    };
                    let window = Window::since(sent);
                    let _ = out.record(&Event::l7_sample(name, key, &state, window));
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
    }))
}

/// Waits for every contender to exit on its own; kills (and reports) stragglers.
pub(crate) fn wait_for_contenders(children: &mut [(String, Child)], bound: Duration) {
    let deadline = Instant::now() + bound;
    for (name, child) in children.iter_mut() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    eprintln!("contender {name} did not stop in time; killed");
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
    }
}

/// Reads the whole ledger of every key (acceptance order) into `ledger.jsonl`.
pub(crate) fn snapshot_ledger(url: &str, keys: &[String], dir: &Path) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut out = HistoryWriter::create(&dir.join("ledger.jsonl"))?;
    rt.block_on(async {
        let http = reqwest::Client::new();
        for key in keys {
            let answer = http
                .get(format!("{url}{}", paths::ledger(key)))
                .send()
                .await
                .map_err(std::io::Error::other)?;
            let entries: LedgerEntries = answer.json().await.map_err(std::io::Error::other)?;
            out.record(&Event::LedgerSnapshot {
                key: key.clone(),
                tokens: entries.entries.iter().map(|e| e.fencing_token).collect(),
            })?;
        }
        Ok(())
    })
}

/// Concatenates every process's history, the `samplers`' files, the faults and the ledger
/// snapshot into `history.jsonl`.
pub(crate) fn merge(
    dir: &Path,
    children: &[(String, Child)],
    samplers: &[&str],
) -> std::io::Result<Vec<Event>> {
    let mut all = Vec::new();
    let mut files: Vec<PathBuf> = children.iter().map(|(n, _)| history_path(dir, n)).collect();
    files.extend(samplers.iter().map(|f| dir.join(f)));
    files.extend(["faults.jsonl", "ledger.jsonl"].map(|f| dir.join(f)));
    for file in files {
        if file.exists() {
            all.extend(read_history(&file)?);
        }
    }
    let mut out = HistoryWriter::create(&dir.join("history.jsonl"))?;
    for e in &all {
        out.record(e)?;
    }
    Ok(all)
}
