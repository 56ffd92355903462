//! The server's wait queue against full jitter on one hot key ([`crate::queue_bench`]), on
//! SQLite and on etcd: calls per grant, completion, utilisation and fairness.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use lock_lab::strategy::Strategy;

use super::{Context, Measured, Section};
use crate::queue_bench::{self, QueuePoint};
use crate::stats::Spread;
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: "Wait queue vs full jitter (live server)",
    measure,
};

/// The hold per acquisition.
const QUEUE_HOLD: Duration = Duration::from_millis(5);

/// The strategies compared: the queue, and full jitter at the SDK default.
const QUEUE_VS: [Strategy; 2] = [Strategy::ServerQueue, Strategy::FullJitter];

/// Every round's figures per (backend, N, strategy).
type Runs = BTreeMap<(&'static str, usize, Strategy), Vec<QueuePoint>>;

/// A figure of a point.
type Figure = fn(&QueuePoint) -> f64;

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
    let settings = &ctx.settings;
    println!(
        "\n# Wait queue vs full jitter, {} rounds, {} ms holds",
        settings.queue_rounds,
        QUEUE_HOLD.as_millis()
    );
    let mut runs = Runs::new();
    let mut key = 0;
    for (backend, addr) in backends {
        let base = format!("http://{addr}");
        for n in &settings.queue_n {
            for round in 0..settings.queue_rounds {
                for s in QUEUE_VS {
                    key += 1;
                    let p = client_rt.block_on(queue_bench::run_point(
                        &base,
                        *n,
                        s,
                        &format!("queue-{key}"),
                        QUEUE_HOLD,
                    ));
                    print_point(backend, *n, round, s, &p);
                    runs.entry((backend, *n, s)).or_default().push(p);
                }
            }
        }
    }
    drop((sqlite_rt, etcd_rt));
    render(ctx, &runs)
}

fn print_point(backend: &str, n: usize, round: usize, s: Strategy, p: &QueuePoint) {
    println!(
        "{backend:<6} N={n:<3} round {round} {:<26} {:>5.2} calls/grant {:>7.0} ms \
         utilisation {:.2} max/median {:.2} starvation {:.2} (steady {:.2}, \
         to release sent {:.2})",
        s.label(),
        p.calls_per_grant,
        p.completion_ms,
        p.utilisation,
        p.max_over_median,
        p.starvation,
        p.steady_starvation,
        p.starvation_to_send
    );
}

/// The spread of `figure` over the rounds of `key`.
fn spread(runs: &Runs, key: &(&str, usize, Strategy), figure: Figure) -> Spread {
    Spread::of(&runs[key].iter().map(figure).collect::<Vec<_>>())
}

fn render(ctx: &Context, runs: &Runs) -> Measured {
    let mut out = intro(ctx, &table_rows(runs));
    out.push_str(
        "\nReading the results: at N = 100 more contenders ask than the default cap of 64 \
         tickets per key admits; the rest are refused with 429 and back off as full jitter \
         does, hence more than one L4 call per grant and a larger max ÷ median wait there. \
         Starvation counts every acquisition, the start included, when all N L4s reach the \
         server at once; the steady column shows the queue once it has formed.\n",
    );
    let mut rows = Vec::new();
    for (backend, floor) in [("SQLite", 0.9), ("etcd", 0.8)] {
        if let Some(targets) = Targets::at_50(runs, backend) {
            out.push_str(&targets.text(floor));
            rows.extend(targets.rows(floor));
        }
    }
    println!("{out}");
    Measured { body: out, rows }
}

/// A table row per (backend, N, strategy), each cell median (min–max).
fn table_rows(runs: &Runs) -> String {
    let mut rows = String::new();
    for key in runs.keys() {
        let (backend, n, s) = key;
        let cell = |figure: Figure, decimals| spread(runs, key, figure).show(decimals);
        let ratio = |figure: Figure| cell(figure, 2).replace("inf", "∞");
        let _ = writeln!(
            rows,
            "| {backend} | {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.label(),
            cell(|p| p.calls_per_grant, 2),
            cell(|p| p.completion_ms, 0),
            cell(|p| p.utilisation, 2),
            cell(|p| p.max_over_median, 2),
            ratio(|p| p.starvation),
            ratio(|p| p.steady_starvation),
            ratio(|p| p.starvation_to_send),
        );
    }
    rows
}

fn intro(ctx: &Context, rows: &str) -> String {
    format!(
        "Command: `scripts/bench.sh` (or `bench queue`, release build). Machine: {machine}. \
         One key, N contenders started together (a barrier after each opened its session), \
         each acquiring it {rounds} times in a row (ASSUMPTION: 5, for steady state) and \
         holding it {hold} ms each time, all through the SDK (`LockClientSession::acquire`, \
         L4 calls counted at the transport): full jitter at the SDK default (base 50 ms, cap \
         2 s, `waitMillis` 0) and the server queue (the same with `waitMillis` 5000: each L4 \
         waits in the key's FIFO queue and is handed the lock). Budget 120 s per acquire \
         (ASSUMPTION, as in the live sweep, so both finish). lock-server (release build, \
         default configuration: 64 waiters per key, 1 s ticket grace period) in process on \
         its own 2-worker runtime: on SQLite in a temp dir, and as a replica over a \
         single-node etcd 3.4 in a temp dir. Completion: from the start until the last \
         release returned. A contender holds the key from its grant's arrival until its release \
         call returned: the server's tenure (from the commit that grants the key to the commit \
         that frees or hands it on), seen one answer late at both ends. Utilisation: share of \
         the completion time during which some contender held the key. Max ÷ median wait, a \
         wait being ask → grant. Starvation: the largest wait ÷ the time others held the key \
         during it, over acquisitions that waited ≥ 20 ms (1.0 = the key was never free while \
         that waiter waited); steady: the same without each contender's first acquisition \
         (the start, when all N ask at once); to release sent: the same with each hold ending \
         when its release was sent, which leaves the release's own round trip and commit out \
         of every tenure (the measure before 2026-12-02). Interleaved, {r} rounds; each cell \
         median (min–max).\n\n\
         | backend | N | strategy | L4 calls per grant | completion, ms | utilisation | max ÷ median wait | starvation | steady starvation | starvation, holds to release sent |\n\
         |---|---|---|---|---|---|---|---|---|---|\n{rows}",
        machine = ctx.machine,
        rounds = queue_bench::ROUNDS,
        hold = QUEUE_HOLD.as_millis(),
        r = ctx.settings.queue_rounds,
    )
}

/// The queue's figures at N = 50 on one backend (medians), against its targets.
struct Targets {
    backend: &'static str,
    calls: f64,
    utilisation: f64,
    starvation: f64,
    /// Completion ÷ full jitter's.
    completion: f64,
}

impl Targets {
    /// The figures of `backend` at N = 50; `None` if it was not measured there.
    fn at_50(runs: &Runs, backend: &'static str) -> Option<Targets> {
        let median = |s, figure: Figure| {
            let key = (backend, 50, s);
            runs.get(&key).map(|_| spread(runs, &key, figure).median)
        };
        let queue = |figure| median(Strategy::ServerQueue, figure);
        Some(Targets {
            backend,
            calls: queue(|p| p.calls_per_grant)?,
            utilisation: queue(|p| p.utilisation)?,
            starvation: queue(|p| p.starvation)?,
            completion: queue(|p| p.completion_ms)?
                / median(Strategy::FullJitter, |p| p.completion_ms)?,
        })
    }

    /// Whether each target is met: one call per grant, utilisation at least `floor`, no
    /// wait above 1.2× the others' holding, completion at most half full jitter's.
    fn met(&self, floor: f64) -> [bool; 4] {
        [
            self.calls <= 1.0,
            self.utilisation >= floor,
            self.starvation <= 1.2,
            self.completion <= 0.5,
        ]
    }

    fn text(&self, floor: f64) -> String {
        let Targets {
            backend,
            calls,
            utilisation: util,
            starvation: starved,
            completion,
        } = self;
        let [calls_met, util_met, starvation_met, completion_met] = self.met(floor).map(yes);
        format!(
            "\nTargets at N = 50 on {backend}: {calls:.2} L4 calls per grant (target 1.0: {calls_met}); \
             utilisation {util:.2} (target ≥ {floor}: {util_met}); starvation {starved:.2} (target ≤ 1.2: \
             {starvation_met}); completion {completion:.2}× full jitter's (target ≤ 0.5: {completion_met}).\n",
        )
    }

    fn rows(&self, floor: f64) -> Vec<SummaryRow> {
        let at = format!("queue, N = 50, {}", self.backend);
        let targets = [
            (
                format!("{at}: 1.0 L4 calls per grant"),
                format!("{:.2}", self.calls),
            ),
            (
                format!("{at}: utilisation ≥ {floor}"),
                format!("{:.2}", self.utilisation),
            ),
            (
                format!("{at}: no wait above 1.2× the others' holding"),
                format!("{:.2}", self.starvation),
            ),
            (
                format!("{at}: completion ≤ 0.5× full jitter's"),
                format!("{:.2}×", self.completion),
            ),
        ];
        targets
            .into_iter()
            .zip(self.met(floor))
            .map(|((target, measured), ok)| SummaryRow::new(target, measured, yes(ok)))
            .collect()
    }
}
