//! Brooker's experiment in simulation ([`crate::occ_sim`]): calls and completion time per
//! strategy and N, and the published ordering checked point by point.

use std::time::Instant;

use lock_lab::chart::Titles;
use lock_lab::strategy::Strategy::{self, *};

use super::strategies::{self, Medians, Samples};
use super::{Context, Measured, Section};
use crate::figures::STRATEGIES;
use crate::occ_sim::{self, BROOKER};
use crate::summary::SummaryRow;

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: "Backoff strategies (simulation)",
    measure,
};

/// The client counts simulated.
const SIM_N: [usize; 10] = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// What every claim of the published ordering says when it holds everywhere.
const HOLDS: &str = "holds at every N";

fn measure(ctx: &Context) -> Measured {
    let settings = &ctx.settings;
    println!(
        "\n# Brooker's experiment, simulated ({} runs per point, {} seeds)",
        settings.sim_runs, settings.sim_seeds
    );
    let started = Instant::now();
    let (calls, time) = simulate(settings.sim_runs, settings.sim_seeds);
    let took = started.elapsed().as_secs_f64();
    let (calls, time) = (strategies::spreads(&calls), strategies::spreads(&time));
    let (c, t) = (strategies::medians(&calls), strategies::medians(&time));
    let ordering = Ordering::check(&c, &t);
    let mut out = intro(ctx, took);
    out.push_str("Total write calls per experiment (the work):\n\n");
    strategies::table(&mut out, "clients", &SIM_N, &calls, 0);
    out.push_str("\nCompletion time, ms (until the last client's write succeeded):\n\n");
    strategies::table(&mut out, "clients", &SIM_N, &time, 0);
    out.push('\n');
    out.push_str(&charts(ctx, &c, &t));
    out.push_str(&ordering.text());
    println!("{out}");
    Measured {
        body: out,
        rows: rows(&c, &ordering),
    }
}

/// Calls and completion time of every (strategy, N), one sample per seed.
fn simulate(runs: u32, seeds: u64) -> (Samples, Samples) {
    let (mut calls, mut time) = (Samples::new(), Samples::new());
    for n in SIM_N {
        for s in STRATEGIES {
            for seed in 1..=seeds {
                let (c, t) = occ_sim::run_point(n, s, BROOKER, runs, seed);
                calls.entry((s, n)).or_default().push(c);
                time.entry((s, n)).or_default().push(t);
            }
        }
    }
    (calls, time)
}

fn intro(ctx: &Context, took: f64) -> String {
    let (machine, settings) = (&ctx.machine, &ctx.settings);
    format!(
        "Command: `scripts/bench.sh` (or `bench sim`). Machine: {machine}. Pure CPU and \
         deterministic: the same seeds give the same figures on any machine ({took:.1} s here).\n\n\
         Brooker's experiment (AWS Architecture Blog, \"Exponential Backoff And Jitter\", and \
         its public simulator) rebuilt as a seeded discrete-event simulation \
         (`bench/src/occ_sim.rs`): N clients each write one row once with optimistic \
         concurrency (read version, write with it; a stale write fails, the client backs off \
         and reads again); every message crosses a network delay of |Normal(10 ms, 2 ms)|; \
         base 5 ms, cap 2 s; the n-th retry (n from 1, as in his simulator) waits \
         `backoff(n)` on top of the network delay. Each cell: the mean over {} experiments, \
         as median (min–max) over {} independent seeds.\n\n\
         Delays are whole milliseconds, as the SDK sleeps them. The strategies other than \
         full jitter exist only in the experiments library (`lab/src/strategy.rs`); full \
         jitter there is the SDK's own backoff (`lock-wasm/src/backoff.rs`).\n\n",
        settings.sim_runs, settings.sim_seeds
    )
}

/// The calls and completion-time figures, each linked on its own line.
fn charts(ctx: &Context, calls: &Medians, time: &Medians) -> String {
    let calls = strategies::chart(
        &ctx.output,
        "sim-calls.svg",
        "simulated calls vs N",
        Titles::new(
            "Simulated OCC: total calls vs clients",
            "clients (N)",
            "write calls",
        ),
        calls,
        &SIM_N,
    );
    let time = strategies::chart(
        &ctx.output,
        "sim-time.svg",
        "simulated completion time vs N",
        Titles::new(
            "Simulated OCC: completion time vs clients",
            "clients (N)",
            "ms",
        ),
        time,
        &SIM_N,
    );
    format!("{calls}\n{time}")
}

/// The published ordering's claims, each [`HOLDS`] or the Ns where it fails.
struct Ordering {
    least_work: String,
    equal_more_work: String,
    equal_more_time: String,
    none_worst_work: String,
    none_worst_time: String,
}

impl Ordering {
    /// Checks every claim on the medians of calls `c` and time `t`.
    fn check(c: &Medians, t: &Medians) -> Ordering {
        let get = |m: &Medians, s: Strategy, n: usize| m[&(s, n)];
        let least = |m: &Medians, best: Strategy, n| {
            STRATEGIES.iter().all(|s| get(m, best, n) <= get(m, *s, n))
        };
        let most = |m: &Medians, worst: Strategy, n| {
            STRATEGIES.iter().all(|s| get(m, worst, n) >= get(m, *s, n))
        };
        Ordering {
            least_work: where_fails(|n| least(c, FullJitter, n)),
            equal_more_work: where_fails(|n| get(c, EqualJitter, n) > get(c, FullJitter, n)),
            equal_more_time: where_fails(|n| get(t, EqualJitter, n) > 1.2 * get(t, FullJitter, n)),
            none_worst_work: where_fails(|n| most(c, NoJitter, n)),
            none_worst_time: where_fails(|n| most(t, NoJitter, n)),
        }
    }

    fn holds(&self) -> bool {
        [
            &self.least_work,
            &self.equal_more_work,
            &self.equal_more_time,
            &self.none_worst_work,
            &self.none_worst_time,
        ]
        .iter()
        .all(|s| s.as_str() == HOLDS)
    }

    fn text(&self) -> String {
        let Ordering {
            least_work,
            equal_more_work,
            equal_more_time,
            none_worst_work,
            none_worst_time,
        } = self;
        format!(
            "\n\nThe published ordering, checked point by point on the medians:\n\n\
             - full jitter does the least work: {least_work};\n\
             - equal jitter does more work than full jitter: {equal_more_work};\n\
             - equal jitter takes much (> 1.2×) more time than full jitter: {equal_more_time};\n\
             - no jitter does the most work: {none_worst_work};\n\
             - no jitter takes the most time: {none_worst_time}.\n"
        )
    }
}

/// The Ns at which `claim(n)` fails, as text ([`HOLDS`] when none).
fn where_fails(claim: impl Fn(usize) -> bool) -> String {
    let failed: Vec<String> = SIM_N
        .iter()
        .filter(|n| !claim(**n))
        .map(|n| n.to_string())
        .collect();
    if failed.is_empty() {
        HOLDS.into()
    } else {
        format!("**fails at N = {}**", failed.join(", "))
    }
}

/// The summary rows: full jitter's work against no jitter's at N = 50, and the ordering.
fn rows(c: &Medians, ordering: &Ordering) -> Vec<SummaryRow> {
    let (full, none) = (c[&(FullJitter, 50)], c[&(NoJitter, 50)]);
    vec![
        SummaryRow::new(
            "simulation, N = 50: full jitter calls / no-jitter calls (published: well below 1)",
            format!("{:.2} ({full:.0} vs {none:.0})", full / none),
            if full < none { "yes" } else { "no" },
        ),
        SummaryRow::new(
            "simulation: published ordering (full jitter least work, equal jitter more work and time, no jitter worst)",
            "see section",
            if ordering.holds() {
                "yes"
            } else {
                "partly (see section)"
            },
        ),
    ]
}
