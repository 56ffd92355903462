//! The holder timeline: who held which key when, as L7's advisory samples saw it, next to
//! the client's own grant and release marks.
//!
//! A bar runs from the first to the last sample that showed the same `(holderId, token)`
//! holder on a key without another holder in between; its lane is the contender that was
//! granted that token on that key (L7 never shows session ids). Two bars on one key that overlap in
//! time would mean two holders at once: the service must never show that, so overlaps are
//! computed (and drawn in red) rather than assumed away.

use serde::Serialize;

use super::record::RunRecord;

/// One hold seen through L7.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bar {
    /// Lane: the contender index, `None` for a holder outside this run.
    pub session: Option<u32>,
    /// Key name.
    pub key: String,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// First sample showing it, ms since start.
    pub start: f64,
    /// Last sample showing it, ms since start.
    pub end: f64,
}

/// Two holders of one key at once.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlap {
    /// Key name.
    pub key: String,
    /// Start of the doubly-held interval, ms.
    pub start: f64,
    /// End of the doubly-held interval, ms.
    pub end: f64,
    /// The two tokens involved.
    pub tokens: (u64, u64),
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
    /// Holds seen by L7.
    pub bars: Vec<Bar>,
    /// Client grant and release marks.
    pub marks: Vec<Mark>,
    /// Overlaps among L7 bars (there must be none).
    pub overlaps: Vec<Overlap>,
    /// Overlaps among the client's own holds (possible only after a lost lock).
    pub client_overlaps: Vec<Overlap>,
    /// Latest time seen, ms: the x axis' end.
    pub end: f64,
}

impl Timeline {
    /// Derives the timeline of a run.
    pub fn build(record: &RunRecord) -> Self {
        let bars = bars_from_samples(record);
        let spans = spans_by_token(&bars);
        let overlaps = find_overlaps(spans.iter().map(|(k, t, s, e)| (k, *t, *s, *e)));
        let client_overlaps = find_overlaps(record.holds.iter().map(|h| {
            let end = h.released_at.unwrap_or(f64::INFINITY);
            (&h.key, h.fencing_token, h.granted_at, end)
        }));
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
        let end = record
            .samples
            .iter()
            .map(|s| s.at)
            .chain(marks.iter().map(|m| m.at))
            .fold(0.0, f64::max);
        Timeline {
            lanes: record.config.sessions,
            bars,
            marks,
            overlaps,
            client_overlaps,
            end,
        }
    }

    /// Sessions that appear as L7 holders, for the "non-zero data" check.
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

/// Groups each key's samples, in time order, into runs of the same holder.
fn bars_from_samples(record: &RunRecord) -> Vec<Bar> {
    let mut samples: Vec<_> = record.samples.iter().collect();
    samples.sort_by(|a, b| a.key.cmp(&b.key).then(a.at.total_cmp(&b.at)));
    let mut bars: Vec<Bar> = Vec::new();
    let mut open: Option<Bar> = None;
    for sample in samples {
        let same = match (&open, &sample.holder) {
            (Some(bar), Some((_, token))) => bar.key == sample.key && bar.fencing_token == *token,
            _ => false,
        };
        if same {
            if let Some(bar) = open.as_mut() {
                bar.end = sample.at;
            }
            continue;
        }
        bars.extend(open.take());
        open = sample.holder.as_ref().map(|(_, token)| Bar {
            session: record.holder_index(&sample.key, *token),
            key: sample.key.clone(),
            fencing_token: *token,
            start: sample.at,
            end: sample.at,
        });
    }
    bars.extend(open);
    bars
}

/// Each `(key, token)`'s whole span, from its first sighting to its last. A token seen,
/// then another, then the first again, spans the second: that is two holders at once (or a
/// token going backwards), and it must show up as an overlap rather than three tidy bars.
fn spans_by_token(bars: &[Bar]) -> Vec<(String, u64, f64, f64)> {
    let mut spans: Vec<(String, u64, f64, f64)> = Vec::new();
    for bar in bars {
        match spans
            .iter_mut()
            .find(|s| s.0 == bar.key && s.1 == bar.fencing_token)
        {
            Some(span) => {
                span.2 = span.2.min(bar.start);
                span.3 = span.3.max(bar.end);
            }
            None => spans.push((bar.key.clone(), bar.fencing_token, bar.start, bar.end)),
        }
    }
    spans
}

/// Pairwise overlaps of intervals on the same key with different tokens. Quadratic per
/// key, which is fine for the few hundred holds of a run.
fn find_overlaps<'a>(intervals: impl Iterator<Item = (&'a String, u64, f64, f64)>) -> Vec<Overlap> {
    let all: Vec<_> = intervals.collect();
    let mut found = Vec::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.0 != b.0 || a.1 == b.1 {
                continue;
            }
            let start = a.2.max(b.2);
            let end = a.3.min(b.3);
            if start <= end {
                found.push(Overlap {
                    key: a.0.clone(),
                    start,
                    end: if end.is_finite() { end } else { start },
                    tokens: (a.1.min(b.1), a.1.max(b.1)),
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::{Hold, Sample};

    fn sample(at: f64, key: &str, holder: Option<(&str, u64)>) -> Sample {
        Sample {
            at,
            key: key.into(),
            holder: holder.map(|(s, t)| (s.to_string(), t)),
            waiter_count: 0,
        }
    }

    fn hold(session: u32, token: u64, granted: f64, released: f64) -> Hold {
        Hold {
            session,
            key: "k".into(),
            fencing_token: token,
            attempts: 1,
            asked_at: 0.0,
            granted_at: granted,
            released_at: Some(released),
            ledger_accepted: true,
        }
    }

    fn record(samples: Vec<Sample>, holds: Vec<Hold>) -> RunRecord {
        let mut r = RunRecord::new("r", Default::default());
        r.samples = samples;
        r.holds = holds;
        r
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
        // The client's own holds on one key overlap from 15 to 25.
        assert_eq!(t.client_overlaps.len(), 1);
        assert_eq!(
            (t.client_overlaps[0].start, t.client_overlaps[0].end),
            (15.0, 25.0)
        );
    }

    #[test]
    fn overlapping_bars_on_one_key_are_reported() {
        let found = find_overlaps(
            [
                (&"k".to_string(), 1, 0.0, 10.0),
                (&"k".to_string(), 2, 5.0, 15.0),
                (&"j".to_string(), 3, 0.0, 20.0),
                (&"k".to_string(), 1, 12.0, 13.0),
            ]
            .into_iter(),
        );
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].start, found[0].end, found[0].tokens),
            (5.0, 10.0, (1, 2))
        );
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
