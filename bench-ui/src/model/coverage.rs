//! What each view of a run saw of the others': the holds the L8 stream saw that no L7
//! sample listed ("missed by sampling": what a timeline drawn from polling alone would have
//! lost), and the client's grants the stream did not show (there must be none: the stream
//! carries every grant).

use std::collections::HashSet;

use super::bar::Bar;
use super::event_bars::EventBars;
use super::record::{Hold, RunRecord, Sample};

/// Stamps [`missed_by_sampling`] into the record's counters (`None` without a stream), so the
/// live counters and the exports carry it.
pub fn count_missed(record: &mut RunRecord) {
    record.counters.missed_by_sampling = EventBars::build(record, 0.0)
        .map(|stream| missed_by_sampling(&stream.bars, &record.samples));
}

/// Whether the stream has told all it will about the run's holds: it showed every grant of
/// the client and no hold is open where it stops — or it cannot tell more (it stopped with
/// an error). What a finished run waits for before it ends its watchers.
pub fn stream_caught_up(record: &RunRecord) -> bool {
    if record.stream_error.is_some() {
        return true;
    }
    EventBars::build(record, 0.0).is_some_and(|stream| {
        stream.still_open == 0 && grants_unseen(&stream.bars, &record.holds) == 0
    })
}

/// Holds (distinct key and token) among the stream's `bars` that no sample listed.
pub fn missed_by_sampling(bars: &[Bar], samples: &[Sample]) -> u32 {
    let sampled: HashSet<(&str, u64)> = samples
        .iter()
        .flat_map(|s| s.holders.iter().map(|(_, t)| (s.key.as_str(), *t)))
        .collect();
    let missed: HashSet<(&str, u64)> = bars
        .iter()
        .map(|b| (b.key.as_str(), b.fencing_token))
        .filter(|hold| !sampled.contains(hold))
        .collect();
    count(missed.len())
}

/// The client's grants (key and token) that none of the stream's `bars` shows.
pub fn grants_unseen(bars: &[Bar], holds: &[Hold]) -> u32 {
    let streamed: HashSet<(&str, u64)> = bars
        .iter()
        .map(|b| (b.key.as_str(), b.fencing_token))
        .collect();
    let unseen = holds
        .iter()
        .filter(|h| !streamed.contains(&(h.key.as_str(), h.fencing_token)))
        .count();
    count(unseen)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::LockMode;

    fn bar(key: &str, token: u64) -> Bar {
        Bar {
            session: None,
            key: key.into(),
            fencing_token: token,
            mode: LockMode::Exclusive,
            limit: None,
            start: 0.0,
            end: 1.0,
        }
    }

    fn sample(key: &str, tokens: &[u64]) -> Sample {
        Sample {
            at: 0.0,
            key: key.into(),
            mode: Some(LockMode::Shared),
            holders: tokens.iter().map(|&t| (format!("h{t}"), t)).collect(),
            limit: None,
            waiter_count: 0,
        }
    }

    fn hold(key: &str, token: u64) -> Hold {
        Hold {
            session: 0,
            key: key.into(),
            fencing_token: token,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 1,
            asked_at: 0.0,
            granted_at: 0.0,
            released_at: None,
            ledger_accepted: true,
        }
    }

    #[test]
    fn holds_no_sample_listed_are_missed_once_each_by_key_and_token() {
        // Token 1 of k sampled; 2 of k never; 1 of j never (same token, other key); token 3
        // drawn as two bars (split by a reset) counts once.
        let bars = [
            bar("k", 1),
            bar("k", 2),
            bar("j", 1),
            bar("k", 3),
            bar("k", 3),
        ];
        let samples = [sample("k", &[1]), sample("j", &[]), sample("k", &[])];
        assert_eq!(missed_by_sampling(&bars, &samples), 3);
        assert_eq!(missed_by_sampling(&bars, &[sample("k", &[1, 2, 3])]), 1);
        assert_eq!(missed_by_sampling(&[], &samples), 0);
    }

    #[test]
    fn the_count_lands_in_the_counters_only_with_a_stream() {
        use crate::model::server_clock::tests::observed;
        let mut r = RunRecord::new("r", Default::default());
        count_missed(&mut r);
        assert_eq!(r.counters.missed_by_sampling, None);
        let mut granted = observed(1.0, 1, lock_api::EventKind::Granted);
        granted.event.fencing_token = Some(5);
        r.events.push(granted);
        count_missed(&mut r);
        assert_eq!(r.counters.missed_by_sampling, Some(1));
        r.stream_error = Some("404".into());
        count_missed(&mut r);
        assert_eq!(r.counters.missed_by_sampling, None);
    }

    #[test]
    fn the_stream_has_caught_up_once_every_grant_was_shown_and_ended() {
        use crate::model::server_clock::tests::observed;
        use lock_api::EventKind;
        let mut r = RunRecord::new("r", Default::default());
        assert!(!stream_caught_up(&r), "nothing streamed yet");
        r.holds.push(hold("k", 5));
        r.events.push(observed(0.0, 0, EventKind::Snapshot));
        assert!(!stream_caught_up(&r), "the grant is not in the stream yet");
        let mut granted = observed(1.0, 1, EventKind::Granted);
        granted.event.fencing_token = Some(5);
        r.events.push(granted);
        assert!(!stream_caught_up(&r), "still held");
        let mut released = observed(2.0, 2, EventKind::Released);
        released.event.fencing_token = Some(5);
        r.events.push(released);
        assert!(stream_caught_up(&r));
        r.events.clear();
        r.stream_error = Some("404".into());
        assert!(stream_caught_up(&r), "a stopped stream tells no more");
    }

    #[test]
    fn the_clients_grants_are_all_found_in_the_stream_or_counted() {
        let bars = [bar("k", 1), bar("k", 2)];
        assert_eq!(grants_unseen(&bars, &[hold("k", 1), hold("k", 2)]), 0);
        assert_eq!(grants_unseen(&bars, &[hold("k", 3), hold("j", 1)]), 2);
    }
}
