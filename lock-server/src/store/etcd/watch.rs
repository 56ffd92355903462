//! L8 on etcd: a key's holder changes as events, from etcd's own watch, so a watcher on one
//! replica sees what any replica (or a lease's end) did.
//!
//! **One watch per replica, not per key.** A key's changes live under three prefixes: its
//! holds `l/<key>/`, its tickets `q/<key>/` and the cause markers `m/<key>/` (below). Several
//! etcd watches cannot be merged by revision reliably: a watch that has nothing to report
//! says nothing, so knowing that it is past revision R needs a progress notification, and
//! etcd before 3.4.24 / 3.5.8 may send that ahead of the events it covers.
//! So the layout puts `l/`, `m/`, `n/` and `q/` next to each other, and each replica that has
//! watched keys runs **one** watch (the hub, a task) over that single range
//! (`Keys::watched_range`), with `prev_kv`, and routes each change to the key's feed. One
//! watch is ordered by revision by etcd itself, each revision's changes arrive together, and
//! the hub knows that all changes up to the last revision it received are in.
//!
//! A key's feed (`store::feeds`) is registered with the hub by the guard `new_feed` returns
//! (dropping it, when the feed lingered out, unregisters the key; the hub stops its etcd
//! watch when no key is left). Positions are `(revision, index of the event within the key's
//! changes at that revision)`, and the epoch is the etcd cluster id, so every replica of a
//! cluster names an event alike and a resume can go to any of them.
//!
//! A new feed starts at a position S: the revision the store last saw when nobody resumes,
//! or the resume point. The hub reads the key's holds and tickets **at** that revision (an
//! etcd range with `revision`) and applies the changes after it. If the hub's watch is already
//! past S (a resume from an older id), the hub restarts its watch from S + 1; keys already
//! tracked skip what they have applied. Compacted history (or a future revision, or a resume
//! more than [`MAX_REPLAY`] revisions back) cannot be served: the key's feed gets a gap
//! (`Feeds::gap`), its watchers a `reset`. A watch that breaks is re-opened from the last
//! revision received; compacted meanwhile, every key gets a gap.
//!
//! **Why a hold ended.** A lease's end deletes holds and writes nothing else, so a hold's
//! deletion is an expiry unless the transaction that deleted it says otherwise in the same
//! revision: L6, R1 and L3's hand-off write the cause marker `m/<key>/<session>` (a put, on
//! the hold's lease, in the transaction that ends the hold), and L3 puts `n/<session>` on the
//! session's lease before revoking it, so the revoke deletes it at the very revision that
//! deletes the holds. Settle's own clean-ups of holds past their deadline and a heartbeat's
//! deletion of its expired hold write no marker: expired.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use etcd_client::{EventType, GetOptions, TxnOp, WatchOptions, WatchResponse, WatchStream};
use lock_api::{EventKind, WatchEvent};
use tokio::sync::mpsc;

use super::error::{from_etcd, is_out_of_range};
use super::keys::Watched;
use super::records::{CauseRecord, EndCause, KeyView, LockRecord, TicketRecord};
use super::{decode, range_results, EtcdStore};
use crate::store::feeds::{FeedLimits, Feeds, Pos};
use crate::store::holder_id::HolderIds;
use crate::store::lease::now_millis;
use crate::store::{KeyState, StoreError, Subscription};

/// A resume further back than this many revisions is a `reset` (ASSUMPTION: replaying more
/// history would cost etcd a long scan for one watcher).
pub(super) const MAX_REPLAY: u64 = 100_000;

/// Pause before the hub tries again after etcd failed it.
const RETRY: Duration = Duration::from_millis(300);

/// The store's side of L8: the feeds (made once the cluster id is known) and the hub.
pub(super) struct Watching {
    limits: FeedLimits,
    feeds: OnceLock<Feeds>,
    /// Answered by `feeds()` until the cluster id is known (no key has a feed then).
    unknown: Feeds,
    /// The highest revision this store has seen.
    known: AtomicI64,
    hub: Mutex<Option<mpsc::UnboundedSender<Command>>>,
    next_id: AtomicU64,
}

impl Watching {
    pub(super) fn new(limits: FeedLimits) -> Self {
        Watching {
            limits,
            feeds: OnceLock::new(),
            unknown: Feeds::new("unknown", limits),
            known: AtomicI64::new(0),
            hub: Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    pub(super) fn feeds(&self) -> &Feeds {
        self.feeds.get().unwrap_or(&self.unknown)
    }

    fn saw(&self, revision: i64) {
        self.known.fetch_max(revision, Ordering::Relaxed);
    }

    fn hub(&self) -> std::sync::MutexGuard<'_, Option<mpsc::UnboundedSender<Command>>> {
        self.hub.lock().unwrap_or_else(|e| e.into_inner())
    }
}

enum Command {
    Add { id: u64, key: String, start: Pos },
    Remove { id: u64 },
}

/// Kept by a key's feed: dropping it unregisters the key from the hub.
struct FeedGuard {
    id: u64,
    tx: mpsc::UnboundedSender<Command>,
}

impl Drop for FeedGuard {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Remove { id: self.id });
    }
}

impl EtcdStore {
    /// The feeds, learning the cluster id and the current revision with one read when
    /// `refresh` or not known yet.
    async fn ready_feeds(&self, refresh: bool) -> Result<&Feeds, StoreError> {
        if let (Some(feeds), false) = (self.watching.feeds.get(), refresh) {
            return Ok(feeds);
        }
        let key = self.keys.holder_id_key();
        let response = self
            .call_read(|mut client| {
                let key = key.clone();
                async move {
                    let options = GetOptions::new().with_count_only();
                    client.get(key, Some(options)).await
                }
            })
            .await
            .map_err(from_etcd)?;
        let header = response
            .header()
            .ok_or_else(|| StoreError::Internal("etcd answered without a header".into()))?;
        self.watching.saw(header.revision());
        let cluster = header.cluster_id();
        Ok(self
            .watching
            .feeds
            .get_or_init(|| Feeds::new(format!("{cluster:x}"), self.watching.limits)))
    }

    /// L8: a watcher of `key`; a key without a feed gets one, registered with the hub.
    pub(super) async fn subscribe(
        &self,
        key: &str,
        after: Option<&str>,
    ) -> Result<Subscription, StoreError> {
        let fresh = self
            .watching
            .feeds
            .get()
            .is_none_or(|feeds| !feeds.is_watched(key));
        let feeds = self.ready_feeds(fresh).await?;
        let now = self.watching.known.load(Ordering::Relaxed).max(1) as u64;
        feeds
            .subscribe(key, after, |asked| {
                let start = match asked {
                    Some(pos) if pos.0.saturating_add(MAX_REPLAY) >= now => pos,
                    // Too old to replay (a `reset`, as the start is past it), or no resume.
                    _ => (now, u32::MAX),
                };
                let guard = self.register(key, start);
                (start, Some(Box::new(guard) as Box<dyn Send>))
            })
            .map_err(|_| StoreError::TooManyWatchers)
    }

    /// The key's state for a `snapshot` or `reset`, read at one revision R: position
    /// (R, `u32::MAX`), after every change at R.
    pub(super) async fn state_at_now(&self, key: &str) -> Result<(KeyState, Pos), StoreError> {
        self.ready_feeds(false).await?;
        let holder_ids = self.holder_ids().await?;
        let view = self.read_key(key).await?;
        self.watching.saw(view.revision);
        let state = super::lock::state_of(&view, holder_ids, now_millis());
        Ok((state, (view.revision.max(0) as u64, u32::MAX)))
    }

    /// Registers `key`'s new feed, starting after `start`, with the hub (started if none runs).
    fn register(&self, key: &str, start: Pos) -> FeedGuard {
        let id = self.watching.next_id.fetch_add(1, Ordering::Relaxed);
        let mut hub = self.watching.hub();
        let tx = match hub.as_ref() {
            Some(tx) if !tx.is_closed() => tx.clone(),
            _ => {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(Hub::new(self.clone(), rx).run());
                *hub = Some(tx.clone());
                tx
            }
        };
        let _ = tx.send(Command::Add {
            id,
            key: key.to_owned(),
            start,
        });
        FeedGuard { id, tx }
    }

    /// `key`'s holds and tickets at `revision`.
    async fn read_key_at(
        &self,
        key: &str,
        revision: i64,
    ) -> Result<KeyView, Result<StoreError, StoreError>> {
        let at = || GetOptions::new().with_prefix().with_revision(revision);
        let ops = vec![
            TxnOp::get(self.keys.holds(key), Some(at())),
            TxnOp::get(self.keys.queue(key), Some(at())),
        ];
        let txn = etcd_client::Txn::new().and_then(ops);
        let response = self
            .call_read(|mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await;
        match response {
            Ok(response) => {
                let reads = range_results(&response);
                // The stamp is not needed here: an empty first read stands for it.
                let reads = std::iter::once(Vec::new()).chain(reads);
                KeyView::decode(reads, revision).map_err(Err)
            }
            // Compacted or a future revision: history we cannot replay.
            Err(error) if is_out_of_range(&error) => Err(Ok(from_etcd(error))),
            Err(error) => Err(Err(from_etcd(error))),
        }
    }
}

/// A watched key as the hub tracks it.
struct Tracked {
    key: String,
    /// Events at or before this position are not published (the feed starts after it).
    after: Pos,
    /// Every change up to this revision is in `holds` and `tickets` (once `loaded`).
    applied: i64,
    loaded: bool,
    state: KeyTrack,
}

/// A key's holds (by session: token and record) and tickets, as the changes so far left them.
#[derive(Default)]
pub(super) struct KeyTrack {
    holds: BTreeMap<String, (u64, LockRecord)>,
    tickets: BTreeMap<String, TicketRecord>,
    waiters: u32,
}

impl KeyTrack {
    fn from_view(view: &KeyView, now: u64) -> KeyTrack {
        let mut track = KeyTrack {
            holds: view
                .holds
                .iter()
                .map(|(kv, hold)| (hold.session_id.clone(), (hold.token(kv), hold.clone())))
                .collect(),
            tickets: view
                .tickets
                .iter()
                .map(|(_, ticket)| (ticket.session_id.clone(), ticket.clone()))
                .collect(),
            waiters: 0,
        };
        track.waiters = track.live_waiters(now);
        track
    }

    fn live_waiters(&self, now: u64) -> u32 {
        self.tickets.values().filter(|t| t.live(now)).count() as u32
    }
}

/// One change of a key at one revision.
pub(super) enum Change {
    HoldPut {
        session: String,
        token: u64,
        record: LockRecord,
    },
    HoldDeleted {
        session: String,
    },
    TicketPut {
        session: String,
        record: TicketRecord,
    },
    TicketDeleted {
        session: String,
    },
}

/// The causes written at one revision: per session, by the cause markers of this key and by
/// closing markers.
#[derive(Default)]
pub(super) struct Causes {
    pub by_marker: HashMap<String, CauseRecord>,
    pub closing: HashMap<String, CauseRecord>,
}

impl Causes {
    fn of(&self, session: &str) -> Option<CauseRecord> {
        self.by_marker
            .get(session)
            .or_else(|| self.closing.get(session))
            .copied()
    }
}

/// The events one revision's changes of `key` make, in order: ended holds (by token), holds
/// begun (by token), values changed (by token); only `waiters` when nothing else happened
/// but the number of live tickets changed. `id` is left empty (the feed sets it).
pub(super) fn translate(
    key: &str,
    track: &mut KeyTrack,
    changes: Vec<Change>,
    causes: &Causes,
    holder_ids: &HolderIds,
    now: u64,
) -> Vec<WatchEvent> {
    let mut ended: Vec<(u64, LockRecord, EventKind, u64)> = Vec::new();
    let mut begun: Vec<(u64, LockRecord, EventKind, u64)> = Vec::new();
    let mut proclaimed: Vec<(u64, LockRecord, EventKind, u64)> = Vec::new();
    let mut end = |token: u64, record: LockRecord| {
        let (kind, at) = match causes.of(&record.session_id) {
            Some(CauseRecord {
                cause: EndCause::Released,
                at_ms,
            }) => (EventKind::Released, at_ms),
            Some(CauseRecord {
                cause: EndCause::Revoked,
                at_ms,
            }) => (EventKind::Revoked, at_ms),
            None => {
                let claim_by = record.claim_by_ms.unwrap_or(u64::MAX);
                let due = record
                    .deadline_ms
                    .min(record.session_deadline_ms)
                    .min(claim_by);
                (EventKind::Expired, due.min(now))
            }
        };
        ended.push((token, record, kind, at));
    };
    for change in changes {
        match change {
            Change::HoldPut {
                session,
                token,
                record,
            } => {
                let began = record
                    .deadline_ms
                    .saturating_sub(record.ttl_millis)
                    .min(now);
                match track.holds.get(&session) {
                    Some((old, before)) if *old == token => {
                        if before.value != record.value {
                            proclaimed.push((token, record.clone(), EventKind::Proclaimed, now));
                        }
                    }
                    other => {
                        if let Some((old, before)) = other {
                            // Its end was not seen as such: it went unnoticed.
                            end(*old, before.clone());
                        }
                        let kind = match record.token {
                            Some(_) => EventKind::HandedOff,
                            None => EventKind::Granted,
                        };
                        begun.push((token, record.clone(), kind, began));
                    }
                }
                track.holds.insert(session, (token, record));
            }
            Change::HoldDeleted { session } => {
                if let Some((token, record)) = track.holds.remove(&session) {
                    end(token, record);
                }
            }
            Change::TicketPut { session, record } => {
                track.tickets.insert(session, record);
            }
            Change::TicketDeleted { session } => {
                track.tickets.remove(&session);
            }
        }
    }
    let waiters = track.live_waiters(now);
    let changed = waiters != track.waiters;
    track.waiters = waiters;
    for list in [&mut ended, &mut begun, &mut proclaimed] {
        list.sort_by_key(|(token, ..)| *token);
    }
    // Each event carries the live tickets right after it: a hand-off takes its ticket out of
    // the queue, so the events before it still count that ticket.
    let handoffs = begun
        .iter()
        .filter(|(.., kind, _)| *kind == EventKind::HandedOff)
        .count() as u32;
    let mut count = waiters + handoffs;
    let mut events: Vec<WatchEvent> = ended
        .into_iter()
        .chain(begun)
        .chain(proclaimed)
        .map(|(token, record, kind, at)| {
            if kind == EventKind::HandedOff {
                count = count.saturating_sub(1);
            }
            WatchEvent {
                id: String::new(),
                kind,
                key: key.to_owned(),
                at_millis: at,
                fencing_token: Some(token),
                holder_id: Some(holder_ids.of(&record.session_id)),
                owner: record.owner.clone(),
                mode: Some(record.mode),
                limit: record.limit,
                value: match kind {
                    EventKind::Granted | EventKind::HandedOff | EventKind::Proclaimed => {
                        record.value
                    }
                    _ => None,
                },
                waiter_count: count,
                state: None,
            }
        })
        .collect();
    if events.is_empty() && changed {
        events.push(WatchEvent {
            id: String::new(),
            kind: EventKind::Waiters,
            key: key.to_owned(),
            at_millis: now,
            fencing_token: None,
            holder_id: None,
            owner: None,
            mode: None,
            limit: None,
            value: None,
            waiter_count: waiters,
            state: None,
        });
    }
    events
}

/// The replica's one watch and the keys it feeds.
struct Hub {
    store: EtcdStore,
    rx: mpsc::UnboundedReceiver<Command>,
    tracked: HashMap<u64, Tracked>,
    /// Encoded key → its feed's id.
    by_enc: HashMap<String, u64>,
    /// Every change up to this revision has been received (while `stream` is open).
    position: i64,
    /// Which member the next watch goes to.
    endpoint: usize,
}

impl Hub {
    fn new(store: EtcdStore, rx: mpsc::UnboundedReceiver<Command>) -> Hub {
        let endpoint = store.pinned.load(Ordering::Relaxed);
        Hub {
            store,
            rx,
            tracked: HashMap::new(),
            by_enc: HashMap::new(),
            position: 0,
            endpoint,
        }
    }

    async fn run(mut self) {
        let mut stream: Option<WatchStream> = None;
        loop {
            if self.tracked.is_empty() {
                // No watch without keys; the next key starts it afresh.
                stream = None;
                self.position = 0;
                {
                    let mut hub = self.store.watching.hub();
                    if self.rx.is_empty() {
                        *hub = None;
                        return;
                    }
                }
                match self.rx.recv().await {
                    Some(command) => self.command(command),
                    None => return,
                }
                continue;
            }
            let restart = match self.load().await {
                Ok(restart) => restart,
                Err(()) => {
                    self.pause().await;
                    continue;
                }
            };
            if restart {
                stream = None;
            }
            let open = match stream.as_mut() {
                Some(open) => open,
                None => match self.open().await {
                    Some(open) => stream.insert(open),
                    None => {
                        self.pause().await;
                        continue;
                    }
                },
            };
            tokio::select! {
                command = self.rx.recv() => match command {
                    Some(command) => self.command(command),
                    None => return,
                },
                message = open.message() => match message {
                    Ok(Some(response)) => {
                        if !self.receive(response).await {
                            stream = None;
                        }
                    }
                    // Broken (etcd restarted, network): re-opened from `position`.
                    _ => {
                        stream = None;
                        self.endpoint += 1;
                        tokio::time::sleep(RETRY).await;
                    }
                },
            }
        }
    }

    /// Waits out a failure, taking commands meanwhile.
    async fn pause(&mut self) {
        let sleep = tokio::time::sleep(RETRY);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return,
                command = self.rx.recv() => match command {
                    Some(command) => self.command(command),
                    None => return,
                },
            }
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Add { id, key, start } => {
                let enc = lock_api::limits::encode_key(&key);
                // The state is read at the start's revision: its every change, or (in the
                // middle of a revision's events) those before it.
                let applied = match start.1 {
                    u32::MAX => start.0 as i64,
                    _ => start.0 as i64 - 1,
                };
                if let Some(old) = self.by_enc.insert(enc, id) {
                    self.tracked.remove(&old);
                }
                self.tracked.insert(
                    id,
                    Tracked {
                        key,
                        after: start,
                        applied,
                        loaded: false,
                        state: KeyTrack::default(),
                    },
                );
            }
            Command::Remove { id } => {
                if let Some(gone) = self.tracked.remove(&id) {
                    let enc = lock_api::limits::encode_key(&gone.key);
                    if self.by_enc.get(&enc) == Some(&id) {
                        self.by_enc.remove(&enc);
                    }
                }
            }
        }
    }

    /// Reads the state of every key not loaded yet; whether the watch must restart further
    /// back (a key starts before the hub's position). `Err` when etcd failed.
    async fn load(&mut self) -> Result<bool, ()> {
        let mut restart = false;
        let ids: Vec<u64> = self
            .tracked
            .iter()
            .filter(|(_, t)| !t.loaded)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(tracked) = self.tracked.get(&id) else {
                continue;
            };
            let (key, at) = (tracked.key.clone(), tracked.applied);
            let view = match self.store.read_key_at(&key, at.max(1)).await {
                Ok(view) => view,
                Err(Ok(_)) => {
                    self.gap(id).await?;
                    continue;
                }
                Err(Err(_)) => return Err(()),
            };
            let Some(tracked) = self.tracked.get_mut(&id) else {
                continue;
            };
            tracked.state = KeyTrack::from_view(&view, now_millis());
            tracked.loaded = true;
            if at < self.position {
                restart = true;
            }
        }
        if restart {
            self.position = self
                .tracked
                .values()
                .map(|t| t.applied)
                .min()
                .unwrap_or(self.position);
        }
        Ok(restart)
    }

    /// The key's history cannot be replayed: its state now, and a gap for its watchers.
    async fn gap(&mut self, id: u64) -> Result<(), ()> {
        let Some(key) = self.tracked.get(&id).map(|t| t.key.clone()) else {
            return Ok(());
        };
        let view = self.store.read_key(&key).await.map_err(|_| ())?;
        self.store.watching.saw(view.revision);
        let Some(tracked) = self.tracked.get_mut(&id) else {
            return Ok(());
        };
        tracked.state = KeyTrack::from_view(&view, now_millis());
        tracked.loaded = true;
        tracked.applied = view.revision;
        tracked.after = (view.revision as u64, u32::MAX);
        self.store.watching.feeds().gap(&key, tracked.after);
        Ok(())
    }

    /// Opens the watch from `position` + 1 (from the earliest key's start when none was open).
    async fn open(&mut self) -> Option<WatchStream> {
        if self.position == 0 {
            self.position = self.tracked.values().map(|t| t.applied).min()?;
        }
        let (start, end) = self.store.keys.watched_range();
        let options = WatchOptions::new()
            .with_range(end)
            .with_prev_key()
            .with_start_revision(self.position + 1);
        let clients = &self.store.clients;
        let mut client = clients[self.endpoint % clients.len()].clone();
        match client.watch(start, Some(options)).await {
            Ok(stream) => Some(stream),
            Err(_) => {
                self.endpoint += 1;
                None
            }
        }
    }

    /// Handles one watch response; `false` when the watch ended (re-opened by the caller).
    async fn receive(&mut self, response: WatchResponse) -> bool {
        if response.canceled() {
            if response.compact_revision() > 0 {
                // History from `position` is gone: every key starts again from now.
                let ids: Vec<u64> = self.tracked.keys().copied().collect();
                for id in ids {
                    if self.gap(id).await.is_err() {
                        if let Some(t) = self.tracked.get_mut(&id) {
                            t.loaded = false;
                        }
                    }
                }
                self.position = self.tracked.values().map(|t| t.applied).min().unwrap_or(0);
            }
            return false;
        }
        let Ok(holder_ids) = self.store.holder_ids().await.cloned() else {
            return false;
        };
        let mut last = None;
        let events = response.events();
        let mut start = 0;
        while start < events.len() {
            let revision = events[start].kv().map_or(0, |kv| kv.mod_revision());
            let mut stop = start;
            while stop < events.len()
                && events[stop].kv().map_or(0, |kv| kv.mod_revision()) == revision
            {
                stop += 1;
            }
            self.revision(revision, &events[start..stop], &holder_ids);
            last = Some(revision);
            start = stop;
        }
        // Only events say how far the watch is: a created answer's header may be ahead of
        // the history still to come.
        let Some(reached) = last else {
            return true;
        };
        if reached > self.position {
            self.position = reached;
            self.store.watching.saw(reached);
            for tracked in self.tracked.values_mut().filter(|t| t.loaded) {
                tracked.applied = tracked.applied.max(reached);
            }
        }
        true
    }

    /// The changes of one revision: routed to the keys tracked, translated, published.
    fn revision(&mut self, revision: i64, events: &[etcd_client::Event], holder_ids: &HolderIds) {
        let keys = &self.store.keys;
        let mut closing: HashMap<String, CauseRecord> = HashMap::new();
        let mut per_key: HashMap<u64, (Vec<Change>, HashMap<String, CauseRecord>)> = HashMap::new();
        for event in events {
            let Some(kv) = event.kv() else { continue };
            let Some(watched) = keys.parse_watched(kv.key()) else {
                continue;
            };
            let put = event.event_type() == EventType::Put;
            if let Watched::Closing(session) = watched {
                if !put {
                    let cause = event
                        .prev_kv()
                        .and_then(|prev| decode::<CauseRecord>(prev).ok())
                        .unwrap_or(CauseRecord {
                            cause: EndCause::Released,
                            at_ms: now_millis(),
                        });
                    closing.insert(session.to_owned(), cause);
                }
                continue;
            }
            let (Watched::Hold(enc, session)
            | Watched::Cause(enc, session)
            | Watched::Ticket(enc, session)) = watched
            else {
                continue;
            };
            let Some(&id) = self.by_enc.get(enc) else {
                continue;
            };
            match self.tracked.get(&id) {
                Some(t) if t.loaded && revision > t.applied => {}
                _ => continue,
            }
            let (changes, causes) = per_key.entry(id).or_default();
            let session = session.to_owned();
            match (watched, put) {
                (Watched::Hold(..), true) => {
                    if let Ok(record) = decode::<LockRecord>(kv) {
                        let token = record.token(kv);
                        changes.push(Change::HoldPut {
                            session,
                            token,
                            record,
                        });
                    }
                }
                (Watched::Hold(..), false) => changes.push(Change::HoldDeleted { session }),
                (Watched::Ticket(..), true) => {
                    if let Ok(record) = decode::<TicketRecord>(kv) {
                        changes.push(Change::TicketPut { session, record });
                    }
                }
                (Watched::Ticket(..), false) => {
                    changes.push(Change::TicketDeleted { session });
                }
                (Watched::Cause(..), true) => {
                    if let Ok(cause) = decode::<CauseRecord>(kv) {
                        causes.insert(session, cause);
                    }
                }
                _ => {}
            }
        }
        let now = now_millis();
        let feeds = self.store.watching.feeds().clone();
        for (id, (changes, by_marker)) in per_key {
            let Some(tracked) = self.tracked.get_mut(&id) else {
                continue;
            };
            let causes = Causes {
                by_marker,
                closing: closing.clone(),
            };
            let events = translate(
                &tracked.key,
                &mut tracked.state,
                changes,
                &causes,
                holder_ids,
                now,
            );
            tracked.applied = revision;
            for (minor, event) in events.into_iter().enumerate() {
                let pos = (revision as u64, minor as u32);
                if pos > tracked.after {
                    feeds.publish(&tracked.key, pos, event);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use lock_api::LockMode;

    use super::*;

    fn hold(session: &str, token: Option<u64>, value: Option<&str>) -> LockRecord {
        LockRecord {
            key: "k".into(),
            session_id: session.into(),
            ttl_millis: 1_000,
            mode: LockMode::Exclusive,
            limit: None,
            deadline_ms: 5_000,
            session_deadline_ms: 9_000,
            owner: None,
            token,
            claim_by_ms: None,
            value: value.map(str::to_owned),
            epoch: 0,
        }
    }

    fn ticket(session: &str) -> TicketRecord {
        TicketRecord {
            session_id: session.into(),
            ttl_millis: 1_000,
            mode: LockMode::Exclusive,
            limit: None,
            open_until_ms: u64::MAX / 2,
            grace_millis: 1_000,
            value: Some("w".into()),
        }
    }

    fn put(session: &str, token: u64, record: LockRecord) -> Change {
        Change::HoldPut {
            session: session.into(),
            token,
            record,
        }
    }

    fn run(
        track: &mut KeyTrack,
        changes: Vec<Change>,
        causes: &Causes,
    ) -> Vec<(EventKind, Option<u64>, u32)> {
        let ids = HolderIds::new([7; 32]);
        translate("k", track, changes, causes, &ids, 1_000)
            .into_iter()
            .map(|e| (e.kind, e.fencing_token, e.waiter_count))
            .collect()
    }

    #[test]
    fn a_revision_ends_holds_before_it_grants_and_names_each_cause() {
        let mut track = KeyTrack::default();
        let none = Causes::default();
        assert_eq!(
            run(
                &mut track,
                vec![put("a", 10, hold("a", None, Some("v")))],
                &none
            ),
            vec![(EventKind::Granted, Some(10), 0)]
        );
        assert_eq!(
            run(
                &mut track,
                vec![Change::TicketPut {
                    session: "b".into(),
                    record: ticket("b")
                }],
                &none
            ),
            vec![(EventKind::Waiters, None, 1)]
        );
        // A heartbeat's rewrite says nothing; a value change is `proclaimed`.
        assert!(run(
            &mut track,
            vec![put("a", 10, hold("a", None, Some("v")))],
            &none
        )
        .is_empty());
        assert_eq!(
            run(
                &mut track,
                vec![put("a", 10, hold("a", None, Some("v2")))],
                &none
            ),
            vec![(EventKind::Proclaimed, Some(10), 1)]
        );
        // The hand-off writes the new hold before it deletes the old one; events still come
        // in token order, with the marker naming the release.
        let mut released = Causes::default();
        released.by_marker.insert(
            "a".into(),
            CauseRecord {
                cause: EndCause::Released,
                at_ms: 900,
            },
        );
        let changes = vec![
            Change::TicketDeleted {
                session: "b".into(),
            },
            put("b", 11, hold("b", Some(11), Some("w"))),
            Change::HoldDeleted {
                session: "a".into(),
            },
        ];
        assert_eq!(
            run(&mut track, changes, &released),
            vec![
                (EventKind::Released, Some(10), 1),
                (EventKind::HandedOff, Some(11), 0)
            ]
        );
        // Deleted without a marker: expired; with a closing marker: released; R1: revoked.
        assert_eq!(
            run(
                &mut track,
                vec![Change::HoldDeleted {
                    session: "b".into()
                }],
                &none
            ),
            vec![(EventKind::Expired, Some(11), 0)]
        );
        run(&mut track, vec![put("c", 12, hold("c", None, None))], &none);
        let mut closing = Causes::default();
        closing.closing.insert(
            "c".into(),
            CauseRecord {
                cause: EndCause::Released,
                at_ms: 900,
            },
        );
        assert_eq!(
            run(
                &mut track,
                vec![Change::HoldDeleted {
                    session: "c".into()
                }],
                &closing
            ),
            vec![(EventKind::Released, Some(12), 0)]
        );
        run(&mut track, vec![put("d", 13, hold("d", None, None))], &none);
        let mut revoked = Causes::default();
        revoked.by_marker.insert(
            "d".into(),
            CauseRecord {
                cause: EndCause::Revoked,
                at_ms: 900,
            },
        );
        assert_eq!(
            run(
                &mut track,
                vec![Change::HoldDeleted {
                    session: "d".into()
                }],
                &revoked
            ),
            vec![(EventKind::Revoked, Some(13), 0)]
        );
    }
}
