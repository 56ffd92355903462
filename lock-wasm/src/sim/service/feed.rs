//! The modelled L8 feed: the last [`WINDOW`] events of each key, with ids that rise within
//! one server epoch, and what a long poll after an id gets (contract C3 L8): the events
//! after it, a `snapshot` for a fresh watch, or one `reset` when the id cannot be served
//! completely (evicted from the window, another epoch, garbage). Never a silent gap.

use std::collections::{BTreeMap, VecDeque};

use lock_api::watch::BATCH_MAX_EVENTS;
use lock_api::{EventKind, LockState, WatchEvent};

use crate::signal::Notify;

/// Events kept per key (the server's default window).
pub const WINDOW: usize = 256;

/// Every key's window, the id counter and the epoch (bumped by a modelled restart).
#[derive(Default)]
pub(super) struct Feeds {
    epoch: u64,
    /// The number of the last event issued, over every key.
    last: u64,
    keys: BTreeMap<String, KeyFeed>,
    /// Every appended event: long polls look again.
    pub(super) appended: Notify,
}

#[derive(Default)]
struct KeyFeed {
    events: VecDeque<(u64, WatchEvent)>,
    /// The number of the newest event evicted from the window (0: none).
    evicted: u64,
}

/// What a long poll found.
pub(super) enum Poll {
    /// Events after the id (maybe none yet).
    After(Vec<WatchEvent>),
    /// The id cannot be served: answer one `reset` with the state now.
    Reset,
}

impl Feeds {
    /// Appends `event` (its `id` is set here) to its key's window.
    pub(super) fn push(&mut self, mut event: WatchEvent) {
        self.last += 1;
        event.id = self.id(self.last);
        let feed = self.keys.entry(event.key.clone()).or_default();
        feed.events.push_back((self.last, event));
        if feed.events.len() > WINDOW {
            if let Some((n, _)) = feed.events.pop_front() {
                feed.evicted = n;
            }
        }
        self.appended.notify();
    }

    /// A `snapshot` or `reset` of `state` at `at_millis`, with the id of the newest event so
    /// far: a poll after it gets exactly what comes next.
    pub(super) fn state_event(
        &self,
        kind: EventKind,
        state: LockState,
        at_millis: u64,
    ) -> WatchEvent {
        WatchEvent::of_state(self.id(self.last), kind, state, at_millis)
    }

    /// The events of `key` after the event `after`, at most [`BATCH_MAX_EVENTS`].
    pub(super) fn after(&self, key: &str, after: &str) -> Poll {
        let Some(n) = self.number(after) else {
            return Poll::Reset;
        };
        let feed = self.keys.get(key);
        let evicted = feed.map_or(0, |f| f.evicted);
        if n > self.last || n < evicted {
            return Poll::Reset;
        }
        let events = feed
            .into_iter()
            .flat_map(|f| f.events.iter())
            .filter(|(m, _)| *m > n)
            .take(BATCH_MAX_EVENTS)
            .map(|(_, e)| e.clone())
            .collect();
        Poll::After(events)
    }

    /// A modelled restart: a new epoch, every window empty, so every old id gets a `reset`.
    pub(super) fn restart(&mut self) {
        self.epoch += 1;
        self.last = 0;
        self.keys.clear();
        self.appended.notify();
    }

    fn id(&self, n: u64) -> String {
        format!("{}-{n}", self.epoch)
    }

    /// The number of an id of this epoch; `None` for another epoch's or garbage.
    fn number(&self, id: &str) -> Option<u64> {
        let (epoch, n) = id.split_once('-')?;
        (epoch.parse::<u64>().ok()? == self.epoch).then_some(())?;
        n.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str) -> WatchEvent {
        WatchEvent {
            id: String::new(),
            kind: EventKind::Waiters,
            key: key.into(),
            at_millis: 0,
            fencing_token: None,
            holder_id: None,
            owner: None,
            mode: None,
            limit: None,
            value: None,
            waiter_count: 1,
            state: None,
        }
    }

    fn ids(poll: Poll) -> Vec<String> {
        match poll {
            Poll::After(events) => events.into_iter().map(|e| e.id).collect(),
            Poll::Reset => vec!["reset".into()],
        }
    }

    #[test]
    fn a_poll_gets_its_keys_events_after_the_id_and_a_reset_when_it_cannot() {
        let mut feeds = Feeds::default();
        feeds.push(event("a"));
        feeds.push(event("b"));
        feeds.push(event("a"));
        assert_eq!(ids(feeds.after("a", "0-0")), ["0-1", "0-3"]);
        assert_eq!(ids(feeds.after("a", "0-1")), ["0-3"]);
        assert!(ids(feeds.after("a", "0-3")).is_empty());
        // Garbage, a future id, another epoch.
        for id in ["x", "0-9", "1-1"] {
            assert_eq!(ids(feeds.after("a", id)), ["reset"], "{id}");
        }
        feeds.restart();
        assert_eq!(ids(feeds.after("a", "0-1")), ["reset"]);
    }

    #[test]
    fn an_id_older_than_the_window_gets_a_reset() {
        let mut feeds = Feeds::default();
        for _ in 0..WINDOW + 1 {
            feeds.push(event("a"));
        }
        assert_eq!(ids(feeds.after("a", "0-0")), ["reset"]);
        assert_eq!(ids(feeds.after("a", "0-1")).len(), WINDOW);
    }
}
