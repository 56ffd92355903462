//! The dashboard's Brooker sweep as `tests/browser/sweep.mjs --out` saves it (every seed's
//! result is the dashboard's own JSON export), read back as per-(strategy, N) samples of L4
//! calls per grant and completion time, to set beside the native sweep at the same N.

use std::collections::BTreeMap;
use std::path::Path;

use lock_lab::strategy::Strategy;
use serde::Deserialize;

/// Samples per (strategy, N), one per seed.
pub type Samples = BTreeMap<(Strategy, usize), Vec<f64>>;

/// One saved sweep run in the browser.
#[derive(Debug, Clone, Default)]
pub struct DashboardSweep {
    /// The protocol the dashboard named for its requests (`HTTP/2`, `HTTP/1.1`).
    pub protocol: String,
    /// L4 calls per grant.
    pub calls_per_grant: Samples,
    /// Completion time, ms.
    pub completion_ms: Samples,
}

#[derive(Deserialize)]
struct Saved {
    protocol: String,
    results: Vec<Export>,
}

#[derive(Deserialize)]
struct Export {
    points: Vec<Point>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Point {
    strategy: Strategy,
    contenders: usize,
    counters: Counters,
    completion_millis: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    l4_calls: u64,
    grants: u64,
}

/// Reads a file written by `sweep.mjs --out`.
pub fn read(path: &Path) -> Result<DashboardSweep, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse(text: &str) -> Result<DashboardSweep, serde_json::Error> {
    let saved: Saved = serde_json::from_str(text)?;
    let mut sweep = DashboardSweep {
        protocol: saved.protocol,
        ..Default::default()
    };
    for point in saved.results.iter().flat_map(|r| &r.points) {
        let key = (point.strategy, point.contenders);
        let per_grant = point.counters.l4_calls as f64 / point.counters.grants.max(1) as f64;
        sweep
            .calls_per_grant
            .entry(key)
            .or_default()
            .push(per_grant);
        sweep
            .completion_ms
            .entry(key)
            .or_default()
            .push(point.completion_millis);
    }
    Ok(sweep)
}

impl DashboardSweep {
    /// The contender counts measured, ascending.
    pub fn contenders(&self) -> Vec<usize> {
        let mut ns: Vec<usize> = self.calls_per_grant.keys().map(|(_, n)| *n).collect();
        ns.sort_unstable();
        ns.dedup();
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_of_every_seed_become_samples_per_grant() {
        let text = r#"{"protocol":"HTTP/2","results":[
            {"points":[{"strategy":"fullJitter","contenders":10,"counters":{"l4Calls":30,"grants":10,"other":1},"completionMillis":50.0}]},
            {"points":[{"strategy":"fullJitter","contenders":10,"counters":{"l4Calls":40,"grants":10},"completionMillis":70.0},
                       {"strategy":"noJitter","contenders":40,"counters":{"l4Calls":400,"grants":40},"completionMillis":900.0}]}]}"#;
        let sweep = parse(text).unwrap();
        assert_eq!(sweep.protocol, "HTTP/2");
        assert_eq!(
            sweep.calls_per_grant[&(Strategy::FullJitter, 10)],
            [3.0, 4.0]
        );
        assert_eq!(sweep.completion_ms[&(Strategy::NoJitter, 40)], [900.0]);
        assert_eq!(sweep.contenders(), [10, 40]);
    }
}
