//! [`SessionState`]: what one session's acquires, releases and background task share, and
//! every change to it — status, the session's deadline, the reentrancy registry, loss
//! reports, what grants and heartbeat answers do to deadlines.
//!
//! The bottom of a session. The acquire loop ([`crate::acquire`]) asks it for exactly two
//! things: [`SessionState::parts`], the client's seams and settings, and
//! [`SessionState::claim`], one key's turn for one acquire ([`Claim`]), through which
//! everything else goes. The background task ([`crate::heartbeat`]) and the public API
//! ([`crate::session`]) sit above it; it depends on none of them.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::{ErrorCode, HeartbeatRequest, HeartbeatResponse, LockGrant, ReleaseRequest};

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::error::{LockError, TransportError};
use crate::events::ClientEvent;
use crate::handle::{Lease, Leave, LockHandle, LostReason};
use crate::held_view::HeldView;
use crate::parts::ClientParts;
use crate::renewal;
use crate::signal::{Notify, Signal};
use crate::transport::{call, SessionRef, TransportExt};
use crate::turns::{Turn, Turns};

/// One server session's shared state (see the module docs).
pub(crate) struct SessionState {
    id: String,
    /// The session's public name (L1's `holderId`), what L7 shows for its locks.
    holder_id: String,
    parts: Arc<ClientParts>,
    heartbeat_every: Duration,
    inner: Mutex<Inner>,
    /// What the server lists at the last applied L2 answer, and its version (the next L2's
    /// `since`). Only the heartbeat loop writes it, one L2 at a time; locked before `inner`
    /// when both are.
    view: Mutex<HeldView>,
    turns: Arc<Turns>,
    /// Set when the session is closed or lost: wakes the background task and every waiter.
    ended: Signal,
    /// Notified whenever the heartbeat schedule or the set of deadlines may have changed
    /// (grant, renewal, release, loss): wakes the background loops to recompute.
    schedule: Notify,
}

struct Inner {
    status: Status,
    /// Conservative local deadline of the session itself.
    deadline: Duration,
    /// Send time of the last L2 (L1's at first): the schedule counts from it.
    last_heartbeat: Duration,
    /// How many handles had been registered when the last L2 was sent: only those are in its
    /// answer (see [`SessionState::next_heartbeat`]).
    last_heartbeat_seq: u64,
    /// Heartbeats failed in a row since the last answered one (the re-send's backoff grows
    /// with them).
    heartbeat_failures: u32,
    /// When the re-send of a failed heartbeat is due, until it is sent (see `crate::heartbeat`).
    heartbeat_retry_at: Option<Duration>,
    /// Next handle sequence number (see `LockHandle::seq`).
    next_seq: u64,
    /// Round-trip estimate of L4 (EWMA, weight 1/4 per sample).
    rtt: Duration,
    /// Keys this session may hold without a handle: an L4 went unanswered (timeout, network,
    /// dropped future) and its acquire ended without a grant. Value: (earliest send time of
    /// such an L4, when recorded). See [`SessionState::grant_anchor`].
    suspects: BTreeMap<String, (Duration, Duration)>,
    /// Per key, the highest token whose hold this session ended (released, whatever its L6's
    /// outcome) and when. Tokens rise per key, so an L4 answered with a token at or below it
    /// is a grant the session gave up and the server still holds (the L6 failed, or has not
    /// arrived): it is released again, never handed to a new caller. Dropped once a heartbeat
    /// sent after it no longer lists the grant and no caller has the key's turn, so the map
    /// does not grow with the acquires.
    finished: BTreeMap<String, (u64, Duration)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    Lost,
    Closed,
}

impl SessionState {
    /// The state of a session L1 opened with `ttl`, its request sent at `sent_at`.
    pub(crate) fn new(
        id: String,
        holder_id: String,
        ttl: Duration,
        heartbeat_every: Duration,
        sent_at: Duration,
        parts: Arc<ClientParts>,
    ) -> Self {
        SessionState {
            id,
            holder_id,
            heartbeat_every,
            inner: Mutex::new(Inner {
                status: Status::Open,
                deadline: (sent_at + ttl).saturating_sub(parts.config.margin(ttl)),
                last_heartbeat: sent_at,
                last_heartbeat_seq: 0,
                heartbeat_failures: 0,
                heartbeat_retry_at: None,
                next_seq: 0,
                rtt: parts.config.initial_rtt,
                suspects: BTreeMap::new(),
                finished: BTreeMap::new(),
            }),
            view: Mutex::default(),
            turns: Arc::default(),
            ended: Signal::new(),
            schedule: Notify::default(),
            parts,
        }
    }

    /// The server's session id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The session's holder id.
    pub(crate) fn holder_id(&self) -> &str {
        &self.holder_id
    }

    /// The session as L2, L3 and L5 name it.
    pub(crate) fn session_ref(&self) -> SessionRef<'_> {
        SessionRef {
            id: &self.id,
            holder_id: &self.holder_id,
        }
    }

    /// The client's seams and settings.
    pub(crate) fn parts(&self) -> &ClientParts {
        &self.parts
    }

    /// The client's seams and settings, shared (for what outlives a call: a watch).
    pub(crate) fn shared_parts(&self) -> Arc<ClientParts> {
        self.parts.clone()
    }

    fn status(&self) -> Status {
        self.inner.lock().unwrap().status
    }

    pub(crate) fn is_open(&self) -> bool {
        self.status() == Status::Open
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.status() == Status::Closed
    }

    /// The session's conservative local deadline.
    pub(crate) fn deadline(&self) -> Duration {
        self.inner.lock().unwrap().deadline
    }

    /// `Ok` while the session is open; the error a waiter should fail with otherwise. A
    /// session whose deadline passed is lost now, even if the background task has not run yet
    /// (e.g. the process was paused), so nothing is sent on its behalf.
    pub(crate) fn ensure_open(&self) -> Result<(), LockError> {
        if self.is_open() && self.parts.clock.now() >= self.deadline() {
            self.mark_lost();
        }
        match self.status() {
            Status::Open => Ok(()),
            Status::Lost => Err(LockError::SessionLost),
            Status::Closed => Err(LockError::Closed),
        }
    }

    /// Completes once the session is closed or lost.
    pub(crate) fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        self.ended.wait()
    }

    /// Completes at the first change of the schedule after this call (see [`Notify`]).
    pub(crate) fn rescheduled(&self) -> impl Future<Output = ()> + Send + 'static {
        self.schedule.listen()
    }

    /// The session is gone (404 or deadline passed): every handle is reported lost, waiters
    /// fail at once, `lock_session_lost` is counted, nothing more is sent.
    pub(crate) fn mark_lost(&self) {
        self.end(Status::Lost);
    }

    /// The owner closes the session: every handle ends. False if it had already ended.
    pub(crate) fn mark_closed(&self) -> bool {
        self.end(Status::Closed)
    }

    /// Moves the session to `to` if it is open: reports every handle lost, wakes everyone.
    /// Returns false when it had already ended.
    fn end(&self, to: Status) -> bool {
        {
            let mut inner = self.inner.lock().unwrap();
            if inner.status != Status::Open {
                return false;
            }
            inner.status = to;
        }
        let now = self.parts.clock.now();
        for handle in self.turns.clear() {
            let reason = match to {
                Status::Closed => LostReason::SessionClosed,
                // A handle whose own deadline passed was lost at it, whoever reports it.
                _ if now >= handle.deadline() => LostReason::DeadlinePassed,
                _ => LostReason::SessionLost,
            };
            self.report_lost(&handle, reason);
        }
        if to == Status::Lost {
            self.parts.sessions_lost.increment();
            self.parts.emit(ClientEvent::SessionLost {
                holder_id: self.holder_id.clone(),
            });
        }
        self.ended.set();
        true
    }

    /// Reports `handle` lost for `reason` (once; a `lock_lost` event unless the owner ended
    /// it) and wakes the schedule, which no longer counts it.
    fn report_lost(&self, handle: &LockHandle, reason: LostReason) {
        handle.report_lost(reason, || {
            if !reason.by_owner() {
                self.parts.emit(ClientEvent::Lost {
                    key: handle.key().to_owned(),
                    fencing_token: handle.fencing_token(),
                    reason,
                });
            }
        });
        self.schedule.notify();
    }

    /// Maps a session-surface answer; 404 marks the session lost.
    pub(crate) fn check_session_answer<T>(
        &self,
        result: Result<T, TransportError>,
    ) -> Result<T, LockError> {
        result.map_err(|e| {
            let err = LockError::from_transport(e, "");
            if err == LockError::SessionLost {
                self.mark_lost();
            }
            err
        })
    }

    // --- acquire -----------------------------------------------------------------------

    /// `key`'s turn for one acquire ([`crate::turns`]): at once if no other caller of this
    /// session has the key, else once every caller before it is done with it. `Ok(None)`
    /// when `deadline` (the acquire's budget) comes first; fails if the session ends first.
    pub(crate) async fn claim<'a>(
        &'a self,
        key: &'a str,
        deadline: Duration,
    ) -> Result<Option<Claim<'a>>, LockError> {
        self.ensure_open()?;
        // A free key is the common case: take it without arming a budget timer.
        let turn = match self.turns.try_take(key) {
            Some(turn) => turn,
            None => match self.wait_for_turn(key, deadline).await? {
                Some(turn) => turn,
                None => return Ok(None),
            },
        };
        self.ensure_open()?;
        Ok(Some(Claim {
            session: self,
            key,
            turn: Some(turn),
            unanswered_since: None,
        }))
    }

    /// Waits for `key`'s turn behind the callers before it, until `deadline` (`None`) or the
    /// session's end (its error).
    async fn wait_for_turn(
        &self,
        key: &str,
        deadline: Duration,
    ) -> Result<Option<Turn>, LockError> {
        let clock = &self.parts.clock;
        let budget = clock.sleep(deadline.saturating_sub(clock.now()));
        let ended = Box::pin(self.ended());
        match select(Box::pin(self.turns.wait(key)), select(budget, ended)).await {
            Either::Left((turn, _)) => Ok(Some(turn)),
            Either::Right((Either::Left(_), _)) => Ok(None),
            Either::Right((Either::Right(_), _)) => Err(self.end_error()),
        }
    }

    /// The error for a caller whose session ended under it.
    fn end_error(&self) -> LockError {
        self.ensure_open().err().unwrap_or(LockError::SessionLost)
    }

    /// Folds one measured L4 round trip into the estimate.
    fn observe_rtt(&self, sample: Duration) {
        let mut inner = self.inner.lock().unwrap();
        inner.rtt = (inner.rtt * 3 + sample) / 4;
    }

    /// A lock's conservative deadline for a request sent at `sent_at`: its own, capped by
    /// the session's.
    fn lock_deadline(&self, sent_at: Duration, ttl: Duration) -> Duration {
        (sent_at + ttl)
            .saturating_sub(self.parts.config.margin(ttl))
            .min(self.deadline())
    }

    /// Records that `key` may have been granted by an L4 sent at `since` whose answer never
    /// arrived, although the acquire (or release) ended without a handle.
    pub(crate) fn record_suspect(&self, key: &str, since: Duration) {
        let now = self.parts.clock.now();
        let mut inner = self.inner.lock().unwrap();
        let entry = inner.suspects.entry(key.to_owned()).or_insert((since, now));
        entry.0 = entry.0.min(since);
        entry.1 = now;
    }

    /// The send time a fresh grant's deadline must count from.
    ///
    /// The server answers an L4 by a session that already holds the key with the existing
    /// grant and renews it from that L4's arrival (C3), so counting from this attempt's send
    /// would be right against this server. The deadline still counts from the earliest
    /// unanswered L4 for this key (in this acquire: `in_loop`, or in an earlier one: a
    /// suspect): that is never later, and it stays safe against a server that answers a
    /// repeated L4 without renewing (an older release during a rolling upgrade).
    fn grant_anchor(&self, key: &str, sent_at: Duration, in_loop: Option<Duration>) -> Duration {
        let mut inner = self.inner.lock().unwrap();
        let suspect = inner.suspects.remove(key).map(|(since, _)| since);
        [Some(sent_at), in_loop, suspect]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(sent_at)
    }

    /// Turns a grant into a registered handle and wakes the schedule: the new lock may be due
    /// for renewal before the next heartbeat, and its deadline may be the earliest. A grant
    /// whose deadline passed before its answer came (it counts from an earlier unanswered L4)
    /// is reported lost at once.
    fn register(&self, turn: Turn, grant: LockGrant, anchor: Duration) -> LockHandle {
        let ttl = Duration::from_millis(grant.ttl_millis);
        let lease = Lease {
            seq: {
                let mut inner = self.inner.lock().unwrap();
                inner.next_seq += 1;
                inner.next_seq
            },
            anchor,
            deadline: self.lock_deadline(anchor, ttl),
        };
        let handle = LockHandle::new(&grant, lease, self.parts.clock.clone());
        turn.hold(handle.clone());
        if self.parts.clock.now() >= handle.deadline() {
            self.report_lost(&handle, LostReason::DeadlinePassed);
        }
        self.schedule.notify();
        handle
    }

    // --- release -----------------------------------------------------------------------

    /// Gives back one hold of `handle`. At the outermost hold the handle ends (`Released`),
    /// no heartbeat renews it any more, its token counts as finished, and the caller gets the
    /// key's turn, to hold until its L6 is answered; `None` when nothing is to be sent (an
    /// inner hold, or a handle no longer registered).
    pub(crate) fn release_hold(&self, handle: &LockHandle) -> Option<Turn> {
        if handle.leave() != Leave::Last {
            return None;
        }
        let turn = self.turns.take_held(handle)?;
        self.finish(handle.key(), handle.fencing_token());
        self.report_lost(handle, LostReason::Released);
        Some(turn)
    }

    /// Records that this session ended its hold of `(key, token)` (see `Inner::finished`).
    fn finish(&self, key: &str, token: u64) {
        let now = self.parts.clock.now();
        let mut inner = self.inner.lock().unwrap();
        let entry = inner.finished.entry(key.to_owned()).or_insert((token, now));
        *entry = (entry.0.max(token), now);
    }

    /// Whether `grant` is one this session already ended (see `Inner::finished`).
    fn is_finished(&self, key: &str, token: u64) -> bool {
        let inner = self.inner.lock().unwrap();
        inner.finished.get(key).is_some_and(|&(t, _)| token <= t)
    }

    /// L6 for `(key, token)`, timed out after `hop` on `clock` (the caller's: foreground
    /// for a user's release, background for the heartbeat's orphans); 409 LOCK_LOST is benign.
    pub(crate) async fn send_release(
        &self,
        key: &str,
        token: u64,
        clock: &dyn Clock,
        hop: Duration,
    ) -> Result<(), LockError> {
        let request = ReleaseRequest {
            fencing_token: token,
            session_id: Some(self.id.clone()),
        };
        let result = call(clock, hop, self.parts.transport.release(key, &request, hop)).await;
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::LockLost) => Ok(()),
            Err(e) => Err(LockError::from_transport(e, key)),
        }
    }

    // --- heartbeats and deadlines ------------------------------------------------------

    /// When the next L2 is due (see [`crate::renewal`]): the session's period after the
    /// last one, or a held lock's renewal period after its last renewal (or after the last
    /// L2, if that one failed), whichever comes first.
    ///
    /// Only a lock registered before the last L2 was sent counts from that L2: one granted
    /// after it is not in its answer, so that L2 renewed nothing the lock's deadline counts
    /// from (an L2 sent while the L4 was on its way and answered before the grant arrived:
    /// the lock's deadline counts from the L4's send, before the L2, and its renewal must
    /// too, or it comes due after the deadline).
    pub(crate) fn next_heartbeat(&self) -> Duration {
        let (last, last_seq, retry) = {
            let inner = self.inner.lock().unwrap();
            let (last, seq) = (inner.last_heartbeat, inner.last_heartbeat_seq);
            (last, seq, inner.heartbeat_retry_at)
        };
        let due = self
            .turns
            .handles()
            .iter()
            .filter(|h| h.lost_reason().is_none())
            .map(|h| {
                let margin = self.parts().config.margin(h.ttl());
                let from = if h.seq() > last_seq {
                    h.anchor()
                } else {
                    h.anchor().max(last)
                };
                renewal::renew_by(from, h.ttl(), margin)
            })
            .fold(last + self.heartbeat_every, Duration::min);
        retry.map_or(due, |at| due.min(at))
    }

    /// An L2 failed (no answer, or an answer other than 200 and 404) at `now`: the next one
    /// is due after a full-jitter delay that grows with the failures in a row.
    pub(crate) fn heartbeat_failed(&self, now: Duration) {
        let backoff = Backoff::new(renewal::RETRY_BASE, renewal::RETRY_CAP);
        let mut inner = self.inner.lock().unwrap();
        let delay = backoff.delay(inner.heartbeat_failures, &mut self.parts.rng.rng());
        inner.heartbeat_failures += 1;
        inner.heartbeat_retry_at = Some(now + delay);
        drop(inner);
        self.schedule.notify();
    }

    /// An L2 is being sent at `now`: the schedule counts from it. Returns the registration
    /// count its answer judges (handles registered later are not in it).
    pub(crate) fn heartbeat_sent(&self, now: Duration) -> u64 {
        let mut inner = self.inner.lock().unwrap();
        inner.last_heartbeat = now;
        inner.last_heartbeat_seq = inner.next_seq;
        // The re-send is on its way: its time must not stay the next one due, or this very
        // call's timeout (never past the next due heartbeat) would be zero.
        inner.heartbeat_retry_at = None;
        inner.next_seq
    }

    /// The next L2's body: `since` the version of the last answer applied.
    pub(crate) fn heartbeat_request(&self) -> HeartbeatRequest {
        self.view.lock().unwrap().request()
    }

    /// Applies an L2 answer to a heartbeat `sent` at `sent_at` when `seq_at_send` handles
    /// had been registered: the answer first brings the server's list up to date (a full
    /// list, the changes since `sent`'s version, or nothing: see [`HeldView`]); then the
    /// session and every listed lock are renewed from `sent_at`, every judged lock it does
    /// not list is lost — the same verdicts whatever the answer's shape.
    pub(crate) fn apply_heartbeat(
        &self,
        sent_at: Duration,
        seq_at_send: u64,
        sent: &HeartbeatRequest,
        answer: &HeartbeatResponse,
    ) {
        let ttl = Duration::from_millis(answer.ttl_millis);
        let mut view = self.view.lock().unwrap();
        if !view.apply(sent, answer) {
            // An answer that does not fit the view (a server answering changes to a version
            // it was not sent): it renewed the session, but says nothing exact about the
            // locks. The next L2, due at once, asks for every lock.
            let mut inner = self.inner.lock().unwrap();
            let renewed = (sent_at + ttl).saturating_sub(self.parts.config.margin(ttl));
            inner.deadline = inner.deadline.max(renewed);
            inner.heartbeat_retry_at = Some(self.parts.clock.now());
            drop(inner);
            self.schedule.notify();
            return;
        }
        {
            let mut inner = self.inner.lock().unwrap();
            inner.heartbeat_failures = 0;
            let renewed = (sent_at + ttl).saturating_sub(self.parts.config.margin(ttl));
            inner.deadline = inner.deadline.max(renewed);
            // A suspect recorded before this heartbeat was sent and not listed by it is not
            // held (the server answered after the suspect L4 had timed out).
            inner
                .suspects
                .retain(|key, (_, recorded)| *recorded >= sent_at || view.get(key).is_some());
            // Likewise a finished grant the server no longer holds: later grants of its key
            // carry higher tokens. Unless a caller has the key's turn: an acquire's L4 sent
            // before this answer came may have reached the server before this L2 did, while
            // the grant was still held (a retried L6 may end it after), and its answer then
            // carries the grant's token still.
            inner.finished.retain(|key, (token, recorded)| {
                *recorded >= sent_at
                    || self.turns.is_taken(key)
                    || view.get(key).is_some_and(|l| l.fencing_token <= *token)
            });
        }
        let now = self.parts.clock.now();
        for handle in self.turns.handles() {
            let listed = view
                .get(handle.key())
                .is_some_and(|l| l.fencing_token == handle.fencing_token());
            if handle.seq() > seq_at_send {
                // Registered after this heartbeat was sent: its lock list may predate the
                // grant, so a lock it does not list is not lost. One it lists the server
                // renewed when the L2 arrived, after `sent_at` (a grant that waited in the
                // queue counts from before it). Either way the session it renewed lifts the
                // session's cap on the lock's deadline (a late cap would lose the lock before
                // its own renewal is due).
                let anchor = if listed {
                    sent_at.max(handle.anchor())
                } else {
                    handle.anchor()
                };
                handle.renew(anchor, self.lock_deadline(anchor, handle.ttl()));
                continue;
            }
            if listed && handle.renew(sent_at, self.lock_deadline(sent_at, handle.ttl())) {
                continue;
            }
            let reason = if now >= handle.deadline() {
                LostReason::DeadlinePassed
            } else {
                LostReason::NotInHeartbeat
            };
            self.report_lost(&handle, reason);
        }
        self.schedule.notify();
    }

    /// Claims the turn of `lock`'s key for an orphan release if no caller of this session
    /// has it (no handle tracks the grant and no acquire or release of the key is in flight):
    /// an acquire that timed out or was dropped after the server granted, or a release whose
    /// L6 failed. A grant released since the heartbeat's snapshot gets a needless L6, which
    /// the server refuses harmlessly (compare-and-delete on the token).
    /// Returns each such `(key, token)` of the server's list with the key's turn.
    pub(crate) fn claim_orphans(&self) -> Vec<(String, u64, Turn)> {
        let view = self.view.lock().unwrap();
        view.holds()
            .filter_map(|lock| {
                let turn = self.turns.try_take(&lock.key)?;
                Some((lock.key.clone(), lock.fencing_token, turn))
            })
            .collect()
    }

    /// An orphan of `key` was released: it is no longer a suspect.
    pub(crate) fn orphan_released(&self, key: &str) {
        self.inner.lock().unwrap().suspects.remove(key);
    }

    /// Reports every deadline that has passed by now: each unreported handle whose deadline
    /// passed is lost, then the session if its own did.
    pub(crate) fn expire_passed(&self) {
        let now = self.parts.clock.now();
        for handle in self.turns.handles() {
            if handle.lost_reason().is_none() && now >= handle.deadline() {
                self.report_lost(&handle, LostReason::DeadlinePassed);
            }
        }
        if self.is_open() && now >= self.deadline() {
            self.mark_lost();
        }
    }

    /// The earliest deadline still to be kept: the session's or an unreported handle's.
    pub(crate) fn next_deadline(&self) -> Duration {
        self.turns
            .handles()
            .iter()
            .filter(|h| h.lost_reason().is_none())
            .map(LockHandle::deadline)
            .fold(self.deadline(), Duration::min)
    }
}

/// Dropping every clone of a session stops its heartbeats (the server then expires it): its
/// handles can no longer be kept, so they end here, as by a close.
impl Drop for SessionState {
    fn drop(&mut self) {
        for handle in self.turns.clear() {
            handle.report_lost(LostReason::SessionClosed, || {});
        }
    }
}

/// One key's turn in a session for one acquire, and the earliest of its L4s that got no
/// answer yet. Everything the acquire loop asks of its session goes through it. Dropped
/// without a grant after an unanswered L4 (the acquire failed, gave up, or its future was
/// dropped), it leaves the key as a suspect, so a later grant of the key counts its deadline
/// from that send; and it passes the key's turn on.
pub(crate) struct Claim<'a> {
    session: &'a SessionState,
    key: &'a str,
    /// Taken by [`Claim::grant`].
    turn: Option<Turn>,
    unanswered_since: Option<Duration>,
}

impl<'a> Claim<'a> {
    /// The claiming session's holder id (what events name it by: never its session id).
    pub(crate) fn holder_id(&self) -> &'a str {
        self.session.holder_id()
    }

    /// The client's seams and settings.
    pub(crate) fn parts(&self) -> &'a ClientParts {
        self.session.parts()
    }

    /// L6 of this key's grant `token` (one the session already ended, see
    /// [`Claim::is_finished`]).
    pub(crate) async fn release(
        &self,
        token: u64,
        clock: &dyn Clock,
        hop: Duration,
    ) -> Result<(), LockError> {
        self.session.send_release(self.key, token, clock, hop).await
    }

    /// The session's id, for the L4 body.
    pub(crate) fn session_id(&self) -> &str {
        &self.session.id
    }

    /// `Ok` while the session is open (see [`SessionState::ensure_open`]).
    pub(crate) fn check_open(&self) -> Result<(), LockError> {
        self.session.ensure_open()
    }

    /// Completes once the session ends; [`Claim::end_error`] then says how.
    pub(crate) fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        self.session.ended()
    }

    /// The error for a session that ended under the acquire.
    pub(crate) fn end_error(&self) -> LockError {
        self.session.end_error()
    }

    /// The session's L4 round-trip estimate.
    pub(crate) fn rtt(&self) -> Duration {
        self.session.inner.lock().unwrap().rtt
    }

    /// Folds a measured L4 round trip into the session's estimate.
    pub(crate) fn observe_rtt(&self, sample: Duration) {
        self.session.observe_rtt(sample);
    }

    /// An L4 goes out at `at`; returns the send time of the earliest earlier one still
    /// unanswered, if any.
    pub(crate) fn sending(&mut self, at: Duration) -> Option<Duration> {
        let earlier = self.unanswered_since;
        self.unanswered_since = Some(earlier.unwrap_or(at));
        earlier
    }

    /// The server refused with 409/429: the key is held by someone else, so no earlier L4 of
    /// ours holds it.
    pub(crate) fn held_elsewhere(&mut self) {
        self.unanswered_since = None;
    }

    /// L4 answered 404: the session is gone.
    pub(crate) fn session_gone(&self) {
        self.session.mark_lost();
    }

    /// Registers `grant`, answered to an L4 sent at `sent_at` (`earlier`: the earliest
    /// unanswered one before it), as the key's handle. The handle names the key as asked,
    /// whatever spelling the server echoed.
    ///
    /// The server's lease began `waitedMillis` after the request arrived (the request waited
    /// in the key's queue), so the deadline counts from the anchor plus that wait: still no
    /// later than the server's lease start, since the request arrived after it was sent (and
    /// after every earlier send). It never counts from later than the answer's arrival.
    pub(crate) fn grant(
        mut self,
        grant: LockGrant,
        sent_at: Duration,
        earlier: Option<Duration>,
    ) -> LockHandle {
        let turn = self.turn.take().expect("a claim grants once");
        let waited = Duration::from_millis(grant.waited_millis);
        let anchor = (self.session.grant_anchor(self.key, sent_at, earlier) + waited)
            .min(self.session.parts.clock.now());
        let grant = LockGrant {
            key: self.key.to_owned(),
            session_id: self.session.id.clone(),
            ..grant
        };
        self.session.register(turn, grant, anchor)
    }

    /// Whether `grant` is one this session already ended: the server still holds it (an L6
    /// failed or has not arrived) and answered this L4 with it. It must not be handed out.
    pub(crate) fn is_finished(&self, grant: &LockGrant) -> bool {
        self.session.is_finished(self.key, grant.fencing_token)
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let (Some(since), Some(_)) = (self.unanswered_since, &self.turn) {
            self.session.record_suspect(self.key, since);
        }
    }
}
