//! Per-key event feeds (L8), for every backend: the bounded window a resume is served from,
//! the live fan-out to watchers, event ids and the rule that a resume is either complete or a
//! `reset`.
//!
//! A backend publishes a key's changes here only while the key has a feed: from the first
//! watcher until [`FeedLimits::linger`] after the last one left (a long-polling client has no
//! watch open between two polls, and must still find its events). SQLite publishes from its
//! commit path, in commit order, with the feeds' own counter as the position; etcd publishes
//! what its watch of the key's records reports, with the etcd revision as the position. A
//! position is `(major, minor)`: one SQLite commit or one etcd revision may carry several
//! events.
//!
//! Ids are `<epoch>.<major>.<minor>`. The epoch names the sequence the positions belong to
//! (SQLite: a random value per start, so a resume from before a restart is a `reset`; etcd:
//! the cluster, so any replica of the same cluster serves a resume). Within an epoch positions
//! only grow, and a feed knows its `floor`: every event after it is in the window. A resume
//! from before the floor, from another epoch or with an id that does not parse cannot be
//! served completely, so the watcher gets a `reset` with the state now instead.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::WatchEvent;
use tokio::sync::broadcast;

/// An event's place in its epoch's sequence.
pub type Pos = (u64, u32);

/// What the feeds keep and allow (ASSUMPTIONS recorded in C3).
#[derive(Debug, Clone, Copy)]
pub struct FeedLimits {
    /// Events kept per key for resumes.
    pub window: usize,
    /// How long a feed outlives its last watcher.
    pub linger: Duration,
    /// Watchers of one key at once (across connections); one more is refused.
    pub watchers_per_key: usize,
    /// Events a watcher may fall behind the newest before it is sent `reset` and closed.
    pub buffer: usize,
}

impl Default for FeedLimits {
    fn default() -> Self {
        FeedLimits {
            window: 256,
            linger: Duration::from_secs(60),
            watchers_per_key: 1_000,
            buffer: 1_024,
        }
    }
}

/// What a watcher receives live.
#[derive(Debug, Clone)]
pub enum FeedItem {
    /// The next event, at its position.
    Event(Pos, Arc<WatchEvent>),
    /// The backend lost track of the key (its watch broke, history was compacted): every
    /// watcher must `reset` from the state now.
    Gap,
}

/// The start of a subscription: what to send before the live items.
#[derive(Debug)]
pub enum Start {
    /// The events after the resume point, all of them (maybe none yet).
    Backlog(Vec<(Pos, Arc<WatchEvent>)>),
    /// No resume point: send a `snapshot` of the key now.
    Snapshot,
    /// The resume point cannot be served completely: send a `reset` of the key now.
    Reset,
}

/// A watcher's place in a key's feed. Dropping it ends the watch (and starts the linger when
/// it was the key's last).
pub struct Subscription {
    /// What to send first.
    pub start: Start,
    /// Live items, from the instant of subscribing. A watcher that sends a snapshot or reset
    /// skips the items at or before the state's position.
    pub live: broadcast::Receiver<FeedItem>,
    _watcher: WatcherGuard,
}

/// Why a watch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The key already has [`FeedLimits::watchers_per_key`] watchers.
    TooManyWatchers,
}

struct Feed {
    window: VecDeque<(Pos, Arc<WatchEvent>)>,
    /// Every event after this position is in `window`.
    floor: Pos,
    tx: broadcast::Sender<FeedItem>,
    watchers: usize,
    /// When the last watcher left (`None` while watched).
    idle_since: Option<Instant>,
    /// Dropped with the feed: a backend's per-key watch task stops with it.
    _producer: Option<Box<dyn Send>>,
}

struct Inner {
    keys: HashMap<String, Feed>,
    /// The last position handed out by [`Feeds::next_pos`].
    counter: u64,
    last_sweep: Instant,
}

/// Every key's feed, one per store. Clones share the feeds.
#[derive(Clone)]
pub struct Feeds {
    epoch: String,
    limits: FeedLimits,
    inner: Arc<Mutex<Inner>>,
}

impl Feeds {
    /// Feeds whose ids carry `epoch` (no `.` in it).
    pub fn new(epoch: impl Into<String>, limits: FeedLimits) -> Feeds {
        Feeds {
            epoch: epoch.into(),
            limits,
            inner: Arc::new(Mutex::new(Inner {
                keys: HashMap::new(),
                counter: 0,
                last_sweep: Instant::now(),
            })),
        }
    }

    /// The limits these feeds were made with.
    pub fn limits(&self) -> FeedLimits {
        self.limits
    }

    /// The id of the event at `pos`.
    pub fn id(&self, pos: Pos) -> String {
        format!("{}.{}.{}", self.epoch, pos.0, pos.1)
    }

    /// The position an id names, if it is one of this epoch's.
    pub fn parse(&self, id: &str) -> Option<Pos> {
        let rest = id.strip_prefix(&self.epoch)?.strip_prefix('.')?;
        let (major, minor) = rest.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }

    /// Whether `key` has a feed now: only then must a backend publish its changes.
    pub fn is_watched(&self, key: &str) -> bool {
        self.lock().keys.contains_key(key)
    }

    /// The next position of the feeds' own counter (SQLite: one per commit that publishes).
    pub fn next_pos(&self) -> Pos {
        let mut inner = self.lock();
        inner.counter += 1;
        (inner.counter, 0)
    }

    /// The counter's last position: a state read in the same step as the commits that
    /// publish (SQLite's writer thread) is exactly the state at this position.
    pub fn current_pos(&self) -> Pos {
        (self.lock().counter, u32::MAX)
    }

    /// Publishes `event` of `key` at `pos` (positions of a key must grow) to its window and
    /// watchers; nothing when the key has no feed. `event.id` is set here.
    pub fn publish(&self, key: &str, pos: Pos, mut event: WatchEvent) {
        event.id = self.id(pos);
        let mut inner = self.lock();
        let Some(feed) = inner.keys.get_mut(key) else {
            return;
        };
        let event = Arc::new(event);
        feed.window.push_back((pos, event.clone()));
        while feed.window.len() > self.limits.window {
            if let Some((dropped, _)) = feed.window.pop_front() {
                feed.floor = dropped;
            }
        }
        // No receiver is not an error: the feed may be lingering.
        let _ = feed.tx.send(FeedItem::Event(pos, event));
    }

    /// The backend lost track of `key` up to `pos`: the window is emptied (a resume from
    /// before `pos` is a `reset`) and every watcher is told to reset.
    pub fn gap(&self, key: &str, pos: Pos) {
        let mut inner = self.lock();
        if let Some(feed) = inner.keys.get_mut(key) {
            feed.window.clear();
            feed.floor = feed.floor.max(pos);
            let _ = feed.tx.send(FeedItem::Gap);
        }
    }

    /// Adds a watcher of `key` resuming after `after` (an id), creating the key's feed if it
    /// has none. A new feed's floor is `since`'s answer (the backend's position now, or the
    /// resume point it can replay from) and `producer` is kept with it (dropped when the
    /// feed goes); both are asked only when the feed is new.
    pub fn subscribe(
        &self,
        key: &str,
        after: Option<&str>,
        new_feed: impl FnOnce(Option<Pos>) -> (Pos, Option<Box<dyn Send>>),
    ) -> Result<Subscription, Refused> {
        self.subscribe_with(key, after, |_, after| new_feed(after))
    }

    /// [`Feeds::subscribe`] for a backend that publishes at the feeds' own counter
    /// ([`Feeds::next_pos`], SQLite): a new feed's floor is the counter's position at the
    /// instant the feed is made, read under the same lock (asking [`Feeds::current_pos`]
    /// from `subscribe`'s closure would deadlock, and reading it before would leave a window
    /// in which a swept feed's ids look complete).
    pub fn subscribe_counted(
        &self,
        key: &str,
        after: Option<&str>,
    ) -> Result<Subscription, Refused> {
        self.subscribe_with(key, after, |counter, _| ((counter, u32::MAX), None))
    }

    fn subscribe_with(
        &self,
        key: &str,
        after: Option<&str>,
        new_feed: impl FnOnce(u64, Option<Pos>) -> (Pos, Option<Box<dyn Send>>),
    ) -> Result<Subscription, Refused> {
        let after_pos = after.map(|id| self.parse(id));
        let mut inner = self.lock();
        self.sweep(&mut inner);
        let limits = self.limits;
        let counter = inner.counter;
        let feed = match inner.keys.entry(key.to_owned()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let (floor, producer) = new_feed(counter, after_pos.flatten());
                v.insert(Feed {
                    window: VecDeque::new(),
                    floor,
                    tx: broadcast::channel(limits.buffer).0,
                    watchers: 0,
                    idle_since: None,
                    _producer: producer,
                })
            }
        };
        if feed.watchers >= limits.watchers_per_key {
            return Err(Refused::TooManyWatchers);
        }
        feed.watchers += 1;
        feed.idle_since = None;
        let start = match after_pos {
            None => Start::Snapshot,
            Some(Some(pos)) if pos >= feed.floor => Start::Backlog(
                feed.window
                    .iter()
                    .filter(|(p, _)| *p > pos)
                    .cloned()
                    .collect(),
            ),
            Some(_) => Start::Reset,
        };
        Ok(Subscription {
            start,
            live: feed.tx.subscribe(),
            _watcher: WatcherGuard {
                key: key.to_owned(),
                inner: self.inner.clone(),
            },
        })
    }

    /// Whether any key has a feed: a backend may skip looking for events when none has.
    pub fn any(&self) -> bool {
        !self.lock().keys.is_empty()
    }

    /// Drops the feeds whose linger has passed (at most once a second), for a backend to call
    /// on its own schedule: otherwise only a subscribe sweeps, and a key nobody watches any
    /// more would go on costing its backend events until someone watches anything.
    pub fn sweep_idle(&self) {
        let mut inner = self.lock();
        self.sweep(&mut inner);
    }

    /// Keys with a feed now and watchers in all (for `/metrics`).
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        let watchers = inner.keys.values().map(|f| f.watchers).sum();
        (inner.keys.len(), watchers)
    }

    /// Drops the feeds whose linger has passed (at most once a second).
    fn sweep(&self, inner: &mut Inner) {
        let now = Instant::now();
        if now.duration_since(inner.last_sweep) < Duration::from_secs(1) {
            return;
        }
        inner.last_sweep = now;
        let linger = self.limits.linger;
        inner.keys.retain(|_, feed| {
            feed.idle_since
                .is_none_or(|since| now.duration_since(since) < linger)
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves plain data behind; carry on with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a watcher for as long as it lives.
struct WatcherGuard {
    key: String,
    inner: Arc<Mutex<Inner>>,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(feed) = inner.keys.get_mut(&self.key) {
            feed.watchers = feed.watchers.saturating_sub(1);
            if feed.watchers == 0 {
                feed.idle_since = Some(Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::EventKind;

    fn event(key: &str, token: u64) -> WatchEvent {
        WatchEvent {
            id: String::new(),
            kind: EventKind::Granted,
            key: key.into(),
            at_millis: 0,
            fencing_token: Some(token),
            holder_id: None,
            owner: None,
            mode: None,
            limit: None,
            value: None,
            waiter_count: 0,
            state: None,
        }
    }

    fn feeds(window: usize) -> Feeds {
        Feeds::new(
            "e1",
            FeedLimits {
                window,
                watchers_per_key: 2,
                ..FeedLimits::default()
            },
        )
    }

    fn fresh(_: Option<Pos>) -> (Pos, Option<Box<dyn Send>>) {
        ((0, 0), None)
    }

    fn backlog_tokens(start: &Start) -> Vec<u64> {
        match start {
            Start::Backlog(events) => events.iter().filter_map(|(_, e)| e.fencing_token).collect(),
            other => panic!("expected a backlog, got {other:?}"),
        }
    }

    #[test]
    fn ids_name_their_epoch_and_position() {
        let f = feeds(4);
        assert_eq!(f.id((7, 2)), "e1.7.2");
        assert_eq!(f.parse("e1.7.2"), Some((7, 2)));
        assert_eq!(f.parse("e2.7.2"), None);
        assert_eq!(f.parse("e1.7"), None);
        assert_eq!(f.parse("garbage"), None);
    }

    #[test]
    fn only_watched_keys_are_published_and_a_resume_gets_what_followed() {
        let f = feeds(4);
        f.publish("k", f.next_pos(), event("k", 1));
        assert!(!f.is_watched("k"));
        let first = f.subscribe("k", None, fresh).unwrap();
        assert!(matches!(first.start, Start::Snapshot));
        for token in 2..=4 {
            f.publish("k", f.next_pos(), event("k", token));
        }
        // Positions 2, 3 and 4 carry tokens 2, 3 and 4; resume after position 2.
        let resumed = f.subscribe("k", Some("e1.2.0"), fresh).unwrap();
        assert_eq!(backlog_tokens(&resumed.start), vec![3, 4]);
    }

    #[test]
    fn a_resume_older_than_the_window_or_another_epoch_is_a_reset() {
        let f = feeds(2);
        let _w = f.subscribe("k", None, fresh).unwrap();
        for token in 1..=5 {
            f.publish("k", f.next_pos(), event("k", token));
        }
        let old = f.subscribe("k", Some("e1.2.0"), fresh).unwrap();
        assert!(matches!(old.start, Start::Reset));
        drop(old);
        let recent = f.subscribe("k", Some("e1.3.0"), fresh).unwrap();
        assert_eq!(backlog_tokens(&recent.start), vec![4, 5]);
        drop(recent);
        let other = f.subscribe("k", Some("e0.3.0"), fresh).unwrap();
        assert!(matches!(other.start, Start::Reset));
    }

    #[test]
    fn watchers_per_key_are_capped_and_leaving_frees_a_place() {
        let f = feeds(2);
        let a = f.subscribe("k", None, fresh).unwrap();
        let _b = f.subscribe("k", None, fresh).unwrap();
        assert_eq!(
            f.subscribe("k", None, fresh).err(),
            Some(Refused::TooManyWatchers)
        );
        drop(a);
        assert!(f.subscribe("k", None, fresh).is_ok());
        assert!(f.subscribe("other", None, fresh).is_ok());
    }

    #[test]
    fn a_gap_empties_the_window_and_tells_every_watcher() {
        let f = feeds(4);
        let mut w = f.subscribe("k", None, fresh).unwrap();
        f.publish("k", f.next_pos(), event("k", 1));
        f.gap("k", (5, 0));
        assert!(matches!(w.live.try_recv(), Ok(FeedItem::Event((1, 0), _))));
        assert!(matches!(w.live.try_recv(), Ok(FeedItem::Gap)));
        let resumed = f.subscribe("k", Some("e1.1.0"), fresh).unwrap();
        assert!(matches!(resumed.start, Start::Reset));
    }

    #[test]
    fn a_counted_feed_starts_at_the_counter_so_an_older_resume_is_a_reset() {
        let f = feeds(4);
        f.next_pos();
        f.next_pos();
        let w = f.subscribe_counted("k", Some("e1.2.0")).unwrap();
        assert!(
            matches!(w.start, Start::Reset),
            "position 2 was never published"
        );
        f.publish("k", f.next_pos(), event("k", 1));
        let resumed = f.subscribe_counted("k", Some("e1.2.4294967295")).unwrap();
        assert_eq!(backlog_tokens(&resumed.start), vec![1]);
    }

    #[test]
    fn an_idle_feed_is_swept_by_its_backend_after_its_linger() {
        let f = Feeds::new(
            "e1",
            FeedLimits {
                linger: Duration::ZERO,
                ..FeedLimits::default()
            },
        );
        let watched = f.subscribe_counted("k", None).unwrap();
        // Sweeps run at most once a second; wait past that.
        std::thread::sleep(Duration::from_millis(1_100));
        f.sweep_idle();
        assert!(f.is_watched("k"), "a watched feed stays");
        drop(watched);
        std::thread::sleep(Duration::from_millis(1_100));
        f.sweep_idle();
        assert!(!f.is_watched("k") && !f.any());
    }

    #[test]
    fn a_new_feed_starts_where_its_backend_says() {
        let f = feeds(4);
        let mut asked = None;
        let w = f
            .subscribe("k", Some("e1.9.0"), |after| {
                asked = after;
                ((9, 0), None)
            })
            .unwrap();
        assert_eq!(asked, Some((9, 0)));
        assert!(backlog_tokens(&w.start).is_empty());
    }
}
