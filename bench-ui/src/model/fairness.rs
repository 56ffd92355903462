//! Fairness and utilisation of a run: how long each contender waited for its grants, how
//! unevenly, and how much of the run its key was actually held.
//!
//! - A *wait* is one acquisition's time from asking to the grant's arrival (client clock).
//! - The fairness figure is **max wait ÷ median wait** over every grant of the run: 1 when
//!   everyone waited alike, large when someone waited far longer than is typical (the
//!   starved contender of an unordered race). Jain's index is not used: it summarises
//!   evenness in a way that hides the one starved waiter this figure is about.
//! - *Utilisation* is the share of the run during which a key was held, averaged over the
//!   run's keys, measured twice: from the holds the client saw (grant arrival to release
//!   sent, overlaps merged) and from the L7 samples (the time between two samples counts as
//!   held when the first saw a holder).
//! - *Overtakes* count the grants that came before the grant of a contender who had asked
//!   for the same key more than [`ORDER_SLACK_MS`] earlier: 0 for a strict queue.

use super::record::{Hold, RunRecord, Sample};

/// Asks this close together may reach the server in either order, so neither overtakes the
/// other (ASSUMPTION: 50 ms — requests the page sends together race over separate
/// connections; a queue served in order never lets a later ask through by more).
pub const ORDER_SLACK_MS: f64 = 50.0;

/// One contender's waits, ms.
#[derive(Debug, Clone, PartialEq)]
pub struct ContenderWaits {
    /// Contender index.
    pub session: u32,
    /// Grants it got.
    pub grants: usize,
    /// Median wait.
    pub p50: f64,
    /// 99th percentile (nearest rank; the largest wait below 100 grants).
    pub p99: f64,
    /// Longest wait.
    pub max: f64,
}

/// Everything the fairness panel shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fairness {
    /// Per contender that got at least one grant, by index.
    pub contenders: Vec<ContenderWaits>,
    /// Median of every wait, ms.
    pub median_wait: Option<f64>,
    /// Longest wait, ms.
    pub max_wait: Option<f64>,
    /// Utilisation from the client's holds, in `[0, 1]`.
    pub utilisation_client: Option<f64>,
    /// Utilisation from L7, in `[0, 1]`.
    pub utilisation_l7: Option<f64>,
    /// Grants that overtook an earlier ask (see the module docs).
    pub overtakes: usize,
}

impl Fairness {
    /// Derives the figures from a run (finished or running: "now" is the latest time seen).
    pub fn build(record: &RunRecord) -> Fairness {
        let mut all: Vec<f64> = record.holds.iter().map(wait).collect();
        sort(&mut all);
        let sessions = record.holds.iter().map(|h| h.session).max();
        let contenders = (0..sessions.map_or(0, |s| s + 1))
            .filter_map(|session| {
                let mut waits: Vec<f64> = record
                    .holds
                    .iter()
                    .filter(|h| h.session == session)
                    .map(wait)
                    .collect();
                sort(&mut waits);
                Some(ContenderWaits {
                    session,
                    grants: waits.len(),
                    p50: quantile(&waits, 0.5)?,
                    p99: quantile(&waits, 0.99)?,
                    max: *waits.last()?,
                })
            })
            .collect();
        let end = run_end(record);
        Fairness {
            contenders,
            median_wait: quantile(&all, 0.5),
            max_wait: all.last().copied(),
            utilisation_client: mean(keys(record).map(|k| held_by_client(&record.holds, k, end))),
            utilisation_l7: mean(keys(record).map(|k| held_in_samples(&record.samples, k))),
            overtakes: keys(record).map(|k| overtakes(&record.holds, k)).sum(),
        }
    }

    /// The fairness figure: max wait ÷ median wait (`None` without a grant or with a zero
    /// median).
    pub fn max_over_median(&self) -> Option<f64> {
        let (max, median) = (self.max_wait?, self.median_wait?);
        (median > 0.0).then(|| max / median)
    }
}

/// One acquisition's wait: from asking to the grant's arrival, ms.
pub(crate) fn wait(hold: &Hold) -> f64 {
    (hold.granted_at - hold.asked_at).max(0.0)
}

fn sort(values: &mut [f64]) {
    values.sort_by(f64::total_cmp);
}

/// Nearest-rank quantile of sorted `values`.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

fn mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let values: Vec<f64> = values.flatten().collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The latest instant the record knows of, ms since start.
fn run_end(record: &RunRecord) -> f64 {
    let seen = record
        .holds
        .iter()
        .map(|h| h.released_at.unwrap_or(h.granted_at))
        .chain(record.samples.iter().map(|s| s.at))
        .fold(0.0, f64::max);
    record.completed_millis.unwrap_or(seen).max(seen)
}

/// The run's keys, each once, in first-seen order.
fn keys(record: &RunRecord) -> impl Iterator<Item = &str> {
    let mut seen = Vec::new();
    for key in record.holds.iter().map(|h| h.key.as_str()) {
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen.into_iter()
}

/// Share of `[0, end]` during which the client held `key` (a hold still open lasts to `end`).
fn held_by_client(holds: &[Hold], key: &str, end: f64) -> Option<f64> {
    let mut spans: Vec<(f64, f64)> = holds
        .iter()
        .filter(|h| h.key == key)
        .map(|h| (h.granted_at, h.released_at.unwrap_or(end)))
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut held = 0.0;
    let mut covered_to = 0.0_f64;
    for (start, stop) in spans {
        let start = start.max(covered_to);
        if stop > start {
            held += stop - start;
            covered_to = stop;
        }
    }
    (end > 0.0).then(|| (held / end).clamp(0.0, 1.0))
}

/// Grants of `key` made while someone who had asked more than [`ORDER_SLACK_MS`] earlier was
/// still waiting (granted later).
fn overtakes(holds: &[Hold], key: &str) -> usize {
    let mut mine: Vec<&Hold> = holds.iter().filter(|h| h.key == key).collect();
    mine.sort_by(|a, b| a.granted_at.total_cmp(&b.granted_at));
    // The earliest ask among the grants after each position.
    let mut earliest_after = vec![f64::INFINITY; mine.len() + 1];
    for (i, hold) in mine.iter().enumerate().rev() {
        earliest_after[i] = earliest_after[i + 1].min(hold.asked_at);
    }
    mine.iter()
        .enumerate()
        .filter(|(i, hold)| earliest_after[i + 1] < hold.asked_at - ORDER_SLACK_MS)
        .count()
}

/// Share of the sampled span of `key` whose samples saw a holder.
fn held_in_samples(samples: &[Sample], key: &str) -> Option<f64> {
    let mut mine: Vec<&Sample> = samples.iter().filter(|s| s.key == key).collect();
    mine.sort_by(|a, b| a.at.total_cmp(&b.at));
    let span = mine.last()?.at - mine.first()?.at;
    let held: f64 = mine
        .windows(2)
        .filter(|pair| pair[0].is_held())
        .map(|pair| pair[1].at - pair[0].at)
        .sum();
    (span > 0.0).then(|| held / span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::ExperimentConfig;

    fn hold(session: u32, asked: f64, granted: f64, released: f64) -> Hold {
        Hold {
            session,
            key: "k".into(),
            fencing_token: 1,
            mode: Default::default(),
            limit: None,
            attempts: 1,
            asked_at: asked,
            granted_at: granted,
            released_at: Some(released),
            ledger_accepted: true,
        }
    }

    fn sample(at: f64, held: bool) -> Sample {
        Sample {
            at,
            key: "k".into(),
            mode: held.then_some(lock_api::LockMode::Exclusive),
            holders: held.then(|| ("s0".to_string(), 1)).into_iter().collect(),
            limit: None,
            waiter_count: 0,
        }
    }

    fn record(holds: Vec<Hold>, samples: Vec<Sample>, completed: f64) -> RunRecord {
        let mut r = RunRecord::new("r", ExperimentConfig::default());
        r.holds = holds;
        r.samples = samples;
        r.completed_millis = Some(completed);
        r
    }

    #[test]
    fn waits_per_contender_and_the_fairness_figure() {
        let r = record(
            vec![
                hold(0, 0.0, 10.0, 20.0),
                hold(1, 0.0, 20.0, 30.0),
                hold(1, 30.0, 70.0, 80.0),
                hold(2, 0.0, 30.0, 40.0),
            ],
            vec![],
            80.0,
        );
        let f = Fairness::build(&r);
        assert_eq!(f.contenders.len(), 3);
        let second = &f.contenders[1];
        assert_eq!((second.grants, second.p50, second.max), (2, 20.0, 40.0));
        assert_eq!(second.p99, 40.0);
        // Waits 10, 20, 30, 40: median (nearest rank) 20, max 40.
        assert_eq!(f.median_wait, Some(20.0));
        assert_eq!(f.max_over_median(), Some(2.0));
        assert_eq!(f.overtakes, 0, "granted in the order asked");
    }

    #[test]
    fn a_later_ask_granted_first_overtakes_unless_they_asked_together() {
        let r = record(
            vec![
                hold(0, 0.0, 500.0, 510.0),
                // Asked 100 ms after contender 0, granted before it: an overtake.
                hold(1, 100.0, 200.0, 210.0),
                // Asked 10 ms after contender 0: within the slack, not an overtake.
                hold(2, 10.0, 300.0, 310.0),
            ],
            vec![],
            510.0,
        );
        assert_eq!(Fairness::build(&r).overtakes, 1);
    }

    #[test]
    fn utilisation_merges_overlaps_and_counts_gaps() {
        // Held 0–20 and 10–30 (merged: 0–30), free 30–40, held 40–50: 40 of 50 ms.
        let r = record(
            vec![
                hold(0, 0.0, 0.0, 20.0),
                hold(1, 0.0, 10.0, 30.0),
                hold(2, 0.0, 40.0, 50.0),
            ],
            vec![
                sample(0.0, true),
                sample(30.0, false),
                sample(40.0, true),
                sample(50.0, false),
            ],
            50.0,
        );
        let f = Fairness::build(&r);
        assert!((f.utilisation_client.unwrap() - 0.8).abs() < 1e-9);
        assert!((f.utilisation_l7.unwrap() - 0.8).abs() < 1e-9);
    }

    #[test]
    fn an_empty_run_has_no_figures() {
        let f = Fairness::build(&record(vec![], vec![], 10.0));
        assert_eq!(f, Fairness::default());
        assert_eq!(f.max_over_median(), None);
    }
}
