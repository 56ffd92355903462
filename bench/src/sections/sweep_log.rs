//! The live sweep's section re-rendered from what a `bench sweep` run printed, without
//! measuring again: its machine line and its per-round lines
//! (`N=.. round .. <strategy> <calls> calls/grant <ms> ms`).

use std::path::Path;

use super::strategies::Samples;
use super::{sweep, Context};
use crate::figures::STRATEGIES;

/// The section's body from the saved output at `log`.
pub fn render(ctx: &Context, log: &Path) -> String {
    let text = std::fs::read_to_string(log).expect("read log");
    // The machine line of the run that measured, not of this re-render.
    let machine = text
        .lines()
        .find_map(|l| l.strip_prefix("machine: "))
        .unwrap_or(&ctx.machine)
        .to_owned();
    let (calls, time) = parse(&text);
    sweep::render(ctx, &machine, None, &calls, &time).body
}

/// The L4 calls per grant and completion times of every round line of `text`.
fn parse(text: &str) -> (Samples, Samples) {
    let (mut calls, mut time) = (Samples::new(), Samples::new());
    for line in text.lines().filter(|l| l.starts_with("N=")) {
        let n: usize = line[2..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let s = STRATEGIES
            .into_iter()
            .find(|s| line.contains(s.label()))
            .expect("strategy name");
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "calls/grant").unwrap();
        calls
            .entry((s, n))
            .or_default()
            .push(words[at - 1].parse().unwrap());
        time.entry((s, n))
            .or_default()
            .push(words[at + 1].parse().unwrap());
    }
    (calls, time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_lab::strategy::Strategy;

    #[test]
    fn round_lines_become_samples_and_other_lines_are_skipped() {
        let text = "machine: m\n\
                    N=10  round 0 no jitter                  3.50 calls/grant       120 ms\n\
                    N=10  round 1 no jitter                  4.50 calls/grant       140 ms\n\
                    SDK N=50 round 0 base 5 ms               2.00 calls/grant        90 ms\n\
                    N=20  round 0 full jitter (SDK)          1.25 calls/grant        80 ms\n";
        let (calls, time) = parse(text);
        assert_eq!(calls[&(Strategy::NoJitter, 10)], [3.5, 4.5]);
        assert_eq!(time[&(Strategy::NoJitter, 10)], [120.0, 140.0]);
        assert_eq!(calls[&(Strategy::FullJitter, 20)], [1.25]);
        assert_eq!(calls.len(), 2);
    }
}
