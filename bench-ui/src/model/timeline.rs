//! The holder timeline: who held which key when, next to the client's own grant and release
//! marks, from one of two sources ([`Source`]):
//! - the L8 event stream (`model::event_bars`): every grant and every end at the server's
//!   commit time, mapped onto the run's clock (`model::server_clock`); resets drawn as gaps;
//! - L7's advisory samples, the fallback when the run has no stream (an older server answers
//!   L8 with 404; a record exported before L8). They stay beside the stream as a cross-check:
//!   the holds the stream saw that no sample listed are counted ("missed by sampling",
//!   `model::coverage`), and their own overlap check still runs.
//!
//! From samples, a bar runs from the first to the last of consecutive samples that listed the same
//! `(holderId, token)` among a key's holders; its lane is the contender that was granted that
//! token on that key (L7 never shows session ids). Concurrent shared holds of a key are one
//! bar each, stacked one above the other in their contenders' lanes.
//!
//! What must never happen is computed (and drawn in red) rather than assumed away: an
//! exclusive hold beside any other hold of its key, or more shared holds of a key at once
//! than its limit. Concurrent shared holds within the limit are the point of shared holds
//! and are never flagged.

use lock_api::LockMode;
use serde::Serialize;

use super::bar::{Bar, Breach, Overlap};
use super::coverage::{grants_unseen, missed_by_sampling};
use super::event_bars::{EventBars, Gap};
use super::record::{RunRecord, Sample};

/// Where a timeline's bars come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// L8's events: exact grants and ends.
    Stream,
    /// L7's samples: what each read caught, at the sampling interval's resolution.
    #[default]
    Samples,
}

impl Source {
    /// Its name on the page (the timeline panel's `data-source`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Stream => "stream",
            Source::Samples => "samples",
        }
    }
}

/// A client-side mark: a grant arriving or a release being sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mark {
    /// Lane.
    pub session: u32,
    /// When, ms since start.
    pub at: f64,
    /// Grant (true) or release (false).
    pub grant: bool,
}

/// Everything the timeline plot draws.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// Lanes, one per contender.
    pub lanes: u32,
    /// Where the bars come from.
    pub source: Source,
    /// Holds, from the source.
    pub bars: Vec<Bar>,
    /// Where the stream lost events (its resets); none from samples.
    pub gaps: Vec<Gap>,
    /// Client grant and release marks.
    pub marks: Vec<Mark>,
    /// Overlaps among the source's bars (there must be none).
    pub overlaps: Vec<Overlap>,
    /// Overlaps among the L7 bars: the same as `overlaps` from samples, a cross-check beside
    /// the stream's.
    pub sample_overlaps: usize,
    /// Overlaps among the client's own holds (possible only after a lost lock).
    pub client_overlaps: Vec<Overlap>,
    /// Most shared holds at once on one key (in the stream, or in one L7 sample): above 1,
    /// shared holds were seen overlapping, as they may.
    pub peak_shared: usize,
    /// Holds the stream saw that no L7 sample listed; `None` without a stream.
    pub missed_by_sampling: Option<u32>,
    /// The client's grants the stream did not show (there must be none); `None` without a
    /// stream.
    pub grants_unseen: Option<u32>,
    /// Latest time seen, ms: the x axis' end.
    pub end: f64,
}

impl Timeline {
    /// Derives the timeline of a run: from its stream, unless the stream could not be
    /// followed or saw nothing (then from its samples).
    pub fn build(record: &RunRecord) -> Self {
        let sample_bars = bars_from_samples(record);
        let sample_overlaps = find_overlaps(spans_by_token(&sample_bars));
        let client_overlaps = find_overlaps(
            record
                .holds
                .iter()
                .map(|h| Interval {
                    key: &h.key,
                    token: h.fencing_token,
                    mode: h.mode,
                    limit: h.limit,
                    start: h.granted_at,
                    end: h.released_at.unwrap_or(f64::INFINITY),
                })
                .collect(),
        );
        let marks = marks(record);
        let end = record
            .samples
            .iter()
            .map(|s| s.at)
            .chain(marks.iter().map(|m| m.at))
            .fold(0.0, f64::max);
        let mut timeline = Timeline {
            lanes: record.config.sessions,
            marks,
            sample_overlaps: sample_overlaps.len(),
            client_overlaps,
            end,
            ..Timeline::default()
        };
        match EventBars::build(record, end) {
            Some(stream) => {
                timeline.source = Source::Stream;
                timeline.missed_by_sampling =
                    Some(missed_by_sampling(&stream.bars, &record.samples));
                timeline.grants_unseen = Some(grants_unseen(&stream.bars, &record.holds));
                timeline.end = end.max(stream.last);
                timeline.bars = stream.bars;
                timeline.gaps = stream.gaps;
                timeline.overlaps = stream.overlaps;
                timeline.peak_shared = stream.peak_shared;
            }
            None => {
                timeline.source = Source::Samples;
                timeline.bars = sample_bars;
                timeline.overlaps = sample_overlaps;
                timeline.peak_shared = record
                    .samples
                    .iter()
                    .filter(|s| s.mode == Some(LockMode::Shared))
                    .map(|s| s.holders.len())
                    .max()
                    .unwrap_or(0);
            }
        }
        timeline
    }

    /// Distinct holds (key and token) among the bars, for the "non-zero data" check.
    pub fn distinct_holders(&self) -> usize {
        let mut tokens: Vec<(&str, u64)> = self
            .bars
            .iter()
            .map(|b| (b.key.as_str(), b.fencing_token))
            .collect();
        tokens.sort_unstable();
        tokens.dedup();
        tokens.len()
    }
}

/// The client's grant and release marks, by lane.
fn marks(record: &RunRecord) -> Vec<Mark> {
    let mut marks = Vec::new();
    for hold in &record.holds {
        marks.push(Mark {
            session: hold.session,
            at: hold.granted_at,
            grant: true,
        });
        if let Some(at) = hold.released_at {
            marks.push(Mark {
                session: hold.session,
                at,
                grant: false,
            });
        }
    }
    marks
}

/// The mode of a sample's holders: an answer that lists holders without a mode comes from a
/// server before shared holds, whose only holder is exclusive.
fn mode_of(sample: &Sample) -> LockMode {
    sample.mode.unwrap_or(LockMode::Exclusive)
}

/// Follows each key's samples in time order: a holder listed in consecutive samples is one
/// bar, from its first to its last sighting; one missing from a sample closes its bar.
fn bars_from_samples(record: &RunRecord) -> Vec<Bar> {
    let mut samples: Vec<_> = record.samples.iter().collect();
    samples.sort_by(|a, b| a.key.cmp(&b.key).then(a.at.total_cmp(&b.at)));
    let mut bars: Vec<Bar> = Vec::new();
    // Bars of the previous sample's holders.
    let mut open: Vec<Bar> = Vec::new();
    for sample in samples {
        if open.first().is_some_and(|bar| bar.key != sample.key) {
            bars.append(&mut open);
        }
        let mut still: Vec<Bar> = Vec::with_capacity(sample.holders.len());
        for (_, token) in &sample.holders {
            match open.iter().position(|bar| bar.fencing_token == *token) {
                Some(i) => {
                    let mut bar = open.swap_remove(i);
                    bar.end = sample.at;
                    still.push(bar);
                }
                None => still.push(Bar {
                    session: record.holder_index(&sample.key, *token),
                    key: sample.key.clone(),
                    fencing_token: *token,
                    mode: mode_of(sample),
                    limit: sample.limit,
                    start: sample.at,
                    end: sample.at,
                }),
            }
        }
        // Holders gone from this sample: their bars end at their last sighting.
        bars.append(&mut open);
        open = still;
    }
    bars.append(&mut open);
    bars
}

/// One hold's interval on a key, whoever saw it (L7's bars or the client's holds).
#[derive(Debug, Clone, Copy)]
struct Interval<'a> {
    key: &'a str,
    token: u64,
    mode: LockMode,
    limit: Option<u32>,
    start: f64,
    end: f64,
}

/// Each `(key, token)`'s whole span, from its first sighting to its last. A token seen,
/// then another, then the first again, spans the second: that is two holders at once (or a
/// token going backwards), and it must show up as an overlap rather than three tidy bars.
fn spans_by_token(bars: &[Bar]) -> Vec<Interval<'_>> {
    let mut spans: Vec<Interval<'_>> = Vec::new();
    for bar in bars {
        match spans
            .iter_mut()
            .find(|s| s.key == bar.key && s.token == bar.fencing_token)
        {
            Some(span) => {
                span.start = span.start.min(bar.start);
                span.end = span.end.max(bar.end);
            }
            None => spans.push(Interval {
                key: &bar.key,
                token: bar.fencing_token,
                mode: bar.mode,
                limit: bar.limit,
                start: bar.start,
                end: bar.end,
            }),
        }
    }
    spans
}

/// The holds at once that break a rule: per key, in order of start, each interval against
/// the ones still open when it starts (touching counts as open). An exclusive interval
/// beside any other is one [`Breach::Exclusive`] per pair; more open shared intervals than
/// the key's limit is one [`Breach::OverLimit`] per interval that starts while they are.
fn find_overlaps(mut intervals: Vec<Interval<'_>>) -> Vec<Overlap> {
    intervals.sort_by(|a, b| {
        a.key
            .cmp(b.key)
            .then(a.start.total_cmp(&b.start))
            .then(a.token.cmp(&b.token))
    });
    let mut found = Vec::new();
    let mut open: Vec<Interval<'_>> = Vec::new();
    for next in intervals {
        open.retain(|o| o.key == next.key && o.end >= next.start);
        for o in open.iter().filter(|o| o.token != next.token) {
            if o.mode == LockMode::Exclusive || next.mode == LockMode::Exclusive {
                found.push(Overlap {
                    key: next.key.to_string(),
                    start: next.start,
                    end: finite_or(o.end.min(next.end), next.start),
                    tokens: vec![o.token.min(next.token), o.token.max(next.token)],
                    breach: Breach::Exclusive,
                });
            }
        }
        open.push(next);
        if let Some(overlap) = over_limit(&open) {
            found.push(overlap);
        }
    }
    found
}

/// The open shared intervals of one key, when there are more than its limit (the smallest
/// any of them carried: the holders of a key all agree on it).
fn over_limit(open: &[Interval<'_>]) -> Option<Overlap> {
    let shared: Vec<&Interval<'_>> = open.iter().filter(|o| o.mode == LockMode::Shared).collect();
    let limit = shared.iter().filter_map(|o| o.limit).min()?;
    let mut tokens: Vec<u64> = shared.iter().map(|o| o.token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    if tokens.len() <= limit as usize {
        return None;
    }
    let start = shared.iter().map(|o| o.start).fold(f64::MIN, f64::max);
    let end = shared.iter().map(|o| o.end).fold(f64::INFINITY, f64::min);
    Some(Overlap {
        key: shared[0].key.to_string(),
        start,
        end: finite_or(end, start),
        tokens,
        breach: Breach::OverLimit { limit },
    })
}

/// A hold never released ends nowhere: its overlap is drawn as the instant it began.
fn finite_or(value: f64, fallback: f64) -> f64 {
    if value.is_finite() {
        value
    } else {
        fallback
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::{Hold, Sample};

    /// A sample of `key` with one exclusive holder, or none.
    fn sample(at: f64, key: &str, holder: Option<(&str, u64)>) -> Sample {
        let holders: Vec<(&str, u64)> = holder.into_iter().collect();
        held(at, key, LockMode::Exclusive, None, &holders)
    }

    /// A sample of `key` held in `mode` by `holders`.
    fn held(
        at: f64,
        key: &str,
        mode: LockMode,
        limit: Option<u32>,
        holders: &[(&str, u64)],
    ) -> Sample {
        Sample {
            at,
            key: key.into(),
            mode: (!holders.is_empty()).then_some(mode),
            holders: holders.iter().map(|(h, t)| (h.to_string(), *t)).collect(),
            limit,
            waiter_count: 0,
        }
    }

    fn hold(session: u32, token: u64, granted: f64, released: f64) -> Hold {
        Hold {
            session,
            key: "k".into(),
            fencing_token: token,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 1,
            asked_at: 0.0,
            granted_at: granted,
            released_at: Some(released),
            ledger_accepted: true,
        }
    }

    fn shared(session: u32, token: u64, granted: f64, released: f64) -> Hold {
        Hold {
            mode: LockMode::Shared,
            ..hold(session, token, granted, released)
        }
    }

    fn record(samples: Vec<Sample>, holds: Vec<Hold>) -> RunRecord {
        let mut r = RunRecord::new("r", Default::default());
        r.samples = samples;
        r.holds = holds;
        r
    }

    fn interval(token: u64, mode: LockMode, start: f64, end: f64) -> Interval<'static> {
        Interval {
            key: "k",
            token,
            mode,
            limit: None,
            start,
            end,
        }
    }

    #[test]
    fn consecutive_samples_of_one_holder_make_one_bar() {
        let r = record(
            vec![
                sample(0.0, "k", None),
                sample(10.0, "k", Some(("s0", 1))),
                sample(20.0, "k", Some(("s0", 1))),
                sample(30.0, "k", Some(("s1", 2))),
                sample(40.0, "k", None),
                sample(50.0, "k", Some(("other", 3))),
            ],
            vec![hold(0, 1, 8.0, 25.0), hold(1, 2, 27.0, 35.0)],
        );
        let t = Timeline::build(&r);
        assert_eq!(t.bars.len(), 3);
        assert_eq!(
            (t.bars[0].session, t.bars[0].start, t.bars[0].end),
            (Some(0), 10.0, 20.0)
        );
        assert_eq!(t.bars[0].mode, LockMode::Exclusive);
        assert_eq!(t.bars[1].session, Some(1));
        assert_eq!(
            t.bars[2].session, None,
            "a holder from outside the run has no lane"
        );
        assert!(t.overlaps.is_empty());
        assert!(t.client_overlaps.is_empty());
        assert_eq!(t.marks.len(), 4);
        assert_eq!(t.end, 50.0);
        assert_eq!(t.distinct_holders(), 3);
        assert_eq!(t.peak_shared, 0);
    }

    #[test]
    fn a_holder_seen_again_after_another_is_an_overlap() {
        let r = record(
            vec![
                sample(10.0, "k", Some(("s0", 1))),
                sample(20.0, "k", Some(("s1", 2))),
                sample(30.0, "k", Some(("s0", 1))),
            ],
            vec![hold(0, 1, 5.0, 40.0), hold(1, 2, 15.0, 25.0)],
        );
        let t = Timeline::build(&r);
        assert_eq!(t.bars.len(), 3);
        // Token 1 spans 10..30 and so brackets token 2's sighting at 20.
        assert_eq!(t.overlaps.len(), 1);
        assert_eq!((t.overlaps[0].start, t.overlaps[0].end), (20.0, 20.0));
        assert_eq!(t.overlaps[0].breach, Breach::Exclusive);
        // The client's own holds on one key overlap from 15 to 25.
        assert_eq!(t.client_overlaps.len(), 1);
        assert_eq!(
            (t.client_overlaps[0].start, t.client_overlaps[0].end),
            (15.0, 25.0)
        );
    }

    #[test]
    fn concurrent_shared_holds_stack_one_bar_each_in_their_lanes() {
        let mut r = record(
            vec![
                held(10.0, "k", LockMode::Shared, None, &[("a", 1), ("b", 2)]),
                held(
                    20.0,
                    "k",
                    LockMode::Shared,
                    None,
                    &[("a", 1), ("b", 2), ("c", 3)],
                ),
                held(30.0, "k", LockMode::Shared, None, &[("c", 3)]),
                held(40.0, "k", LockMode::Exclusive, None, &[("d", 4)]),
                held(50.0, "k", LockMode::Shared, None, &[("a", 5)]),
            ],
            vec![
                shared(0, 1, 5.0, 25.0),
                shared(1, 2, 6.0, 25.0),
                shared(2, 3, 15.0, 35.0),
                hold(3, 4, 36.0, 45.0),
                shared(0, 5, 46.0, 55.0),
            ],
        );
        r.config.sessions = 4;
        let t = Timeline::build(&r);
        let bars: Vec<(Option<u32>, u64, LockMode, f64, f64)> = t
            .bars
            .iter()
            .map(|b| (b.session, b.fencing_token, b.mode, b.start, b.end))
            .collect();
        assert_eq!(
            bars,
            [
                (Some(0), 1, LockMode::Shared, 10.0, 20.0),
                (Some(1), 2, LockMode::Shared, 10.0, 20.0),
                (Some(2), 3, LockMode::Shared, 20.0, 30.0),
                (Some(3), 4, LockMode::Exclusive, 40.0, 40.0),
                (Some(0), 5, LockMode::Shared, 50.0, 50.0),
            ]
        );
        assert!(
            t.overlaps.is_empty(),
            "shared beside shared is fine: {:?}",
            t.overlaps
        );
        assert!(t.client_overlaps.is_empty(), "{:?}", t.client_overlaps);
        assert_eq!(t.peak_shared, 3);
    }

    #[test]
    fn an_exclusive_hold_beside_a_shared_one_is_flagged() {
        // L7 saw writer 3 while reader 1, seen before and after it, was still holding.
        let r = record(
            vec![
                held(10.0, "k", LockMode::Shared, None, &[("a", 1), ("b", 2)]),
                held(20.0, "k", LockMode::Exclusive, None, &[("c", 3)]),
                held(30.0, "k", LockMode::Shared, None, &[("a", 1)]),
            ],
            vec![
                shared(0, 1, 5.0, 35.0),
                shared(1, 2, 5.0, 15.0),
                hold(2, 3, 18.0, 25.0),
            ],
        );
        let t = Timeline::build(&r);
        assert_eq!(t.overlaps.len(), 1, "{:?}", t.overlaps);
        let o = &t.overlaps[0];
        assert_eq!(
            (o.breach, o.tokens.as_slice()),
            (Breach::Exclusive, &[1, 3][..])
        );
        assert_eq!((o.start, o.end), (20.0, 20.0));
        // The client's own holds: writer 3 (18–25) inside reader 1's hold (5–35).
        assert_eq!(t.client_overlaps.len(), 1);
        assert_eq!(t.client_overlaps[0].tokens, [1, 3]);
        assert_eq!(
            (t.client_overlaps[0].start, t.client_overlaps[0].end),
            (18.0, 25.0)
        );
    }

    #[test]
    fn one_shared_hold_more_than_the_limit_is_flagged() {
        let within = [("a", 1), ("b", 2)];
        let over = [("a", 1), ("b", 2), ("c", 3)];
        let limited = |holders: &[(&str, u64)]| {
            record(
                vec![held(10.0, "k", LockMode::Shared, Some(2), holders)],
                vec![],
            )
        };
        assert!(Timeline::build(&limited(&within)).overlaps.is_empty());
        let t = Timeline::build(&limited(&over));
        assert_eq!(t.overlaps.len(), 1, "{:?}", t.overlaps);
        let o = &t.overlaps[0];
        assert_eq!(o.breach, Breach::OverLimit { limit: 2 });
        assert_eq!(o.tokens, [1, 2, 3]);
        // Without a limit, any number of shared holders is fine.
        let mut free = limited(&over);
        free.samples[0].limit = None;
        assert!(Timeline::build(&free).overlaps.is_empty());
    }

    #[test]
    fn the_clients_shared_holds_over_their_limit_are_flagged_once_per_extra_hold() {
        let mut holds = vec![
            shared(0, 1, 0.0, 30.0),
            shared(1, 2, 5.0, 30.0),
            shared(2, 3, 10.0, 12.0),
            // Starts after 3 ended: back within the limit of 2.
            shared(3, 4, 20.0, 25.0),
        ];
        for h in &mut holds {
            h.limit = Some(2);
        }
        let t = Timeline::build(&record(vec![], holds.clone()));
        assert_eq!(t.client_overlaps.len(), 2, "{:?}", t.client_overlaps);
        assert_eq!(t.client_overlaps[0].tokens, [1, 2, 3]);
        assert_eq!(
            (t.client_overlaps[0].start, t.client_overlaps[0].end),
            (10.0, 12.0)
        );
        assert_eq!(t.client_overlaps[1].tokens, [1, 2, 4]);
        for h in &mut holds {
            h.limit = Some(3);
        }
        let t = Timeline::build(&record(vec![], holds.clone()));
        assert!(t.client_overlaps.is_empty(), "3 at once within 3 permits");
        holds[2].limit = Some(2);
        let t = Timeline::build(&record(vec![], holds));
        assert_eq!(
            t.client_overlaps.len(),
            1,
            "the smallest limit of the open holds applies: {:?}",
            t.client_overlaps
        );
        assert_eq!(t.client_overlaps[0].tokens, [1, 2, 3]);
    }

    #[test]
    fn overlapping_intervals_on_one_key_are_reported() {
        let exclusive = LockMode::Exclusive;
        let mut intervals = vec![
            interval(1, exclusive, 0.0, 10.0),
            interval(2, exclusive, 5.0, 15.0),
            interval(3, exclusive, 0.0, 20.0),
            interval(1, exclusive, 12.0, 13.0),
        ];
        intervals[2].key = "j";
        let found = find_overlaps(intervals);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].start, found[0].end, found[0].tokens.as_slice()),
            (5.0, 10.0, &[1, 2][..])
        );
        assert_eq!(
            (found[1].start, found[1].end, found[1].tokens.as_slice()),
            (12.0, 13.0, &[1, 2][..])
        );
    }

    #[test]
    fn shared_intervals_overlap_freely_but_not_with_an_exclusive_one() {
        let shared = LockMode::Shared;
        let found = find_overlaps(vec![
            interval(1, shared, 0.0, 10.0),
            interval(2, shared, 2.0, 12.0),
            interval(3, shared, 4.0, 8.0),
        ]);
        assert!(found.is_empty(), "{found:?}");
        let found = find_overlaps(vec![
            interval(1, shared, 0.0, 10.0),
            interval(2, shared, 2.0, 12.0),
            interval(3, LockMode::Exclusive, 11.0, f64::INFINITY),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].tokens, [2, 3]);
        assert_eq!((found[0].start, found[0].end), (11.0, 12.0));
    }

    /// A run whose stream saw tokens 1 and 2 on `k` and whose samples caught only 1.
    fn streamed() -> RunRecord {
        use crate::model::server_clock::tests::observed;
        use lock_api::EventKind;
        let t0 = 1_700_000_000_000;
        let mut events = vec![observed(1.0, t0, EventKind::Snapshot)];
        for (at, kind, token) in [
            (10, EventKind::Granted, 1),
            (20, EventKind::Released, 1),
            (21, EventKind::Granted, 2),
            (24, EventKind::Released, 2),
        ] {
            let mut o = observed(at as f64 + 1.0, t0 + at, kind);
            o.event.fencing_token = Some(token);
            o.event.mode = Some(LockMode::Exclusive);
            events.push(o);
        }
        let mut r = record(
            vec![sample(15.0, "k", Some(("s0", 1))), sample(30.0, "k", None)],
            vec![hold(0, 1, 11.0, 19.0), hold(1, 2, 22.0, 23.0)],
        );
        r.events = events;
        r
    }

    #[test]
    fn the_stream_draws_the_timeline_and_counts_what_sampling_missed() {
        let t = Timeline::build(&streamed());
        assert_eq!(t.source, Source::Stream);
        let bars: Vec<(Option<u32>, u64, f64, f64)> = t
            .bars
            .iter()
            .map(|b| (b.session, b.fencing_token, b.start, b.end))
            .collect();
        // Every event arrived 1 ms after its stamp: the server's times land 1 ms early.
        assert_eq!(bars, [(Some(0), 1, 11.0, 21.0), (Some(1), 2, 22.0, 25.0)]);
        assert_eq!(
            t.missed_by_sampling,
            Some(1),
            "token 2 fell between samples"
        );
        assert_eq!(t.grants_unseen, Some(0));
        assert!(t.overlaps.is_empty() && t.gaps.is_empty());
        assert_eq!(t.sample_overlaps, 0);
        assert_eq!(t.end, 30.0);
    }

    #[test]
    fn without_a_stream_the_samples_draw_it_and_nothing_is_counted_missed() {
        let mut r = streamed();
        r.stream_error = Some("this server has no L8 (404)".into());
        let t = Timeline::build(&r);
        assert_eq!(t.source, Source::Samples);
        assert_eq!(t.bars.len(), 1);
        assert_eq!((t.missed_by_sampling, t.grants_unseen), (None, None));
        r.stream_error = None;
        r.events.clear();
        assert_eq!(Timeline::build(&r).source, Source::Samples);
    }

    #[test]
    fn different_keys_never_overlap() {
        let r = record(
            vec![
                sample(10.0, "a", Some(("s0", 1))),
                sample(10.0, "b", Some(("s1", 1))),
            ],
            vec![],
        );
        assert!(Timeline::build(&r).overlaps.is_empty());
    }
}
