//! A model of lock-server for the simulation: sessions and holds with TTLs on the simulated
//! clock, per-key strictly increasing fencing tokens, idempotent L4 per session,
//! compare-and-delete L6, exclusive and shared holds (read-write locks, counting semaphores)
//! and the wait queue per key (one FIFO for both modes; the hand-off grants every head ticket
//! that fits and stops at the first that does not, so a queued writer holds back later
//! readers; a grace period after a ticket's last request, unclaimed hand-offs, no barging,
//! the cap), hold values (L4 `value`, L9), the demo ledgers, fenced and unfenced (`ledger`),
//! and the L8 feed of each key (`feed`: the event window, ids, snapshot and reset; the JSON
//! long poll) — the C3 rules, in memory. Which hold fits beside which, and the shared limit
//! in force, are `holds`' rules; every ticket and hold is recorded in a [`History`] the
//! simulation checks. [`super::SimTransport`] puts a seeded, lossy network in front of it.
//!
//! One deliberate difference: an L4 by the holder returns its grant *without* renewing it
//! (a server of the kind C2 stays safe against), except when it claims an unclaimed
//! hand-off, which the server renews from the claiming request's arrival.

mod feed;
mod history;
mod holds;
mod ledger;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ChangeKind, ErrorBody, ErrorCode, EventBatch, EventKind, HeartbeatResponse,
    HeldLock, HoldChange, HoldKind, Holder, LockMode, LockState, LockStatus, OpenSessionRequest,
    ProclaimRequest, ReleaseRequest, RevokeRequest, SessionOpened, SessionStatus, WatchEvent,
};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::signal::Notify;
use crate::transport::{Answer, Reply, Request, SessionRef};

pub use feed::WINDOW;
use feed::{Feeds, Poll};
pub use history::{Event, History, Step};
use holds::{fits, held_back, limit_in_force, SimLock, SimTicket};
use ledger::Ledgers;

/// How long a ticket keeps its place after its last request ended (the server's default).
pub const GRACE: Duration = Duration::from_millis(1_000);
/// Most tickets in one key's queue (the server's default).
pub const QUEUE_CAP: usize = 64;
/// Extra wait past a holder's deadline before a waiter looks again (as the server's).
const EXPIRY_SLACK: Duration = Duration::from_millis(5);

/// Deliberate bugs, to prove the simulation's invariants can fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// L4 grants even when another session holds the key (a broken server).
    pub double_grant: bool,
    /// Locks expire after half their TTL (a server clock running twice as fast as the
    /// client's: beyond what any safety margin covers).
    pub fast_expiry: bool,
    /// The queue hands the lock to its newest live ticket instead of its oldest.
    pub lifo_queue: bool,
    /// A shared hold is granted beside an exclusive one (readers let in with a writer).
    pub shared_beside_exclusive: bool,
    /// A shared hold is granted whatever the key's limit (a semaphore over its permits).
    pub ignore_limit: bool,
    /// A shared L4 of a key held shared is granted past queued tickets (a reader-preferring
    /// lock: a stream of readers starves a queued writer).
    pub readers_barge: bool,
    /// A key's token counter restarts when the key is freed (a server that forgets a key's
    /// last token with its row): a later holder, a later leader, gets an old token again.
    pub forget_tokens: bool,
}

/// The modelled server. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct SimService {
    clock: ManualClock,
    faults: Faults,
    state: Arc<Mutex<ServiceState>>,
    /// Every hand-off: waiting requests look again.
    handed: Notify,
}

#[derive(Default)]
struct ServiceState {
    next_session: u64,
    sessions: BTreeMap<String, SimSession>,
    /// Each held key's live holds, in token order (never an empty list).
    locks: BTreeMap<String, Vec<SimLock>>,
    last_token: BTreeMap<String, u64>,
    /// Holds that ran out their own TTL while their session lived, in expiry order.
    lapsed: Vec<Lapse>,
    /// Each key's wait queue, oldest ticket first.
    queues: BTreeMap<String, Vec<SimTicket>>,
    next_ticket: u64,
    /// Hand-offs that skipped an older live ticket (the FIFO invariant).
    out_of_order: Vec<String>,
    /// Kept only when asked for ([`SimService::recording_history`]).
    history: Option<History>,
    /// The planted `forget_tokens` fault (see [`Faults`]).
    forget_tokens: bool,
    /// The L8 events of every key.
    feeds: Feeds,
    /// L2's versions: the last one answered, across sessions (each answer takes the next).
    last_version: u64,
    /// The demo ledgers, fenced and unfenced.
    ledgers: Ledgers,
}

impl ServiceState {
    /// Appends `step` of `key` at `at` to the history, if this server keeps one.
    fn record(&mut self, at: Duration, key: &str, step: Step) {
        if let Some(history) = &mut self.history {
            history.record(at, key, step);
        }
    }

    /// `key`'s live holds (none when it is free).
    fn holds(&self, key: &str) -> &[SimLock] {
        self.locks.get(key).map_or(&[], Vec::as_slice)
    }

    /// `key`'s queue (live tickets only after an expiry pass).
    fn queue(&self, key: &str) -> &[SimTicket] {
        self.queues.get(key).map_or(&[], Vec::as_slice)
    }

    /// Appends an L8 event of `kind` about `hold` (none: only the waiters changed) to `key`'s
    /// feed, with the key's waiter count now.
    fn announce(&mut self, now: Duration, key: &str, kind: EventKind, hold: Option<&SimLock>) {
        let event = WatchEvent {
            id: String::new(),
            kind,
            key: key.to_owned(),
            at_millis: now.as_millis() as u64,
            fencing_token: hold.map(|h| h.token),
            holder_id: hold.map(|h| sim_holder_id(&h.session)),
            owner: None,
            mode: hold.map(|h| h.kind.mode()),
            limit: hold.and_then(|h| h.kind.limit()),
            value: hold
                .filter(|_| kind.is_grant() || kind == EventKind::Proclaimed)
                .and_then(|h| h.value.clone()),
            waiter_count: self.queue(key).len() as u32,
            state: None,
        };
        self.feeds.push(event);
    }

    /// Adds `lock` to `key`'s holds under the key's next token, announced as `kind`
    /// (`granted` or `handedOff`); returns it as added.
    fn issue(
        &mut self,
        now: Duration,
        key: &str,
        lock: SimLock,
        ticket: Option<u64>,
        kind: EventKind,
    ) -> SimLock {
        let token = self.last_token.get(key).copied().unwrap_or(0) + 1;
        self.last_token.insert(key.to_owned(), token);
        let lock = SimLock { token, ..lock };
        let step = Step::Granted {
            token,
            session: lock.session.clone(),
            kind: lock.kind,
            ticket,
        };
        self.record(now, key, step);
        self.locks
            .entry(key.to_owned())
            .or_default()
            .push(lock.clone());
        self.announce(now, key, kind, Some(&lock));
        lock
    }

    /// Ends the holds of `key` that `ends` picks, announced as `kind` (`released`, `expired`
    /// or `revoked`).
    fn end_holds(
        &mut self,
        now: Duration,
        key: &str,
        kind: EventKind,
        ends: impl Fn(&SimLock) -> bool,
    ) -> Vec<u64> {
        let Some(holds) = self.locks.get_mut(key) else {
            return Vec::new();
        };
        let (ended, kept): (Vec<SimLock>, Vec<SimLock>) = holds.drain(..).partition(ends);
        *holds = kept;
        if holds.is_empty() {
            self.locks.remove(key);
            if self.forget_tokens {
                self.last_token.remove(key);
            }
        }
        let tokens: Vec<u64> = ended.iter().map(|l| l.token).collect();
        for lock in &ended {
            self.record(now, key, Step::Ended { token: lock.token });
            self.announce(now, key, kind, Some(lock));
        }
        tokens
    }

    /// Drops the tickets of `key` that `drops` picks; a `waiters` event when `announce` and
    /// any went (a ticket that leaves because it is granted is told by the grant's event).
    fn drop_tickets(
        &mut self,
        now: Duration,
        key: &str,
        announce: bool,
        drops: impl Fn(&SimTicket) -> bool,
    ) {
        let Some(queue) = self.queues.get_mut(key) else {
            return;
        };
        let (dropped, kept): (Vec<SimTicket>, Vec<SimTicket>) = queue.drain(..).partition(drops);
        *queue = kept;
        if queue.is_empty() {
            self.queues.remove(key);
        }
        let any = !dropped.is_empty();
        for ticket in dropped {
            let step = Step::Left { ticket: ticket.seq };
            self.record(now, key, step);
        }
        if any && announce {
            self.announce(now, key, EventKind::Waiters, None);
        }
    }

    /// L7's answer for `key` at `now`: every holder in token order; `holder` only when the
    /// key is held exclusive.
    fn state_of(&self, key: &str, now: Duration) -> LockState {
        let holds = self.holds(key);
        let exclusive = holds.iter().find(|l| l.kind == HoldKind::Exclusive);
        let holder = |l: &SimLock| Holder {
            value: l.value.clone(),
            holder_id: sim_holder_id(&l.session),
            owner: None,
            fencing_token: l.token,
            remaining_millis: (l.end().saturating_sub(now)).as_millis() as u64,
        };
        LockState {
            key: key.to_owned(),
            mode: holds.first().map(|_| match exclusive {
                Some(_) => LockMode::Exclusive,
                None => LockMode::Shared,
            }),
            holder: exclusive.map(holder),
            holders: holds.iter().map(holder).collect(),
            limit: holds.iter().find_map(|l| l.kind.limit()),
            waiter_count: self.queue(key).len() as u32,
        }
    }
}

/// What one L4 attempt found.
enum Attempt {
    /// Granted; the lease runs from `lease_start`.
    Granted(lock_api::LockGrant, Duration),
    Contended,
    /// This session's ticket waits; something that may let it in happens at most this much
    /// later (a hold ends, a ticket ahead dies).
    Queued(Duration),
}

/// A hold that expired by its own TTL while its session was alive: nothing renewed it in
/// time (the simulation's invariant "a lock whose session's heartbeats are all answered
/// never expires at the server" looks at these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lapse {
    /// The key.
    pub key: String,
    /// The holding session.
    pub session: String,
    /// The grant's token.
    pub token: u64,
    /// The instant its TTL ran out.
    pub at: Duration,
}

/// One live hold of a key, as [`SimService::holds`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHold {
    /// The holding session.
    pub session: String,
    /// The hold's token.
    pub token: u64,
    /// Exclusive, or shared under the key's limit.
    pub kind: HoldKind,
}

struct SimSession {
    ttl: Duration,
    expires: Duration,
    /// The version of the session's last L2 answer and the holds it was exact at; a `since`
    /// naming it gets what changed after (or nothing), any other the full list (the model of
    /// a server that cannot answer from an older version).
    answered: Option<(String, Holds)>,
}

/// A session's holds as an L2 lists them: key → (token, mode).
type Holds = BTreeMap<String, (u64, LockMode)>;

/// What changed from `seen` to `now`, one entry per key: its state in `now`, or `gone` with
/// the token it had.
fn hold_changes(seen: &Holds, now: &Holds) -> Vec<HoldChange> {
    let change = |key: &String, (fencing_token, mode): (u64, LockMode), change| HoldChange {
        key: key.clone(),
        fencing_token,
        mode,
        change,
    };
    let granted = now
        .iter()
        .filter(|(key, hold)| seen.get(*key) != Some(hold))
        .map(|(key, hold)| change(key, *hold, ChangeKind::Granted));
    let gone = seen
        .iter()
        .filter(|(key, _)| !now.contains_key(*key))
        .map(|(key, hold)| change(key, *hold, ChangeKind::Gone));
    granted.chain(gone).collect()
}

fn status(code: ErrorCode) -> TransportError {
    error(ErrorBody::new(code, "sim"))
}

fn error(body: ErrorBody) -> TransportError {
    TransportError::Status {
        status: body.code.status(),
        body,
    }
}

impl SimService {
    /// An empty server on `clock`.
    pub fn new(clock: ManualClock, faults: Faults) -> Self {
        let state = ServiceState {
            forget_tokens: faults.forget_tokens,
            ..ServiceState::default()
        };
        SimService {
            clock,
            faults,
            state: Arc::new(Mutex::new(state)),
            handed: Notify::default(),
        }
    }

    /// The server's clock (the network's delays run on it too).
    pub(super) fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Drops expired sessions and holds (a hold dies with its session; one whose own TTL ran
    /// out first is recorded as a [`Lapse`]), then hands every key with a live ticket on.
    /// Every operation starts here, so, as at the real server, the first one after an expiry
    /// is what hands the key on.
    fn expire(&self, s: &mut ServiceState) {
        let now = self.clock.now();
        let keys: Vec<String> = s.locks.keys().cloned().collect();
        for key in &keys {
            for lapse in lapses(s, key, now) {
                s.lapsed.push(lapse);
            }
            let sessions = &s.sessions;
            let alive = |l: &SimLock| sessions.get(&l.session).is_some_and(|s| s.expires > now);
            let ended: Vec<u64> = s
                .holds(key)
                .iter()
                .filter(|l| l.end() <= now || !alive(l))
                .map(|l| l.token)
                .collect();
            s.end_holds(now, key, EventKind::Expired, |l| ended.contains(&l.token));
        }
        s.sessions.retain(|_, session| session.expires > now);
        let keys: Vec<String> = s.queues.keys().cloned().collect();
        for key in keys {
            self.settle(s, &key);
        }
    }

    /// The hand-off: drops `key`'s dead tickets, then grants every head ticket whose hold
    /// fits beside the key's holds, in order, stopping at the first that does not (a queued
    /// writer holds back the readers behind it). Records a hand-off that passed over an older
    /// live ticket.
    fn settle(&self, s: &mut ServiceState, key: &str) {
        let now = self.clock.now();
        let sessions = &s.sessions;
        let dead: Vec<u64> = s
            .queue(key)
            .iter()
            .filter(|t| !t.live(now, sessions))
            .map(|t| t.seq)
            .collect();
        s.drop_tickets(now, key, true, |t| dead.contains(&t.seq));
        while let Some(ticket) = self.next_in_line(s.queue(key)) {
            if !fits(s.holds(key), ticket.kind, &self.faults) {
                return;
            }
            self.hand_to(s, key, ticket, now);
        }
    }

    /// The ticket the hand-off looks at: the oldest (the newest with `lifo_queue` planted).
    fn next_in_line(&self, queue: &[SimTicket]) -> Option<SimTicket> {
        let chosen = if self.faults.lifo_queue {
            queue.last()
        } else {
            queue.first()
        };
        chosen.cloned()
    }

    /// Grants `key` to `ticket`, taking it out of the queue.
    fn hand_to(&self, s: &mut ServiceState, key: &str, ticket: SimTicket, now: Duration) {
        let oldest = s.queue(key).iter().map(|t| t.seq).min();
        if oldest != Some(ticket.seq) {
            s.out_of_order.push(format!(
                "{key} handed at {now:?} to ticket {} of {} while ticket {oldest:?} waited",
                ticket.seq, ticket.session
            ));
        }
        s.drop_tickets(now, key, false, |t| t.seq == ticket.seq);
        let lock = SimLock {
            session: ticket.session,
            token: 0,
            kind: ticket.kind,
            ttl: ticket.ttl,
            expires: now + ticket.ttl,
            claim_by: (now >= ticket.open_until).then_some(ticket.open_until + GRACE),
            value: ticket.value,
        };
        s.issue(now, key, lock, Some(ticket.seq), EventKind::HandedOff);
        self.handed.notify();
    }

    /// Hand-offs that passed over an older live ticket (always empty for a correct queue).
    pub fn out_of_order(&self) -> Vec<String> {
        self.state.lock().unwrap().out_of_order.clone()
    }

    /// A write of `token` to the demo fenced ledger of `key`: accepted (`true`) iff the token
    /// is at least the highest the ledger accepted for the key; else it is refused, as
    /// lock-server's 409 FENCED_OUT.
    pub fn fenced_ledger_append(&self, key: &str, token: u64) -> bool {
        self.state.lock().unwrap().ledgers.append_fenced(key, token)
    }

    /// A write of `token` to the demo unfenced ledger of `key`, which accepts every write:
    /// whether it was stale (exactly the writes the fenced ledger refuses).
    pub fn unfenced_ledger_append(&self, key: &str, token: u64) -> bool {
        self.state
            .lock()
            .unwrap()
            .ledgers
            .append_unfenced(key, token)
    }

    /// Every [`Lapse`] so far.
    pub fn lapses(&self) -> Vec<Lapse> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.lapsed.clone()
    }

    /// This server, keeping a [`History`] of every ticket and hold from now on (see
    /// [`SimService::history`]). Off by default: the history grows with every request, and a
    /// server that serves for long (the test kit, the dashboard's sweep, the flat-memory
    /// test's thousands of cycles) must not; the seed runner, whose invariants read it, turns
    /// it on.
    pub fn recording_history(self) -> Self {
        self.state
            .lock()
            .unwrap()
            .history
            .get_or_insert_with(History::default);
        self
    }

    /// Every ticket and hold so far, in order (after an expiry pass, so it is up to now);
    /// `None` unless the server was made [`SimService::recording_history`].
    pub fn history(&self) -> Option<History> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.history.clone()
    }

    /// The live exclusive holder of `key` right now: `(session, token)`.
    pub fn holder(&self, key: &str) -> Option<(String, u64)> {
        self.holds(key)
            .into_iter()
            .find(|h| h.kind == HoldKind::Exclusive)
            .map(|h| (h.session, h.token))
    }

    /// Every live hold of `key` right now, in token order.
    pub fn holds(&self, key: &str) -> Vec<LiveHold> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.holds(key)
            .iter()
            .map(|l| LiveHold {
                session: l.session.clone(),
                token: l.token,
                kind: l.kind,
            })
            .collect()
    }

    /// R1, as an operator would: ends every hold of `key` whoever holds it. Returns the
    /// lowest revoked token (R1's `revokedToken`).
    pub fn revoke(&self, key: &str) -> Option<u64> {
        self.revoke_holds(key, None).first().copied()
    }

    /// R1 with its body: every hold of `key`, or only the one with `fencingToken`. Returns
    /// the revoked tokens in order (R1's `revokedTokens`); the model answers no R1 body, so
    /// R1's wire result stays out of the SDK crate.
    pub fn revoke_request(&self, key: &str, request: &RevokeRequest) -> Vec<u64> {
        self.revoke_holds(key, request.fencing_token)
    }

    /// Ends `key`'s holds (only the one with `token`, if given); returns their tokens in
    /// order.
    fn revoke_holds(&self, key: &str, token: Option<u64>) -> Vec<u64> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        let revoked = s.end_holds(now, key, EventKind::Revoked, |l| {
            token.is_none_or(|t| t == l.token)
        });
        // Every change ends with the expiry pass, as every operation starts with it.
        self.expire(&mut s);
        revoked
    }

    fn open(&self, request: &OpenSessionRequest) -> SessionOpened {
        let mut s = self.state.lock().unwrap();
        s.next_session += 1;
        let id = format!("s{}", s.next_session);
        let ttl = Duration::from_millis(request.ttl_millis.unwrap_or(15_000));
        let expires = self.clock.now() + ttl;
        s.sessions.insert(
            id.clone(),
            SimSession {
                ttl,
                expires,
                answered: None,
            },
        );
        SessionOpened {
            holder_id: sim_holder_id(&id),
            session_id: id,
            ttl_millis: ttl.as_millis() as u64,
            heartbeat_millis: ttl.as_millis() as u64 / 3,
        }
    }

    fn heartbeat(
        &self,
        id: &str,
        since: Option<&str>,
    ) -> Result<HeartbeatResponse, TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        let Some(session) = s.sessions.get_mut(id) else {
            return Err(status(ErrorCode::SessionNotFound));
        };
        session.expires = now + session.ttl;
        let ttl_millis = session.ttl.as_millis() as u64;
        let mut holds = BTreeMap::new();
        for (key, locks) in s.locks.iter_mut() {
            for lock in locks.iter_mut().filter(|l| l.session == id) {
                lock.expires = now + lock.ttl;
                holds.insert(key.clone(), (lock.token, lock.kind.mode()));
            }
        }
        let session = s.sessions.get_mut(id).expect("found above");
        let last = session.answered.take();
        let answer = match last {
            Some((version, seen)) if since == Some(version.as_str()) => {
                let changes = hold_changes(&seen, &holds);
                if changes.is_empty() {
                    session.answered = Some((version.clone(), seen));
                    return Ok(HeartbeatResponse::unchanged(ttl_millis, version));
                }
                Some(changes)
            }
            _ => None,
        };
        s.last_version += 1;
        let version = format!("sim.{}", s.last_version);
        let session = s.sessions.get_mut(id).expect("found above");
        session.answered = Some((version.clone(), holds.clone()));
        Ok(match answer {
            Some(changes) => HeartbeatResponse::delta(ttl_millis, version, changes),
            None => {
                let locks = holds
                    .into_iter()
                    .map(|(key, (fencing_token, mode))| HeldLock {
                        key,
                        fencing_token,
                        mode,
                    })
                    .collect();
                HeartbeatResponse::full(ttl_millis, Some(version), locks)
            }
        })
    }

    fn close(&self, id: &str) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        let now = self.clock.now();
        let keys: Vec<String> = s.locks.keys().cloned().collect();
        for key in keys {
            s.end_holds(now, &key, EventKind::Released, |l| l.session == id);
        }
        let closed = s.sessions.remove(id);
        self.expire(&mut s);
        match closed {
            Some(_) => Ok(()),
            None => Err(status(ErrorCode::SessionNotFound)),
        }
    }

    /// One L4 attempt; `open_until`: the request waits in the queue until then.
    fn attempt(
        &self,
        key: &str,
        request: &AcquireRequest,
        open_until: Option<Duration>,
    ) -> Result<Attempt, TransportError> {
        let hold = lock_api::limits::validate_hold(request.mode, request.limit)
            .map_err(|message| error(ErrorBody::validation("limit", message)))?;
        if let Some(value) = &request.value {
            lock_api::limits::validate_value(value)
                .map_err(|message| error(ErrorBody::validation("value", message)))?;
        }
        let mut s = self.state.lock().unwrap();
        let now = self.clock.now();
        let id = &request.session_id;
        if let Some(open_until) = open_until {
            self.keep_ticket_open(&mut s, key, id, open_until);
        }
        self.expire(&mut s);
        if !s.sessions.contains_key(id) {
            return Err(status(ErrorCode::SessionNotFound));
        }
        if s.holds(key).iter().any(|l| &l.session == id) {
            return self.existing(&mut s, key, id, hold, request.value.as_deref());
        }
        if let HoldKind::Shared { limit } = hold {
            match limit_in_force(s.holds(key), s.queue(key)) {
                Some(in_force) if in_force != limit => return Err(limit_mismatch(in_force)),
                _ => {}
            }
        }
        let mut ttl = Duration::from_millis(request.ttl_millis.unwrap_or(10_000));
        if self.faults.fast_expiry {
            ttl /= 2;
        }
        let (holds, queue) = (s.holds(key), s.queue(key));
        if fits(holds, hold, &self.faults) && !held_back(queue, holds, id, hold, &self.faults) {
            // A session that waits in the queue is granted at its ticket's place.
            let place = queue.iter().find(|t| &t.session == id).map(|t| t.seq);
            s.drop_tickets(now, key, false, |t| &t.session == id);
            let lock = SimLock {
                session: id.clone(),
                token: 0,
                kind: hold,
                ttl,
                expires: now + ttl,
                claim_by: None,
                value: request.value.clone(),
            };
            let kind = EventKind::Granted;
            let mut answer = s.issue(now, key, lock, place, kind).grant(key);
            answer.ttl_millis = request.ttl_millis.unwrap_or(10_000);
            return Ok(Attempt::Granted(answer, now));
        }
        match open_until {
            None => Ok(Attempt::Contended),
            Some(open_until) => {
                let ticket = SimTicket {
                    session: id.clone(),
                    kind: hold,
                    ttl,
                    open_until,
                    seq: 0,
                    value: request.value.clone(),
                };
                self.join(&mut s, key, ticket)
            }
        }
    }

    /// A request of a session that has a ticket for `key` keeps it open until the request's
    /// end; a dead one goes (the request queues again at the end).
    fn keep_ticket_open(&self, s: &mut ServiceState, key: &str, id: &str, open_until: Duration) {
        let now = self.clock.now();
        s.drop_tickets(now, key, true, |t| {
            t.session == id && now >= t.open_until + GRACE
        });
        if let Some(queue) = s.queues.get_mut(key) {
            if let Some(ticket) = queue.iter_mut().find(|t| t.session == id) {
                ticket.open_until = ticket.open_until.max(open_until);
            }
        }
    }

    /// L4 of a session that holds `key`: its grant again, idempotently (a shared request
    /// under an exclusive hold gets the exclusive grant) — except an exclusive request under
    /// a shared hold: two readers upgrading would wait for each other forever. Claiming an
    /// unclaimed hand-off renews it from now. A `value` replaces the hold's (a `proclaimed`
    /// event when it changed); none keeps it.
    fn existing(
        &self,
        s: &mut ServiceState,
        key: &str,
        id: &str,
        hold: HoldKind,
        value: Option<&str>,
    ) -> Result<Attempt, TransportError> {
        let now = self.clock.now();
        let holds = s.locks.get_mut(key).expect("the session holds the key");
        let lock = holds.iter_mut().find(|l| l.session == id).unwrap();
        if lock.kind != HoldKind::Exclusive && hold == HoldKind::Exclusive {
            return Err(status(ErrorCode::UpgradeNotAllowed));
        }
        let lease_start = match lock.claim_by.take() {
            Some(_) => {
                lock.expires = now + lock.ttl;
                now
            }
            None => lock.expires - lock.ttl,
        };
        let answer = lock.grant(key);
        let proclaimed = match value {
            Some(value) if lock.value.as_deref() != Some(value) => {
                lock.value = Some(value.to_owned());
                Some(lock.clone())
            }
            _ => None,
        };
        if let Some(lock) = proclaimed {
            s.announce(now, key, EventKind::Proclaimed, Some(&lock));
        }
        s.drop_tickets(now, key, false, |t| t.session == id);
        Ok(Attempt::Granted(answer, lease_start))
    }

    /// Takes a ticket at the end of `key`'s queue unless the session has one; 429 when full.
    fn join(
        &self,
        s: &mut ServiceState,
        key: &str,
        mut ticket: SimTicket,
    ) -> Result<Attempt, TransportError> {
        let now = self.clock.now();
        if !s.queue(key).iter().any(|t| t.session == ticket.session) {
            if s.queue(key).len() >= QUEUE_CAP {
                return Err(status(ErrorCode::ContentionExceeded));
            }
            s.next_ticket += 1;
            ticket.seq = s.next_ticket;
            let step = Step::Queued {
                ticket: ticket.seq,
                session: ticket.session.clone(),
                kind: ticket.kind,
            };
            s.record(now, key, step);
            s.queues.entry(key.to_owned()).or_default().push(ticket);
            s.announce(now, key, EventKind::Waiters, None);
        }
        Ok(Attempt::Queued(next_change(s, key, now)))
    }

    /// L4 as the server runs it: one attempt, or, with `waitMillis` > 0, attempts until a
    /// hand-off grants the hold or the wait ends. `waitedMillis` is the lease's start minus
    /// the request's arrival.
    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
    ) -> Result<lock_api::LockGrant, TransportError> {
        let arrival = self.clock.now();
        let wait = Duration::from_millis(request.wait_millis.unwrap_or(0));
        let open_until = (wait > Duration::ZERO).then_some(arrival + wait);
        loop {
            let handed = self.handed.listen();
            let change = match self.attempt(key, request, open_until)? {
                Attempt::Granted(mut grant, lease_start) => {
                    grant.waited_millis = lease_start.saturating_sub(arrival).as_millis() as u64;
                    return Ok(grant);
                }
                Attempt::Contended => return Err(status(ErrorCode::LockContended)),
                Attempt::Queued(change) => change,
            };
            let left = (arrival + wait).saturating_sub(self.clock.now());
            if left.is_zero() {
                return Err(status(ErrorCode::LockContended));
            }
            let sleep = self.clock.sleep(left.min(change + EXPIRY_SLACK));
            futures::future::select(Box::pin(handed), sleep).await;
        }
    }

    /// L6: compare-and-delete of the one hold with the token (each shared holder releases
    /// its own), then the hand-off.
    fn release(&self, key: &str, request: &ReleaseRequest) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        if s.end_holds(now, key, EventKind::Released, |l| {
            l.token == request.fencing_token
        })
        .is_empty()
        {
            return Err(status(ErrorCode::LockLost));
        }
        self.settle(&mut s, key);
        Ok(())
    }

    fn status(&self, id: &str) -> Result<SessionStatus, TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        let session = s
            .sessions
            .get(id)
            .ok_or_else(|| status(ErrorCode::SessionNotFound))?;
        let locks = s
            .locks
            .iter()
            .flat_map(|(key, holds)| holds.iter().map(move |l| (key, l)))
            .filter(|(_, l)| l.session == id)
            .map(|(key, l)| LockStatus {
                key: key.clone(),
                fencing_token: l.token,
                remaining_millis: (l.end() - now).as_millis() as u64,
                mode: l.kind.mode(),
            })
            .collect();
        Ok(SessionStatus {
            session_id: id.to_owned(),
            remaining_millis: (session.expires - now).as_millis() as u64,
            locks,
        })
    }

    /// L7: the key now (see `ServiceState::state_of`).
    fn read(&self, key: &str) -> LockState {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.state_of(key, self.clock.now())
    }

    /// L9: replaces the value of the hold `(key, fencingToken)` of the session; 409
    /// LOCK_LOST when the session does not hold it now, 404 for an unknown session.
    fn proclaim(&self, key: &str, request: &ProclaimRequest) -> Result<(), TransportError> {
        lock_api::limits::validate_value(&request.value)
            .map_err(|message| error(ErrorBody::validation("value", message)))?;
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        if !s.sessions.contains_key(&request.session_id) {
            return Err(status(ErrorCode::SessionNotFound));
        }
        let lock = s.locks.get_mut(key).and_then(|holds| {
            holds
                .iter_mut()
                .find(|l| l.token == request.fencing_token && l.session == request.session_id)
        });
        let Some(lock) = lock else {
            return Err(status(ErrorCode::LockLost));
        };
        lock.value = Some(request.value.clone());
        let lock = lock.clone();
        s.announce(now, key, EventKind::Proclaimed, Some(&lock));
        Ok(())
    }

    /// L8's JSON long poll: a `snapshot` without `after`; the events after it, waiting up to
    /// `wait_millis` for the first; one `reset` when `after` cannot be served.
    async fn events(
        &self,
        key: &str,
        after: Option<&str>,
        wait_millis: u64,
    ) -> Result<EventBatch, TransportError> {
        lock_api::limits::validate_key(key)
            .map_err(|e| error(ErrorBody::validation("key", e.to_string())))?;
        let until = self.clock.now() + Duration::from_millis(wait_millis);
        loop {
            let appended = {
                let mut s = self.state.lock().unwrap();
                self.expire(&mut s);
                let now = self.clock.now();
                let at = now.as_millis() as u64;
                let state =
                    |s: &ServiceState, kind| s.feeds.state_event(kind, s.state_of(key, now), at);
                let Some(after) = after else {
                    let events = vec![state(&s, EventKind::Snapshot)];
                    return Ok(EventBatch { events });
                };
                match s.feeds.after(key, after) {
                    Poll::Reset => {
                        let events = vec![state(&s, EventKind::Reset)];
                        return Ok(EventBatch { events });
                    }
                    Poll::After(events) if !events.is_empty() || now >= until => {
                        return Ok(EventBatch { events });
                    }
                    Poll::After(_) => s.feeds.appended.listen(),
                }
            };
            // An expiry is an event too, and only an operation notices it: look again at the
            // key's next hold end, as a waiter in the queue does.
            let next = {
                let s = self.state.lock().unwrap();
                next_change(&s, key, self.clock.now()) + EXPIRY_SLACK
            };
            let left = until.saturating_sub(self.clock.now());
            let sleep = self.clock.sleep(left.min(next));
            futures::future::select(Box::pin(appended), sleep).await;
        }
    }

    /// A modelled restart of the server's feed: a new epoch, so every watcher's next poll gets
    /// a `reset` (the holds and sessions stay, as a restarted server's store keeps them).
    pub fn restart_feeds(&self) {
        let mut s = self.state.lock().unwrap();
        s.feeds.restart();
        // L2's versions restart too: every session's next L2 lists every lock.
        for session in s.sessions.values_mut() {
            session.answered = None;
        }
    }

    /// The server's answer to `request` (L4 may wait in its queue).
    pub(super) async fn answer(&self, request: Request<'_>) -> Answer {
        match request {
            Request::OpenSession(body) => Ok(Reply::Opened(self.open(body))),
            Request::Heartbeat(session, body) => self
                .heartbeat(named(session)?, body.since.as_deref())
                .map(Reply::Renewed),
            Request::CloseSession(session) => self.close(named(session)?).map(|()| Reply::Done),
            Request::Acquire(key, body) => self.acquire(key, body).await.map(Reply::Granted),
            Request::SessionStatus(session) => self.status(named(session)?).map(Reply::Status),
            Request::Release(key, body) => self.release(key, body).map(|()| Reply::Done),
            Request::ReadLock(key) => Ok(Reply::Lock(self.read(key))),
            Request::Events {
                key,
                after,
                wait_millis,
            } => self
                .events(key, after, wait_millis)
                .await
                .map(Reply::Events),
            Request::Proclaim(key, body) => self.proclaim(key, body).map(|()| Reply::Done),
        }
    }
}

/// The holds of `key` whose own TTL runs out by `now` while their session lives on past it.
fn lapses(s: &ServiceState, key: &str, now: Duration) -> Vec<Lapse> {
    s.holds(key)
        .iter()
        .filter(|l| l.end() <= now && l.claim_by.is_none())
        .filter(|l| {
            s.sessions
                .get(&l.session)
                .is_some_and(|s| s.expires > l.expires)
        })
        .map(|l| Lapse {
            key: key.to_owned(),
            session: l.session.clone(),
            token: l.token,
            at: l.expires,
        })
        .collect()
}

/// How long until something may let a waiter of `key` in: the first of its holds ends, or
/// the first ticket in the queue dies.
fn next_change(s: &ServiceState, key: &str, now: Duration) -> Duration {
    let hold_ends = s.holds(key).iter().map(SimLock::end);
    let ticket_deaths = s.queue(key).iter().map(|t| t.open_until + GRACE);
    hold_ends
        .chain(ticket_deaths)
        .min()
        .map_or(GRACE, |at| at.saturating_sub(now))
}

/// 409 LIMIT_MISMATCH naming the limit in force (absent for none).
fn limit_mismatch(in_force: Option<u32>) -> TransportError {
    let mut body = ErrorBody::new(ErrorCode::LimitMismatch, "sim");
    body.limit = in_force;
    error(body)
}

/// The simulated server's public name of a session (the real one is a keyed hash).
/// The session id of an L2, L3 or L5 call whose path's holder id is that session's, as the
/// server checks it: a mismatch is SESSION_NOT_FOUND, like an unknown session.
fn named(session: SessionRef<'_>) -> Result<&str, TransportError> {
    if sim_holder_id(session.id) == session.holder_id {
        Ok(session.id)
    } else {
        Err(status(ErrorCode::SessionNotFound))
    }
}

/// The simulated server's holder id of `session_id`: a function of it, as the real server's
/// keyed hash is, but readable in a failing seed's history.
pub(super) fn sim_holder_id(session_id: &str) -> String {
    format!("holder-of-{session_id}")
}
