//! Closed-loop windows of several targets taken in turn (A, B, C, A, B, …) at each client
//! count, so load on the machine hits them alike; the figures of every target's rounds.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::Settings;
use crate::cycles::{drive, warm_up, Run, Target};
use crate::stats::{quantile, ratio, Spread};

/// The client counts every target is driven at.
pub const CONCURRENCY: [usize; 3] = [1, 10, 50];

/// One figure of a window.
#[derive(Debug, Clone, Copy)]
pub enum Figure {
    /// Cycles per second.
    Throughput,
    /// Median acquire latency, ms.
    P50,
    /// 99th-percentile acquire latency, ms.
    P99,
}

/// A target's windows at one client count, one entry per round.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    throughput: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl Rounds {
    /// The spread of `figure` over the rounds.
    pub fn spread(&self, figure: Figure) -> Spread {
        Spread::of(match figure {
            Figure::Throughput => &self.throughput,
            Figure::P50 => &self.p50,
            Figure::P99 => &self.p99,
        })
    }

    /// The median of `figure` over the rounds.
    pub fn median(&self, figure: Figure) -> f64 {
        self.spread(figure).median
    }

    /// The cycles/s, p50 and p99 cells of a table row, each median (min–max).
    pub fn cells(&self) -> String {
        format!(
            "{} | {} | {}",
            self.spread(Figure::Throughput).show(0),
            self.spread(Figure::P50).show(2),
            self.spread(Figure::P99).show(2)
        )
    }

    /// `figure`'s median ÷ `base`'s, as a table cell.
    pub fn ratio_to(&self, base: &Rounds, figure: Figure) -> String {
        ratio(self.median(figure), base.median(figure))
    }

    fn push(&mut self, throughput: f64, (p50, p99): (f64, f64)) {
        self.throughput.push(throughput);
        self.p50.push(p50);
        self.p99.push(p99);
    }
}

/// The rounds per (client count, target index).
pub type Results = BTreeMap<(usize, usize), Rounds>;

/// After a warm-up, every target (named by `names`, same order) driven closed-loop for
/// `--seconds` at each client count, interleaved for `--rounds` rounds.
pub fn measure(settings: &Settings, rt: &Runtime, targets: &[Target], names: &[&str]) -> Results {
    let window = Duration::from_secs(settings.seconds);
    rt.block_on(warm_up(targets, 10));
    let mut results = Results::new();
    for c in CONCURRENCY {
        for round in 0..settings.rounds {
            for (i, t) in targets.iter().enumerate() {
                let run = rt.block_on(drive(t, c, window));
                let latency = print_window(c, round, names[i], &run);
                results
                    .entry((c, i))
                    .or_default()
                    .push(run.throughput(), latency);
            }
        }
    }
    results
}

/// A table under `header` with a row per client count and target (named by `names`): its
/// cycles/s, p50 and p99, then the ratio of each of `ratios` to the first target's.
pub fn table(header: &str, names: &[&str], results: &Results, ratios: &[Figure]) -> String {
    let mut table = header.to_owned();
    for c in CONCURRENCY {
        let base = &results[&(c, 0)];
        for (i, name) in names.iter().enumerate() {
            let rounds = &results[&(c, i)];
            let ratios: Vec<String> = ratios.iter().map(|f| rounds.ratio_to(base, *f)).collect();
            let _ = writeln!(
                table,
                "| {c} | {name} | {} | {} |",
                rounds.cells(),
                ratios.join(" | ")
            );
        }
    }
    table
}

/// Prints one window's line; its acquire p50 and p99, ms.
pub fn print_window(clients: usize, round: usize, name: &str, run: &Run) -> (f64, f64) {
    let p50 = quantile(&run.latencies_ms, 0.5).unwrap_or(0.0);
    let p99 = quantile(&run.latencies_ms, 0.99).unwrap_or(0.0);
    println!(
        "c={clients:<3} round {round} {name:<28} {:>8.0} cycles/s  p50 {p50:>6.2} ms  p99 {p99:>6.2} ms",
        run.throughput()
    );
    (p50, p99)
}
