//! `/metrics` in the Prometheus text format, hand-written: a histogram, a few counters and
//! gauges do not justify a metrics stack. No metric carries a key, session, client or token
//! label (cardinality budget, C4); `outcome`, `mode`, `reason` and `route` are the only
//! labels and their values are closed sets.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use lock_api::Unavailability;

use crate::store::StoreCounts;

/// Histogram bucket bounds of `lock_acquire_duration_seconds` (ASSUMPTION: 0.5 ms … 30 s,
/// covering both an uncontended grant and the longest server-side wait).
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0,
];

/// How an L4 request ended; the closed set of `outcome` label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Granted,
    Contended,
    ContentionExceeded,
    NotLeader,
    /// The store could not write (503 STORE_UNAVAILABLE).
    StoreUnavailable,
    SessionNotFound,
    ValidationFailed,
    /// The key is outside the client's `keyPrefixes` (403).
    Forbidden,
    /// A shared hold under another limit than the key's (409 LIMIT_MISMATCH).
    LimitMismatch,
    /// An exclusive L4 of a shared holder (409 UPGRADE_NOT_ALLOWED).
    UpgradeNotAllowed,
    Error,
}

impl Outcome {
    const ALL: [Outcome; 11] = [
        Outcome::Granted,
        Outcome::Contended,
        Outcome::ContentionExceeded,
        Outcome::NotLeader,
        Outcome::StoreUnavailable,
        Outcome::SessionNotFound,
        Outcome::ValidationFailed,
        Outcome::Forbidden,
        Outcome::LimitMismatch,
        Outcome::UpgradeNotAllowed,
        Outcome::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::Contended => "contended",
            Outcome::ContentionExceeded => "contention_exceeded",
            Outcome::NotLeader => "not_leader",
            Outcome::StoreUnavailable => "store_unavailable",
            Outcome::SessionNotFound => "session_not_found",
            Outcome::ValidationFailed => "validation_failed",
            Outcome::Forbidden => "forbidden",
            Outcome::LimitMismatch => "limit_mismatch",
            Outcome::UpgradeNotAllowed => "upgrade_not_allowed",
            Outcome::Error => "error",
        }
    }
}

/// A refused request, on any route; the closed set of `lock_requests_refused_total`'s
/// `outcome` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no known credential.
    Unauthorized,
    /// 403: a known credential without the right (key scope, R1).
    Forbidden,
}

impl Refusal {
    const ALL: [Refusal; 2] = [Refusal::Unauthorized, Refusal::Forbidden];

    fn label(self) -> &'static str {
        match self {
            Refusal::Unauthorized => "unauthorized",
            Refusal::Forbidden => "forbidden",
        }
    }
}

/// Why an L8 watcher was sent `reset`; the closed set of `lock_watch_resets_total`'s
/// `reason` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// Its resume point could not be served completely (older than the window, another
    /// epoch, not an id).
    Resume,
    /// The backend lost track of the key.
    Gap,
    /// It fell a buffer behind (its SSE stream then ends).
    SlowConsumer,
}

impl ResetReason {
    const ALL: [ResetReason; 3] = [
        ResetReason::Resume,
        ResetReason::Gap,
        ResetReason::SlowConsumer,
    ];

    /// The label value (also the `reason` of the `watch_reset` log line).
    pub fn label(self) -> &'static str {
        match self {
            ResetReason::Resume => "resume",
            ResetReason::Gap => "gap",
            ResetReason::SlowConsumer => "slow_consumer",
        }
    }
}

/// Who saw a store failure: a route of C3 by its name, or the readiness probe; the closed
/// set of `lock_store_errors_total`'s `route` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreRoute {
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    L7,
    L8,
    /// A hold's value (`POST /v1/locks/{key}/value`).
    L9,
    R1,
    /// The demo ledgers (both routes of the fenced one and of the unfenced one).
    Ledger,
    /// The readiness probe (`readiness`).
    Probe,
}

impl StoreRoute {
    const ALL: [StoreRoute; 12] = [
        StoreRoute::L1,
        StoreRoute::L2,
        StoreRoute::L3,
        StoreRoute::L4,
        StoreRoute::L5,
        StoreRoute::L6,
        StoreRoute::L7,
        StoreRoute::L8,
        StoreRoute::L9,
        StoreRoute::R1,
        StoreRoute::Ledger,
        StoreRoute::Probe,
    ];

    /// The label value (also the `route` of the `store_unavailable` log line).
    pub fn label(self) -> &'static str {
        match self {
            StoreRoute::L1 => "L1",
            StoreRoute::L2 => "L2",
            StoreRoute::L3 => "L3",
            StoreRoute::L4 => "L4",
            StoreRoute::L5 => "L5",
            StoreRoute::L6 => "L6",
            StoreRoute::L7 => "L7",
            StoreRoute::L8 => "L8",
            StoreRoute::L9 => "L9",
            StoreRoute::R1 => "R1",
            StoreRoute::Ledger => "ledger",
            StoreRoute::Probe => "probe",
        }
    }
}

/// The watch gauges, read from the store's feeds at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchCounts {
    /// Keys with a feed (watched, or lingering after their last watcher).
    pub keys: usize,
    /// Watchers (open SSE streams and long polls in progress).
    pub watchers: usize,
}

/// The server's metrics. Lock-free: atomics only.
#[derive(Debug, Default)]
pub struct Metrics {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
    outcomes: [AtomicU64; Outcome::ALL.len()],
    refusals: [AtomicU64; Refusal::ALL.len()],
    events_sent: AtomicU64,
    resets: [AtomicU64; ResetReason::ALL.len()],
    auth_reload_failures: AtomicU64,
    /// `lock_store_errors_total`, `[route][reason]`.
    store_errors: [[AtomicU64; Unavailability::ALL.len()]; StoreRoute::ALL.len()],
    /// `lock_store_ready`: 1 until a store failure says otherwise (`readiness`).
    store_unready: AtomicBool,
    /// The last store counts read, kept when a read fails (`lock_store_counts_stale`).
    last_counts: Mutex<Option<StoreCounts>>,
}

impl Metrics {
    /// Records one L4 request: its latency (including server-side waiting) and outcome.
    pub fn observe_acquire(&self, elapsed: Duration, outcome: Outcome) {
        let secs = elapsed.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        self.outcomes[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Records one refused request.
    pub fn count_refusal(&self, refusal: Refusal) {
        let index = Refusal::ALL.iter().position(|r| *r == refusal).unwrap_or(0);
        self.refusals[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a SIGHUP whose auth file was refused (the clients before it stay in force).
    pub fn count_auth_reload_failure(&self) {
        self.auth_reload_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts L8 events sent to watchers (SSE records and long-poll entries).
    pub fn count_events_sent(&self, events: u64) {
        self.events_sent.fetch_add(events, Ordering::Relaxed);
    }

    /// Counts one `reset` sent to a watcher.
    pub fn count_reset(&self, reason: ResetReason) {
        let index = ResetReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.resets[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one store failure seen by `route` (a request's or the probe's).
    pub fn count_store_error(&self, route: StoreRoute, cause: Unavailability) {
        let r = StoreRoute::ALL
            .iter()
            .position(|x| *x == route)
            .unwrap_or(0);
        let c = Unavailability::ALL
            .iter()
            .position(|x| *x == cause)
            .unwrap_or(0);
        self.store_errors[r][c].fetch_add(1, Ordering::Relaxed);
    }

    /// Sets `lock_store_ready` (called by `readiness` on each transition).
    pub fn set_store_ready(&self, ready: bool) {
        self.store_unready.store(!ready, Ordering::Relaxed);
    }

    /// The exposition text; `counts` is `None` when the store could not be read: the gauges
    /// then keep their last value (0 before any) and `lock_store_counts_stale` says 1.
    pub fn render(&self, counts: Option<StoreCounts>, watch: WatchCounts) -> String {
        let stale = counts.is_none();
        let counts = {
            let mut last = self.last_counts.lock().unwrap_or_else(|e| e.into_inner());
            if counts.is_some() {
                *last = counts;
            }
            last.unwrap_or_default()
        };
        let mut out = String::new();
        let count = self.count.load(Ordering::Relaxed);
        out.push_str(
            "# HELP lock_acquire_duration_seconds L4 acquire latency, server-side wait included.\n",
        );
        out.push_str("# TYPE lock_acquire_duration_seconds histogram\n");
        for (bound, bucket) in BUCKETS.iter().zip(&self.buckets) {
            let _ = writeln!(
                out,
                "lock_acquire_duration_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "lock_acquire_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "lock_acquire_duration_seconds_sum {sum}");
        let _ = writeln!(out, "lock_acquire_duration_seconds_count {count}");
        out.push_str("# HELP lock_acquire_total L4 acquire requests by outcome.\n");
        out.push_str("# TYPE lock_acquire_total counter\n");
        for (outcome, value) in Outcome::ALL.iter().zip(&self.outcomes) {
            let _ = writeln!(
                out,
                "lock_acquire_total{{outcome=\"{}\"}} {}",
                outcome.label(),
                value.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP lock_auth_reload_failures_total SIGHUP reloads whose auth file was refused \
             (the clients loaded before stay in force).\n# TYPE lock_auth_reload_failures_total counter\n",
        );
        let _ = writeln!(
            out,
            "lock_auth_reload_failures_total {}",
            self.auth_reload_failures.load(Ordering::Relaxed)
        );
        out.push_str(
            "# HELP lock_log_lines_dropped_total Log lines dropped: the log sink was full, \
             stalled or failing.\n# TYPE lock_log_lines_dropped_total counter\n",
        );
        let _ = writeln!(
            out,
            "lock_log_lines_dropped_total {}",
            crate::logging::dropped_total()
        );
        out.push_str(
            "# HELP lock_requests_refused_total Requests refused for their credentials (401, 403).\n",
        );
        out.push_str("# TYPE lock_requests_refused_total counter\n");
        for (refusal, value) in Refusal::ALL.iter().zip(&self.refusals) {
            let _ = writeln!(
                out,
                "lock_requests_refused_total{{outcome=\"{}\"}} {}",
                refusal.label(),
                value.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP lock_watch_events_total L8 events sent to watchers.\n");
        out.push_str("# TYPE lock_watch_events_total counter\n");
        let sent = self.events_sent.load(Ordering::Relaxed);
        let _ = writeln!(out, "lock_watch_events_total {sent}");
        out.push_str("# HELP lock_watch_resets_total L8 resets sent to watchers, by reason.\n");
        out.push_str("# TYPE lock_watch_resets_total counter\n");
        for (reason, value) in ResetReason::ALL.iter().zip(&self.resets) {
            let _ = writeln!(
                out,
                "lock_watch_resets_total{{reason=\"{}\"}} {}",
                reason.label(),
                value.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP lock_watchers L8 watchers now.\n# TYPE lock_watchers gauge\n");
        let _ = writeln!(out, "lock_watchers {}", watch.watchers);
        out.push_str(
            "# HELP lock_watched_keys Keys with an event feed now.\n# TYPE lock_watched_keys gauge\n",
        );
        let _ = writeln!(out, "lock_watched_keys {}", watch.keys);
        out.push_str("# HELP lock_sessions Live sessions.\n# TYPE lock_sessions gauge\n");
        let _ = writeln!(out, "lock_sessions {}", counts.sessions);
        out.push_str("# HELP lock_locks Live holds, every mode.\n# TYPE lock_locks gauge\n");
        let _ = writeln!(out, "lock_locks {}", counts.locks);
        out.push_str("# HELP lock_holds Live holds by mode.\n# TYPE lock_holds gauge\n");
        let exclusive = counts.locks.saturating_sub(counts.shared_holds);
        let _ = writeln!(out, "lock_holds{{mode=\"exclusive\"}} {exclusive}");
        let _ = writeln!(out, "lock_holds{{mode=\"shared\"}} {}", counts.shared_holds);
        out.push_str(
            "# HELP lock_store_counts_stale 1 when the last read of the store's counts failed \
             and lock_sessions, lock_locks and lock_holds show the read before.\n\
             # TYPE lock_store_counts_stale gauge\n",
        );
        let _ = writeln!(out, "lock_store_counts_stale {}", u8::from(stale));
        self.render_store_health(&mut out);
        out
    }

    fn render_store_health(&self, out: &mut String) {
        out.push_str(
            "# HELP lock_store_ready 1 while the store accepts writes (/readyz), else 0.\n\
             # TYPE lock_store_ready gauge\n",
        );
        let ready = !self.store_unready.load(Ordering::Relaxed);
        let _ = writeln!(out, "lock_store_ready {}", u8::from(ready));
        out.push_str(
            "# HELP lock_store_errors_total Store failures answered STORE_UNAVAILABLE (or seen \
             by the readiness probe), by route and reason.\n\
             # TYPE lock_store_errors_total counter\n",
        );
        for (route, row) in StoreRoute::ALL.iter().zip(&self.store_errors) {
            for (reason, value) in Unavailability::ALL.iter().zip(row) {
                let _ = writeln!(
                    out,
                    "lock_store_errors_total{{route=\"{}\",reason=\"{}\"}} {}",
                    route.label(),
                    reason.label(),
                    value.load(Ordering::Relaxed)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_outcomes_counted() {
        let m = Metrics::default();
        m.observe_acquire(Duration::from_micros(300), Outcome::Granted);
        m.observe_acquire(Duration::from_millis(20), Outcome::Contended);
        m.count_refusal(Refusal::Forbidden);
        m.count_events_sent(5);
        m.count_reset(ResetReason::SlowConsumer);
        let watch = WatchCounts {
            keys: 2,
            watchers: 7,
        };
        let text = m.render(
            Some(StoreCounts {
                sessions: 3,
                locks: 4,
                shared_holds: 3,
            }),
            watch,
        );
        assert!(text.contains("lock_watch_events_total 5\n"));
        assert!(text.contains("lock_watch_resets_total{reason=\"slow_consumer\"} 1\n"));
        assert!(text.contains("lock_watch_resets_total{reason=\"resume\"} 0\n"));
        assert!(text.contains("lock_watchers 7\n"));
        assert!(text.contains("lock_watched_keys 2\n"));
        assert!(text.contains("lock_acquire_duration_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(text.contains("lock_acquire_duration_seconds_bucket{le=\"0.025\"} 2\n"));
        assert!(text.contains("lock_acquire_duration_seconds_count 2\n"));
        assert!(text.contains("lock_acquire_total{outcome=\"granted\"} 1\n"));
        assert!(text.contains("lock_acquire_total{outcome=\"contended\"} 1\n"));
        assert!(text.contains("lock_requests_refused_total{outcome=\"forbidden\"} 1\n"));
        assert!(text.contains("lock_requests_refused_total{outcome=\"unauthorized\"} 0\n"));
        assert!(text.contains("lock_sessions 3\n"));
        assert!(text.contains("lock_locks 4\n"));
        assert!(text.contains("lock_holds{mode=\"exclusive\"} 1\n"));
        assert!(text.contains("lock_holds{mode=\"shared\"} 3\n"));
        assert!(text.contains("lock_store_counts_stale 0\n"));
        assert!(text.contains("lock_store_ready 1\n"));
    }

    #[test]
    fn counts_keep_their_last_value_when_a_read_fails() {
        let m = Metrics::default();
        let watch = WatchCounts::default();
        let text = m.render(None, watch);
        assert!(
            text.contains("lock_sessions 0\n"),
            "present before any read"
        );
        assert!(text.contains("lock_store_counts_stale 1\n"));
        let counts = StoreCounts {
            sessions: 5,
            locks: 2,
            shared_holds: 0,
        };
        m.render(Some(counts), watch);
        let text = m.render(None, watch);
        assert!(text.contains("lock_sessions 5\n"));
        assert!(text.contains("lock_locks 2\n"));
        assert!(text.contains("lock_holds{mode=\"exclusive\"} 2\n"));
        assert!(text.contains("lock_store_counts_stale 1\n"));
    }

    #[test]
    fn store_errors_are_counted_by_route_and_reason() {
        let m = Metrics::default();
        m.count_store_error(StoreRoute::L4, Unavailability::DiskFull);
        m.count_store_error(StoreRoute::L4, Unavailability::DiskFull);
        m.count_store_error(StoreRoute::Probe, Unavailability::NoQuorum);
        m.set_store_ready(false);
        let text = m.render(None, WatchCounts::default());
        assert!(text.contains("lock_store_errors_total{route=\"L4\",reason=\"disk_full\"} 2\n"));
        assert!(text.contains("lock_store_errors_total{route=\"probe\",reason=\"no_quorum\"} 1\n"));
        assert!(text.contains("lock_store_errors_total{route=\"ledger\",reason=\"busy\"} 0\n"));
        assert!(text.contains("lock_store_ready 0\n"));
    }
}
