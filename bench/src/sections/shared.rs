//! Shared holds on SQLite and on etcd ([`crate::shared_bench`]): readers on one key against
//! the same clients on exclusive keys of their own, a writer's wait under a continuous read
//! load against the longest read hold, and a semaphore's utilisation of its permits.

use std::fmt::Write;
use std::time::Duration;

use super::{Context, Measured, Section};
use crate::shared_bench::{self, SemaphorePoint, WriterWait};
use crate::stats::{quantile, Spread};
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: "Shared holds: readers, writers and semaphores (live server)",
    measure,
};

/// Clients of the reader and semaphore figures.
const CLIENTS: usize = 50;
/// Readers of the writer-wait figure (ASSUMPTION: 10, staggered, so the key is never free).
const READERS: usize = 10;
/// Each read hold of the writer-wait figure.
const READ_HOLD: Duration = Duration::from_millis(50);
/// Writes per writer-wait run.
const WRITES: usize = 20;
/// The semaphore's permits.
const PERMITS: u32 = 5;
/// Each permit's hold (as the queue bench's hold per acquisition).
const PERMIT_HOLD: Duration = Duration::from_millis(5);

/// One backend's rounds.
#[derive(Default)]
struct Rounds {
    shared: Vec<f64>,
    exclusive: Vec<f64>,
    /// L4 calls per cycle of the shared and the exclusive runs.
    shared_calls: Vec<f64>,
    exclusive_calls: Vec<f64>,
    writes: Vec<WriterWait>,
    semaphore: Vec<SemaphorePoint>,
}

fn measure(ctx: &Context) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = systems::start_etcd();
    let sqlite_rt = systems::runtime("lock-server");
    let etcd_rt = systems::runtime("replica");
    let client_rt = systems::runtime("client");
    let backends = [
        ("SQLite", systems::start_lock_server(&sqlite_rt, dir.path())),
        (
            "etcd",
            systems::start_lock_server_on_etcd(&etcd_rt, dir.path(), etcd.addr),
        ),
    ];
    let window = Duration::from_secs(ctx.settings.seconds);
    println!(
        "\n# Shared holds, {} rounds, {} s windows",
        ctx.settings.rounds, ctx.settings.seconds
    );
    let mut all = Vec::new();
    let mut run = 0;
    for (backend, addr) in backends {
        let base = format!("http://{addr}");
        let mut r = Rounds::default();
        for round in 0..ctx.settings.rounds {
            run += 1;
            let key = |what: &str| format!("shared-{run}/{what}");
            // Alternate which goes first, so neither always runs on a warmer server.
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for shared in order {
                let cycles = client_rt.block_on(shared_bench::read_cycles(
                    &base,
                    CLIENTS,
                    shared,
                    &key(if shared { "read" } else { "own" }),
                    window,
                ));
                if shared {
                    r.shared.push(cycles.per_second);
                    r.shared_calls.push(cycles.calls_per_cycle);
                } else {
                    r.exclusive.push(cycles.per_second);
                    r.exclusive_calls.push(cycles.calls_per_cycle);
                }
            }
            let w = client_rt.block_on(shared_bench::writer_wait(
                &base,
                READERS,
                READ_HOLD,
                WRITES,
                &key("rw"),
            ));
            let s = client_rt.block_on(shared_bench::semaphore(
                &base,
                CLIENTS,
                PERMITS,
                PERMIT_HOLD,
                &key("sem"),
            ));
            println!(
                "{backend:<6} round {round}: readers {:.0}/s ({:.2} L4/cycle) vs own keys {:.0}/s ({:.2}); writer wait p50 {:.1} ms max {:.1} ms, longest read {:.1} ms ({} reads); semaphore utilisation {:.2}, most at once {}, {:.0} ms",
                r.shared[round],
                r.shared_calls[round],
                r.exclusive[round],
                r.exclusive_calls[round],
                median(&w.waits_ms),
                max(&w.waits_ms),
                w.longest_read_ms,
                w.reads,
                s.utilisation,
                s.most_at_once,
                s.completion_ms
            );
            r.writes.push(w);
            r.semaphore.push(s);
        }
        all.push((backend, r));
    }
    drop((sqlite_rt, etcd_rt));
    render(ctx, &all)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, 0.5).unwrap_or(f64::NAN)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

/// One backend's figures, each over its rounds.
struct Figures {
    shared: Spread,
    exclusive: Spread,
    shared_calls: Spread,
    exclusive_calls: Spread,
    /// Shared ÷ exclusive, per round.
    ratio: Spread,
    wait_p50: Spread,
    wait_max: Spread,
    longest_read: Spread,
    /// The longest wait ÷ the longest read hold, per round.
    wait_ratio: Spread,
    utilisation: Spread,
    most_at_once: usize,
}

impl Figures {
    fn of(r: &Rounds) -> Figures {
        let per =
            |f: &dyn Fn(usize) -> f64| Spread::of(&(0..r.shared.len()).map(f).collect::<Vec<_>>());
        Figures {
            shared: Spread::of(&r.shared),
            exclusive: Spread::of(&r.exclusive),
            shared_calls: Spread::of(&r.shared_calls),
            exclusive_calls: Spread::of(&r.exclusive_calls),
            ratio: per(&|i| r.shared[i] / r.exclusive[i]),
            wait_p50: per(&|i| median(&r.writes[i].waits_ms)),
            wait_max: per(&|i| max(&r.writes[i].waits_ms)),
            longest_read: per(&|i| r.writes[i].longest_read_ms),
            wait_ratio: per(&|i| max(&r.writes[i].waits_ms) / r.writes[i].longest_read_ms),
            utilisation: per(&|i| r.semaphore[i].utilisation),
            most_at_once: r
                .semaphore
                .iter()
                .map(|s| s.most_at_once)
                .max()
                .unwrap_or(0),
        }
    }

    /// Whether each target is met: readers ≥ 0.8× own keys, the longest wait ≤ 2× the
    /// longest read hold, utilisation ≥ 0.9.
    fn met(&self) -> [bool; 3] {
        [
            self.ratio.median >= 0.8,
            self.wait_ratio.median <= 2.0,
            self.utilisation.median >= 0.9,
        ]
    }
}

fn render(ctx: &Context, all: &[(&'static str, Rounds)]) -> Measured {
    let mut table = String::new();
    let mut rows = Vec::new();
    let mut targets = String::new();
    for (backend, r) in all {
        let f = Figures::of(r);
        let _ = writeln!(
            table,
            "| {backend} | {} | {} | {} | {} | **{:.2}×** | {} | {} | {} | **{:.2}×** | **{}** | {} |",
            f.shared.show(0),
            f.shared_calls.show(2),
            f.exclusive.show(0),
            f.exclusive_calls.show(2),
            f.ratio.median,
            f.wait_p50.show(1),
            f.wait_max.show(1),
            f.longest_read.show(1),
            f.wait_ratio.median,
            f.utilisation.show(2),
            f.most_at_once,
        );
        let [readers, writer, permits] = f.met();
        let _ = writeln!(
            targets,
            "\nTargets on {backend}: readers {:.2}× the cycles/s of exclusive keys of their own \
             (target ≥ 0.8: {}); longest writer wait {:.2}× the longest read hold (target ≤ 2: \
             {}); semaphore utilisation {:.2} (target ≥ 0.9: {}).",
            f.ratio.median,
            yes(readers),
            f.wait_ratio.median,
            yes(writer),
            f.utilisation.median,
            yes(permits),
        );
        rows.extend([
            SummaryRow::new(
                format!("shared holds, {backend}: {CLIENTS} readers on one key ≥ 0.8× the same clients on exclusive keys of their own"),
                format!("{:.2}×", f.ratio.median),
                yes(readers),
            ),
            SummaryRow::new(
                format!("shared holds, {backend}: writer wait under continuous reads ≤ 2× the longest read hold"),
                format!("{:.2}×", f.wait_ratio.median),
                yes(writer),
            ),
            SummaryRow::new(
                format!("shared holds, {backend}: semaphore of {PERMITS} permits, {CLIENTS} contenders, utilisation ≥ 0.9"),
                format!("{:.2}", f.utilisation.median),
                yes(permits),
            ),
        ]);
    }
    let body = format!(
        "Command: `scripts/bench.sh` (or `bench shared`, release build). Machine: {machine}. \
         lock-server (release build, default configuration) in process on its own 2-worker \
         runtime, on SQLite in a temp dir and as a replica over a single-node etcd 3.4; the \
         clients on a runtime of their own, each with its own session, all through the SDK \
         (`LockClientSession::acquire_hold`) over one HTTP/1.1 transport. A hold lasts from \
         its grant's arrival until its release call returned.\n\n\
         - Readers: {CLIENTS} clients cycle acquire+release (no hold between) on one key in \
         shared mode for {secs} s, against the same {CLIENTS} clients each cycling exclusively \
         on a key of its own (no contention at all: the baseline), SDK default policy \
         (`waitMillis` 0).\n\
         - Writer wait: {READERS} readers hold one key {read} ms each and re-acquire at once, \
         started {step} ms apart, so the key is never free of readers; one writer acquires it \
         {WRITES} times, each after a random pause of up to {read} ms, and holds it 1 ms. Every \
         L4 waits in the key's FIFO queue (`waitMillis` 5000), so readers arriving after a \
         waiting writer queue behind it. The figure: the longest writer wait (ask → grant) ÷ \
         the longest read hold, per round.\n\
         - Semaphore: {CLIENTS} contenders start together and take a permit of a semaphore of \
         {PERMITS} (shared holds with `limit` {PERMITS}) {rounds} times each, in the queue \
         (`waitMillis` 5000), holding it {permit} ms. Utilisation: permit-time held (at most \
         {PERMITS} counted at once) ÷ ({PERMITS} × the time from the start until the last \
         release returned).\n\n\
         Interleaved, {r} rounds per backend; each cell median (min–max).\n\n\
         | backend | readers on one key, shared, cycles/s | L4 calls per cycle | own exclusive keys, cycles/s | L4 calls per cycle | shared ÷ own keys | writer wait p50, ms | writer wait max, ms | longest read hold, ms | max wait ÷ longest read | semaphore utilisation | most permits held at once (client's view) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n{table}{targets}",
        machine = ctx.machine,
        secs = ctx.settings.seconds,
        read = READ_HOLD.as_millis(),
        step = READ_HOLD.as_millis() / READERS as u128,
        permit = PERMIT_HOLD.as_millis(),
        rounds = shared_bench::ROUNDS,
        r = ctx.settings.rounds,
    );
    println!("{body}");
    Measured { body, rows }
}
