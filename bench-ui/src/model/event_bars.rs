//! Holder bars from L8's event stream: every grant and every end, at the server's commit
//! times, instead of what L7 samples happened to catch.
//!
//! Per key, in the stream's order: `granted` and `handedOff` open a bar; `released`,
//! `expired` and `revoked` close it; `snapshot` and `reset` re-base the key's open holds on
//! `state.holders` (holds missing from it end there, holds new in it begin there). A `reset`
//! says events were lost in between, so it is also a [`Gap`]: what ended or began around it
//! did so somewhere before it. `proclaimed` and `waiters` change no hold.
//!
//! The check of what must not happen (an exclusive hold beside another hold of its key,
//! more shared holds than the limit) runs as the stream is replayed, each time a hold opens,
//! against the holds open at that point of the stream: the order of the stream, not the
//! millisecond stamps, decides, so a release and the next grant committed within one
//! millisecond are one after the other, never an overlap.

use lock_api::{LockMode, LockState, WatchEvent};
use serde::Serialize;

use super::bar::{Bar, Breach, Overlap};
use super::record::RunRecord;
use super::server_clock::ServerClock;

/// Where a `reset` says the stream of a key lost events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gap {
    /// Key name.
    pub key: String,
    /// The reset, ms since start.
    pub at: f64,
}

/// The holds of a run as its event stream told them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventBars {
    /// One bar per hold, in the order they opened; a hold still open when the stream stopped
    /// ends at the `until` it was built with.
    pub bars: Vec<Bar>,
    /// The keys' resets.
    pub gaps: Vec<Gap>,
    /// Holds at once that broke a rule (there must be none).
    pub overlaps: Vec<Overlap>,
    /// Most shared holds open at once on one key.
    pub peak_shared: usize,
    /// Holds still open where the stream stopped.
    pub still_open: usize,
    /// Latest event, ms since start.
    pub last: f64,
}

/// A breach found during the replay: the bars (indices) that were open together.
struct Found {
    bars: Vec<usize>,
    breach: Breach,
}

impl EventBars {
    /// Replays `record.events`; `None` when there are none or the stream could not be
    /// followed (`record.stream_error`: what it saw may stop anywhere, so the samples are the
    /// better account). Holds still open at the end of the stream end at `until` (or at the
    /// last event, if later).
    pub fn build(record: &RunRecord, until: f64) -> Option<Self> {
        if record.stream_error.is_some() {
            return None;
        }
        let clock = ServerClock::fit(&record.events)?;
        let mut replay = Replay {
            record,
            clock,
            out: EventBars::default(),
            open: Vec::new(),
            found: Vec::new(),
        };
        for observed in &record.events {
            replay.apply(&observed.event);
        }
        Some(replay.finish(until))
    }
}

/// The key's open bars among `open` (created empty on the key's first event).
fn open_of<'s, 'a>(open: &'s mut Vec<(&'a str, Vec<usize>)>, key: &'a str) -> &'s mut Vec<usize> {
    let i = match open.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            open.push((key, Vec::new()));
            open.len() - 1
        }
    };
    &mut open[i].1
}

/// The replay's state: the bars so far and, per key, which of them are open.
struct Replay<'a> {
    record: &'a RunRecord,
    clock: ServerClock,
    out: EventBars,
    /// `(key, indices of its open bars)`; a run has few keys.
    open: Vec<(&'a str, Vec<usize>)>,
    found: Vec<Found>,
}

impl<'a> Replay<'a> {
    fn apply(&mut self, event: &'a WatchEvent) {
        let at = self.clock.to_run(event.at_millis);
        self.out.last = self.out.last.max(at);
        let kind = event.kind;
        let opened = if kind.is_state() {
            if kind == lock_api::EventKind::Reset {
                self.out.gaps.push(Gap {
                    key: event.key.clone(),
                    at,
                });
            }
            match &event.state {
                Some(state) => self.rebase(&event.key, state, at),
                None => Vec::new(),
            }
        } else if kind.is_grant() {
            let mode = event.mode.unwrap_or(LockMode::Exclusive);
            event
                .fencing_token
                .and_then(|token| self.open_bar(&event.key, token, mode, event.limit, at))
                .into_iter()
                .collect()
        } else {
            if let (true, Some(token)) = (kind.is_end(), event.fencing_token) {
                self.close_bar(&event.key, token, at);
            }
            Vec::new()
        };
        if !opened.is_empty() {
            self.check(&event.key, &opened);
        }
    }

    /// Opens a bar for `token` unless it is open already; its index when it opened one.
    fn open_bar(
        &mut self,
        key: &'a str,
        token: u64,
        mode: LockMode,
        limit: Option<u32>,
        at: f64,
    ) -> Option<usize> {
        let bars = &self.out.bars;
        if open_of(&mut self.open, key)
            .iter()
            .any(|&i| bars[i].fencing_token == token)
        {
            return None;
        }
        let index = self.out.bars.len();
        self.out.bars.push(Bar {
            session: self.record.holder_index(key, token),
            key: key.to_string(),
            fencing_token: token,
            mode,
            limit,
            start: at,
            end: at,
        });
        open_of(&mut self.open, key).push(index);
        Some(index)
    }

    fn close_bar(&mut self, key: &'a str, token: u64, at: f64) {
        let bars = &mut self.out.bars;
        let open = match self.open.iter_mut().find(|(k, _)| *k == key) {
            Some((_, open)) => open,
            None => return,
        };
        if let Some(pos) = open.iter().position(|&i| bars[i].fencing_token == token) {
            let index = open.swap_remove(pos);
            bars[index].end = at;
        }
    }

    /// Makes the key's open holds those of `state`: the others end at `at`, the new ones
    /// begin there. Returns the bars it opened.
    fn rebase(&mut self, key: &'a str, state: &LockState, at: f64) -> Vec<usize> {
        // An answer from a server before shared holds lists only its exclusive `holder`.
        let holders: Vec<u64> = if state.holders.is_empty() {
            state.holder.iter().map(|h| h.fencing_token).collect()
        } else {
            state.holders.iter().map(|h| h.fencing_token).collect()
        };
        let gone: Vec<u64> = {
            let bars = &self.out.bars;
            open_of(&mut self.open, key)
                .iter()
                .map(|&i| bars[i].fencing_token)
                .filter(|t| !holders.contains(t))
                .collect()
        };
        for token in gone {
            self.close_bar(key, token, at);
        }
        let mode = state.mode.unwrap_or(LockMode::Exclusive);
        holders
            .into_iter()
            .filter_map(|token| self.open_bar(key, token, mode, state.limit, at))
            .collect()
    }

    /// The rules, each time holds open: every opened bar against the key's other open ones.
    fn check(&mut self, key: &'a str, opened: &[usize]) {
        let open = open_of(&mut self.open, key).clone();
        let bars = &self.out.bars;
        for &new in opened {
            for &other in open.iter().filter(|&&o| o != new) {
                let exclusive = [new, other]
                    .iter()
                    .any(|&i| bars[i].mode == LockMode::Exclusive);
                let pair = [other.min(new), other.max(new)];
                // Two bars opened by one snapshot meet twice: count the pair once.
                let seen = self.found.iter().any(|f| f.bars == pair);
                if exclusive && !seen {
                    self.found.push(Found {
                        bars: pair.to_vec(),
                        breach: Breach::Exclusive,
                    });
                }
            }
        }
        let shared: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| bars[i].mode == LockMode::Shared)
            .collect();
        self.out.peak_shared = self.out.peak_shared.max(shared.len());
        let limit = shared.iter().filter_map(|&i| bars[i].limit).min();
        if let Some(limit) = limit.filter(|&l| shared.len() > l as usize) {
            self.found.push(Found {
                bars: shared,
                breach: Breach::OverLimit { limit },
            });
        }
    }

    /// Ends the bars still open at `until`, and dates the breaches now that every bar has
    /// its end: from the latest start among them to the earliest end.
    fn finish(mut self, until: f64) -> EventBars {
        let end = until.max(self.out.last);
        for (_, open) in &self.open {
            for &i in open {
                self.out.bars[i].end = end;
            }
            self.out.still_open += open.len();
        }
        let bars = &self.out.bars;
        for found in &self.found {
            let of = || found.bars.iter().map(|&i| &bars[i]);
            let start = of().map(|b| b.start).fold(f64::MIN, f64::max);
            let end = of().map(|b| b.end).fold(f64::INFINITY, f64::min);
            let mut tokens: Vec<u64> = of().map(|b| b.fencing_token).collect();
            tokens.sort_unstable();
            self.out.overlaps.push(Overlap {
                key: bars[found.bars[0]].key.clone(),
                start,
                end: end.max(start),
                tokens,
                breach: found.breach,
            });
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::{Hold, Observed};
    use crate::model::server_clock::tests::observed;
    use lock_api::{EventKind, Holder};

    /// Server ms of the run's start: events at `T0 + n` map to `n` (each arrives 0 ms late).
    const T0: u64 = 1_700_000_000_000;

    fn event(at: u64, kind: EventKind, token: u64, mode: LockMode) -> Observed {
        let mut o = observed(at as f64, T0 + at, kind);
        o.event.fencing_token = Some(token);
        o.event.holder_id = Some(format!("h{token}"));
        o.event.mode = Some(mode);
        o
    }

    fn grant(at: u64, token: u64) -> Observed {
        event(at, EventKind::Granted, token, LockMode::Exclusive)
    }

    fn end(at: u64, kind: EventKind, token: u64) -> Observed {
        event(at, kind, token, LockMode::Exclusive)
    }

    fn state(at: u64, kind: EventKind, mode: LockMode, tokens: &[u64]) -> Observed {
        let mut o = observed(at as f64, T0 + at, kind);
        o.event.state = Some(LockState {
            key: "k".into(),
            mode: (!tokens.is_empty()).then_some(mode),
            holder: None,
            holders: tokens
                .iter()
                .map(|&t| Holder {
                    holder_id: format!("h{t}"),
                    owner: None,
                    fencing_token: t,
                    remaining_millis: 1_000,
                    value: None,
                })
                .collect(),
            limit: None,
            waiter_count: 0,
        });
        o
    }

    fn record(events: Vec<Observed>) -> RunRecord {
        let mut r = RunRecord::new("r", Default::default());
        r.events = events;
        r.holds.push(Hold {
            session: 3,
            key: "k".into(),
            fencing_token: 2,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 1,
            asked_at: 0.0,
            granted_at: 21.0,
            released_at: Some(30.0),
            ledger_accepted: true,
        });
        r
    }

    fn spans(bars: &EventBars) -> Vec<(u64, f64, f64)> {
        bars.bars
            .iter()
            .map(|b| (b.fencing_token, b.start, b.end))
            .collect()
    }

    #[test]
    fn grants_open_bars_and_every_kind_of_end_closes_them_at_the_servers_times() {
        let r = record(vec![
            state(0, EventKind::Snapshot, LockMode::Exclusive, &[]),
            grant(10, 1),
            end(20, EventKind::Released, 1),
            event(20, EventKind::HandedOff, 2, LockMode::Exclusive),
            end(30, EventKind::Expired, 2),
            grant(40, 3),
            end(45, EventKind::Revoked, 3),
            grant(50, 4),
        ]);
        let bars = EventBars::build(&r, 80.0).unwrap();
        assert_eq!(
            spans(&bars),
            [
                (1, 10.0, 20.0),
                (2, 20.0, 30.0),
                (3, 40.0, 45.0),
                (4, 50.0, 80.0)
            ],
            "a hold still open when the stream stopped runs to the end"
        );
        assert_eq!(bars.still_open, 1);
        assert_eq!(bars.bars[1].session, Some(3), "laned by the client's grant");
        assert_eq!(bars.bars[0].session, None);
        assert!(
            bars.overlaps.is_empty(),
            "a release and a hand-off in one millisecond are in order: {:?}",
            bars.overlaps
        );
        assert!(bars.gaps.is_empty());
        assert_eq!(bars.last, 50.0);
    }

    #[test]
    fn a_snapshot_opens_the_holds_it_shows_and_a_reset_rebases_them_and_marks_a_gap() {
        let r = record(vec![
            state(0, EventKind::Snapshot, LockMode::Shared, &[1, 2]),
            end(10, EventKind::Released, 1),
            // Events lost: 2 ended, 3 began, somewhere before 30.
            state(30, EventKind::Reset, LockMode::Exclusive, &[3]),
            end(40, EventKind::Released, 3),
        ]);
        let bars = EventBars::build(&r, 50.0).unwrap();
        assert_eq!(
            spans(&bars),
            [(1, 0.0, 10.0), (2, 0.0, 30.0), (3, 30.0, 40.0)]
        );
        assert_eq!(bars.bars[0].mode, LockMode::Shared);
        assert_eq!(bars.bars[2].mode, LockMode::Exclusive);
        assert_eq!(
            bars.gaps,
            [Gap {
                key: "k".into(),
                at: 30.0
            }]
        );
        assert!(bars.overlaps.is_empty(), "{:?}", bars.overlaps);
        assert_eq!(bars.peak_shared, 2);
    }

    #[test]
    fn a_hold_kept_through_a_reset_stays_one_bar() {
        let r = record(vec![
            grant(5, 1),
            state(20, EventKind::Reset, LockMode::Exclusive, &[1]),
            end(30, EventKind::Released, 1),
        ]);
        let bars = EventBars::build(&r, 30.0).unwrap();
        assert_eq!(spans(&bars), [(1, 5.0, 30.0)]);
        assert_eq!(bars.gaps.len(), 1);
    }

    #[test]
    fn an_exclusive_grant_beside_an_open_hold_is_flagged_with_its_span() {
        let r = record(vec![
            grant(10, 1),
            grant(15, 2),
            end(20, EventKind::Released, 1),
            end(25, EventKind::Released, 2),
        ]);
        let bars = EventBars::build(&r, 30.0).unwrap();
        assert_eq!(bars.overlaps.len(), 1, "{:?}", bars.overlaps);
        let o = &bars.overlaps[0];
        assert_eq!(o.breach, Breach::Exclusive);
        assert_eq!(o.tokens, [1, 2]);
        assert_eq!((o.start, o.end), (15.0, 20.0));
    }

    #[test]
    fn a_grant_before_the_release_in_one_millisecond_is_still_an_overlap() {
        // The stream's order says 2 began while 1 held, whatever the stamps.
        let r = record(vec![
            grant(10, 1),
            grant(20, 2),
            end(20, EventKind::Released, 1),
        ]);
        let bars = EventBars::build(&r, 30.0).unwrap();
        assert_eq!(bars.overlaps.len(), 1, "{:?}", bars.overlaps);
    }

    #[test]
    fn shared_holds_overlap_freely_within_their_limit_only() {
        let shared = |at, token| {
            let mut o = event(at, EventKind::Granted, token, LockMode::Shared);
            o.event.limit = Some(2);
            o
        };
        let r = record(vec![
            shared(10, 1),
            shared(11, 2),
            end(12, EventKind::Released, 1),
            shared(13, 3),
            shared(14, 4),
            end(16, EventKind::Released, 4),
        ]);
        let bars = EventBars::build(&r, 20.0).unwrap();
        assert_eq!(bars.overlaps.len(), 1, "{:?}", bars.overlaps);
        let o = &bars.overlaps[0];
        assert_eq!(o.breach, Breach::OverLimit { limit: 2 });
        assert_eq!(o.tokens, [2, 3, 4]);
        assert_eq!((o.start, o.end), (14.0, 16.0));
        assert_eq!(bars.peak_shared, 3);
    }

    #[test]
    fn keys_are_replayed_apart_and_no_events_build_nothing() {
        let mut other = grant(12, 1);
        other.event.key = "j".into();
        let r = record(vec![grant(10, 1), other, end(20, EventKind::Released, 1)]);
        let bars = EventBars::build(&r, 30.0).unwrap();
        assert!(bars.overlaps.is_empty(), "{:?}", bars.overlaps);
        assert_eq!(
            spans(&bars),
            [(1, 10.0, 20.0), (1, 12.0, 30.0)],
            "token 1 of key j is still open"
        );
        assert_eq!(EventBars::build(&record(vec![]), 0.0), None);
    }
}
