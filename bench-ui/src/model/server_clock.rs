//! The server's clock on the run's: L8 stamps each event with `atMillis`, the server's wall
//! clock (Unix ms) at the commit, while everything else in a record is ms since the run
//! started on the client's monotonic clock. The two differ by a fixed offset (ASSUMPTION:
//! neither clock is stepped or drifts noticeably during a run of seconds to minutes).
//!
//! How the offset is fixed: an event cannot arrive before it was committed, so for every
//! event `at − atMillis = offset + delay` with `delay ≥ 0` (the time from the commit to the
//! watcher, a long poll's return trip). The smallest of these over the events received is
//! the offset plus the smallest delay seen: mapped this way every event lands at or before its
//! arrival, and at most that smallest delay (a fraction of a ms on loopback; the first
//! `snapshot` is answered at once, so it bounds it by one round trip) after the true commit.
//! Using the minimum rather than the first event keeps an event that happened to wait in a
//! slow answer from shifting the whole timeline late.

use super::record::Observed;

/// A fitted mapping from the server's `atMillis` to ms since the run started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerClock {
    /// Run ms minus server ms.
    offset: f64,
}

impl ServerClock {
    /// The mapping the events fix (see the module docs); `None` without events.
    pub fn fit(events: &[Observed]) -> Option<Self> {
        events
            .iter()
            .map(|o| o.at - o.event.at_millis as f64)
            .min_by(f64::total_cmp)
            .map(|offset| ServerClock { offset })
    }

    /// `at_millis` of the server as ms since the run started.
    pub fn to_run(self, at_millis: u64) -> f64 {
        at_millis as f64 + self.offset
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lock_api::{EventKind, WatchEvent};

    /// An event of `kind` on key `k` stamped `at_millis` by the server, received at `at`.
    pub(crate) fn observed(at: f64, at_millis: u64, kind: EventKind) -> Observed {
        Observed {
            at,
            event: WatchEvent {
                id: format!("{at_millis}"),
                kind,
                key: "k".into(),
                at_millis,
                fencing_token: None,
                holder_id: None,
                owner: None,
                mode: None,
                limit: None,
                value: None,
                waiter_count: 0,
                state: None,
            },
        }
    }

    #[test]
    fn the_fastest_event_fixes_the_offset_and_none_lands_after_its_arrival() {
        let server_start = 1_700_000_000_000;
        let events = [
            // The snapshot, answered at once: 0.8 ms on the way.
            observed(5.8, server_start + 5, EventKind::Snapshot),
            // Waited 3 ms in a batch.
            observed(23.0, server_start + 20, EventKind::Granted),
            // The fastest: 0.5 ms.
            observed(40.5, server_start + 40, EventKind::Released),
        ];
        let clock = ServerClock::fit(&events).unwrap();
        assert_eq!(clock.to_run(server_start + 40), 40.5);
        assert_eq!(clock.to_run(server_start + 20), 20.5);
        for o in &events {
            assert!(clock.to_run(o.event.at_millis) <= o.at);
        }
    }

    #[test]
    fn no_event_fixes_nothing() {
        assert_eq!(ServerClock::fit(&[]), None);
    }
}
