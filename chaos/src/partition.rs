//! A partition run: the chaos workload ([`crate::run`]'s contenders, samplers and checker)
//! against two lock-server replicas over a three-member etcd cluster, every server process in
//! a network namespace of its own ([`cluster`]), while a nemesis cuts and heals links and
//! freezes processes on a seeded schedule.
//!
//! The nemesis does one thing at a time, for a drawn length, then heals and rests:
//! - [`Nemesis::CutMinority`]: one etcd follower is cut from the other two members (the
//!   replicas still reach it; it answers without a leader);
//! - [`Nemesis::CutReplica`]: one replica is cut from every etcd member; its clients still
//!   reach it (and get 503s), while their sessions' leases run out in etcd;
//! - [`Nemesis::IsolateLeader`]: the etcd leader (`etcdctl endpoint status`) is cut from
//!   every other host: the majority elects a new leader, the old one steps down;
//! - [`Nemesis::PauseLeader`], [`Nemesis::PauseReplica`]: SIGSTOP, then SIGCONT, of the etcd
//!   leader or of a replica.
//!
//! Beside it, holders are paused past their TTL as in every chaos run. Contenders are spread
//! over the two replicas (`c0` on r0, `c1` on r1, …), and each replica has its own L7
//! sampler; the merged history goes through the same checker.

pub mod cluster;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::checker::{check, CheckerConfig, Report};
use crate::history::{now_micros, AcquireOutcome, Event, HistoryWriter, Window};
use crate::run::{
    merge, pause, pick_holder, snapshot_ledger, spawn_contenders, spawn_sampler,
    wait_for_contenders, ChaosConfig,
};
use crate::server::contender_binary;
use cluster::{signal, NetCluster, ETCD_MEMBERS, REPLICAS};

/// One fault of the nemesis (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nemesis {
    /// An etcd follower cut from the other members.
    CutMinority,
    /// A replica cut from every etcd member.
    CutReplica,
    /// The etcd leader cut from every other host.
    IsolateLeader,
    /// The etcd leader SIGSTOPped.
    PauseLeader,
    /// A replica SIGSTOPped.
    PauseReplica,
}

impl Nemesis {
    /// Every kind, in the order a seed shuffles.
    pub const ALL: [Nemesis; 5] = [
        Nemesis::CutMinority,
        Nemesis::CutReplica,
        Nemesis::IsolateLeader,
        Nemesis::PauseLeader,
        Nemesis::PauseReplica,
    ];

    /// The fault kind in the history (`faults.jsonl`, the report's `faults`).
    pub fn name(self) -> &'static str {
        match self {
            Nemesis::CutMinority => "cut_etcd_minority",
            Nemesis::CutReplica => "cut_replica_from_etcd",
            Nemesis::IsolateLeader => "isolate_etcd_leader",
            Nemesis::PauseLeader => "pause_etcd_leader",
            Nemesis::PauseReplica => "pause_replica",
        }
    }
}

/// Shape of a partition run.
#[derive(Debug, Clone)]
pub struct PartitionConfig {
    /// The workload: contenders, keys, mix, duration, seed, TTLs, holder pauses and where the
    /// histories go. Its server and etcd fields are not used (the cluster is [`cluster`]'s).
    pub chaos: ChaosConfig,
    /// How long each nemesis fault lasts (drawn uniformly).
    pub fault_length: (Duration, Duration),
    /// Rest after each heal (drawn uniformly).
    pub rest: (Duration, Duration),
}

impl PartitionConfig {
    /// The long run in docs/RELIABILITY.md ("Partitions"): 10 minutes, 16 contenders on 3
    /// keys plus 2 readers, 2 writers and 2 semaphore holders, faults of 2–7 s every few
    /// seconds, 30 holder pauses.
    pub fn long(out_dir: PathBuf, seed: u64) -> PartitionConfig {
        let mut chaos = ChaosConfig::long(out_dir, seed);
        chaos.contenders = 16;
        chaos.keys = 3;
        chaos.duration = Duration::from_secs(600);
        chaos.pauses = 30;
        chaos.server_kills = 0;
        chaos.mix = crate::run::Mix {
            readers: 2,
            writers: 2,
            semaphore_holders: 2,
            permits: 2,
        };
        PartitionConfig {
            chaos,
            // Up to past the session TTL (3 s, a 3 s lease): a cut replica's sessions expire.
            fault_length: (Duration::from_millis(2_000), Duration::from_millis(7_000)),
            rest: (Duration::from_millis(1_000), Duration::from_millis(3_000)),
        }
    }
}

/// What a run did and what the checker found.
#[derive(Debug)]
pub struct PartitionOutcome {
    /// Checker figures and violations (faults by kind in `report.faults`).
    pub report: Report,
    /// Where the merged history is.
    pub history: PathBuf,
    /// Grants received by the contenders of each replica.
    pub grants_per_replica: [usize; REPLICAS],
    /// Grants received while a nemesis fault was in force.
    pub grants_during_faults: usize,
    /// Peak RSS of a replica seen, KiB.
    pub replica_peak_rss_kib: u64,
}

/// One entry of the schedule.
enum Step {
    /// A nemesis fault begins; it ends `length` later.
    Fault(Nemesis, Duration),
    /// A holder is paused for this long.
    HolderPause(Duration),
}

/// The run's steps, drawn from `rng`, sorted by time: nemesis faults one after another over
/// 10–85 % of the run (each kind in turn, in an order shuffled per round, so every kind
/// comes up once five faults fit), holder pauses at random times in the same window.
fn draw_schedule(config: &PartitionConfig, rng: &mut StdRng) -> Vec<(Duration, Step)> {
    let span = config.chaos.duration.as_millis() as u64;
    let (lo, hi) = (span / 10, span * 85 / 100);
    let ms = |d: Duration| d.as_millis() as u64;
    let mut steps = Vec::new();
    let mut round: Vec<Nemesis> = Vec::new();
    let mut at = lo;
    loop {
        if round.is_empty() {
            round = Nemesis::ALL.to_vec();
            round.shuffle(rng);
        }
        let length = rng.random_range(ms(config.fault_length.0)..=ms(config.fault_length.1));
        if at + length > hi {
            break;
        }
        let kind = round.pop().expect("refilled above");
        steps.push((
            Duration::from_millis(at),
            Step::Fault(kind, Duration::from_millis(length)),
        ));
        at += length + rng.random_range(ms(config.rest.0)..=ms(config.rest.1));
    }
    let pause = config.chaos.pause_range;
    for _ in 0..config.chaos.pauses {
        let at = rng.random_range(lo..=hi);
        let length = rng.random_range(ms(pause.0)..=ms(pause.1));
        steps.push((
            Duration::from_millis(at),
            Step::HolderPause(Duration::from_millis(length)),
        ));
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// Runs the whole thing; `Err` only for harness failures (no namespaces, etcd would not
/// start, ...): on a machine that cannot build the network the error says why.
pub fn run(config: &PartitionConfig) -> std::io::Result<PartitionOutcome> {
    let chaos = &config.chaos;
    std::fs::create_dir_all(&chaos.out_dir)?;
    let mut cluster = NetCluster::start(&chaos.out_dir)?;
    let urls: Vec<String> = (0..REPLICAS).map(|r| cluster.replica_url(r)).collect();
    let keys: Vec<String> = (0..chaos.keys).map(|i| format!("chaos/key-{i}")).collect();
    // Every random choice comes from here, in this order: contender seeds, the schedule,
    // the victims.
    let mut rng = StdRng::seed_from_u64(chaos.seed);
    let mut children = spawn_contenders(chaos, &contender_binary(), &urls, &keys, &mut rng)?;
    let started = Instant::now();
    // Set on every way out (an error below too), so the samplers always stop.
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let sampler_threads = SAMPLERS
        .iter()
        .zip(&urls)
        .map(|(name, url)| {
            let out = chaos.out_dir.join(format!("{name}.jsonl"));
            let keys = chaos.lock_keys(&keys);
            spawn_sampler(url.clone(), name, keys, &out, stop.0.clone())
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut injector = Injector {
        cluster: &mut cluster,
        contenders: &children,
        out_dir: &chaos.out_dir,
        log: HistoryWriter::create(&chaos.out_dir.join("faults.jsonl"))?,
        pauses: Vec::new(),
        peak_rss: 0,
    };
    let schedule = draw_schedule(config, &mut rng);
    let result = injector.play(schedule, started, &mut rng);
    // Heal and thaw whatever happened above, then let the contenders finish.
    let ended = injector.finish();
    let peak_rss = injector.peak_rss;
    drop(injector);
    result.and(ended)?;
    wait_for_contenders(&mut children, chaos.duration + Duration::from_secs(60));
    drop(stop);
    for t in sampler_threads {
        let _ = t.join();
    }
    cluster.wait_ready()?;
    snapshot_with_retries(&urls[0], &chaos.ledgers(&keys), &chaos.out_dir)?;
    drop(cluster);

    let sampler_files = SAMPLERS.map(|name| format!("{name}.jsonl"));
    let sampler_files: Vec<&str> = sampler_files.iter().map(String::as_str).collect();
    let merged = merge(&chaos.out_dir, &children, &sampler_files)?;
    let report = check(&merged, CheckerConfig::default());
    Ok(PartitionOutcome {
        report,
        history: chaos.out_dir.join("history.jsonl"),
        grants_per_replica: grants_per_replica(&merged, &children),
        grants_during_faults: grants_during_faults(&merged),
        replica_peak_rss_kib: peak_rss,
    })
}

/// The L7 sampler of each replica (its process name; its history is `<name>.jsonl`).
const SAMPLERS: [&str; REPLICAS] = ["sampler-r0", "sampler-r1"];

/// Stops the samplers when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The ledger snapshot through replica 0, retried while the healed cluster settles.
fn snapshot_with_retries(url: &str, ledgers: &[String], dir: &Path) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match snapshot_ledger(url, ledgers, dir) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The processes and links the nemesis hits, and where its faults are recorded.
struct Injector<'a> {
    cluster: &'a mut NetCluster,
    contenders: &'a [(String, Child)],
    out_dir: &'a Path,
    /// `faults.jsonl`.
    log: HistoryWriter,
    /// Holder pauses under way.
    pauses: Vec<std::thread::JoinHandle<Option<Event>>>,
    /// A replica's peak RSS seen, KiB.
    peak_rss: u64,
}

/// A fault in force: what to undo, and what to record when it is undone.
struct InForce {
    kind: Nemesis,
    target: String,
    sent: u64,
    /// A process to SIGCONT (a pause); `None` for a cut (heal every link).
    stopped: Option<u32>,
    until: Instant,
}

impl Injector<'_> {
    /// Plays `schedule` from `started`: each fault from its time to its end, holder pauses
    /// beside them.
    fn play(
        &mut self,
        schedule: Vec<(Duration, Step)>,
        started: Instant,
        rng: &mut StdRng,
    ) -> std::io::Result<()> {
        let mut in_force: Option<InForce> = None;
        for (at, step) in schedule {
            let at = started + at;
            // A fault ending before this step ends first (faults never overlap each other).
            if let Some(f) = in_force.take_if(|f| f.until <= at) {
                self.wait_until(f.until);
                self.undo(f)?;
            }
            self.wait_until(at);
            match step {
                Step::HolderPause(length) => {
                    let target = pick_holder(self.out_dir, self.contenders, rng);
                    let (name, child) = &self.contenders[target];
                    let (pid, name) = (child.id(), name.clone());
                    self.pauses
                        .push(std::thread::spawn(move || pause(pid, name, length)));
                }
                Step::Fault(kind, length) => {
                    if let Some(f) = in_force.take() {
                        self.undo(f)?;
                    }
                    in_force = Some(self.inject(kind, length, rng)?);
                }
            }
        }
        if let Some(f) = in_force {
            self.wait_until(f.until);
            self.undo(f)?;
        }
        Ok(())
    }

    fn inject(
        &mut self,
        kind: Nemesis,
        length: Duration,
        rng: &mut StdRng,
    ) -> std::io::Result<InForce> {
        let etcd: Vec<usize> = (0..ETCD_MEMBERS).collect();
        let leader = self.cluster.leader();
        let sent = now_micros();
        let mut stopped = None;
        let target = match kind {
            Nemesis::CutMinority => {
                let followers: Vec<usize> = etcd
                    .iter()
                    .copied()
                    .filter(|i| Some(*i) != leader)
                    .collect();
                let victim = followers[rng.random_range(0..followers.len())];
                self.cluster.net.cut_off(victim, &etcd)?;
                format!("etcd-{victim}")
            }
            Nemesis::CutReplica => {
                let r = rng.random_range(0..REPLICAS);
                self.cluster.net.cut_off(ETCD_MEMBERS + r, &etcd)?;
                format!("replica-r{r}")
            }
            Nemesis::IsolateLeader => {
                let victim = leader.unwrap_or_else(|| rng.random_range(0..ETCD_MEMBERS));
                let everyone: Vec<usize> = (0..ETCD_MEMBERS + REPLICAS).collect();
                self.cluster.net.cut_off(victim, &everyone)?;
                format!("etcd-{victim}")
            }
            Nemesis::PauseLeader => {
                let victim = leader.unwrap_or_else(|| rng.random_range(0..ETCD_MEMBERS));
                let pid = self.cluster.member_pid(victim);
                stopped = signal(pid, libc::SIGSTOP).then_some(pid);
                format!("etcd-{victim}")
            }
            Nemesis::PauseReplica => {
                let r = rng.random_range(0..REPLICAS);
                if let Some(pid) = self.cluster.replica_pid(r) {
                    stopped = signal(pid, libc::SIGSTOP).then_some(pid);
                }
                format!("replica-r{r}")
            }
        };
        Ok(InForce {
            kind,
            target,
            sent,
            stopped,
            until: Instant::now() + length,
        })
    }

    /// Heals or thaws `f`, and records it with the window from its start to now.
    fn undo(&mut self, f: InForce) -> std::io::Result<()> {
        match f.stopped {
            Some(pid) => {
                signal(pid, libc::SIGCONT);
            }
            None => self.cluster.net.heal_all()?,
        }
        self.log.record(&Event::Fault {
            kind: f.kind.name().into(),
            target: f.target,
            window: Window::since(f.sent),
        })
    }

    /// Sleeps until `at`, sampling the replicas' RSS every 50 ms meanwhile.
    fn wait_until(&mut self, at: Instant) {
        while Instant::now() < at {
            self.peak_rss = self.peak_rss.max(self.cluster.replicas_rss_kib());
            std::thread::sleep(Duration::from_millis(50).min(at - Instant::now()));
        }
    }

    /// Heals every link and thaws every server process (also after an error), then waits
    /// for the holder pauses and records them.
    fn finish(&mut self) -> std::io::Result<()> {
        let healed = self.cluster.net.heal_all();
        for i in 0..ETCD_MEMBERS {
            signal(self.cluster.member_pid(i), libc::SIGCONT);
        }
        for r in 0..REPLICAS {
            if let Some(pid) = self.cluster.replica_pid(r) {
                signal(pid, libc::SIGCONT);
            }
        }
        for t in std::mem::take(&mut self.pauses) {
            if let Ok(Some(event)) = t.join() {
                self.log.record(&event)?;
            }
        }
        healed
    }
}

/// Grants received by the contenders of each replica (contender `i` talks to replica
/// `i % REPLICAS`).
fn grants_per_replica(events: &[Event], children: &[(String, Child)]) -> [usize; REPLICAS] {
    let replica: BTreeMap<&str, usize> = children
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.as_str(), i % REPLICAS))
        .collect();
    let mut grants = [0; REPLICAS];
    for e in events {
        if let Event::Grant { proc, .. } = e {
            if let Some(r) = replica.get(proc.as_str()) {
                grants[*r] += 1;
            }
        }
    }
    grants
}

/// Grants whose answer arrived while a nemesis fault (not a holder pause) was in force.
fn grants_during_faults(events: &[Event]) -> usize {
    let faults: Vec<Window> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { kind, window, .. } if kind != "pause" => Some(*window),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter(|e| {
            matches!(e, Event::AcquireEnd { at, outcome: AcquireOutcome::Granted { .. }, .. }
                if faults.iter().any(|w| w.sent <= *at && *at <= w.recv))
        })
        .count()
}
