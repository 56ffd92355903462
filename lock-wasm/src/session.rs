//! [`LockClient`] (the seams plus configuration) and [`LockClientSession`] (one server
//! session: its heartbeat scheduler, conservative deadlines, reentrancy registry, release
//! and close).
//!
//! Deadlines: every lock and the session itself are valid locally until
//! `sent_at + ttl - safety_margin`, where `sent_at` is when the granting or renewing request
//! was sent. The session's background task runs two loops:
//! - the heartbeat loop sends L2 when [`crate::schedule`] says it is due: at a third of the
//!   shortest TTL among the session and its held locks, recomputed (and woken through the
//!   session's `schedule` notification) on every grant, renewal and release. A heartbeat
//!   never outlives the session deadline;
//! - the deadline watchdog sleeps on the client's clock until the earliest deadline of the
//!   session and its unreported handles, and at that instant reports each passed one: a
//!   handle is reported lost (`lock_lost`, reason `deadlinePassed`, its `lost()` future
//!   completes), and a session whose own deadline passed is lost: every handle is reported
//!   lost, waiters fail at once with `SessionLost`, `lock_session_lost` is counted, and the
//!   session sends nothing more. L2 answering 404 loses the session the same way.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::limits::validate_ttl;
use lock_api::limits::DEFAULT_LOCK_TTL_MILLIS;
use lock_api::{ErrorCode, HeartbeatResponse, OpenSessionRequest, ReleaseRequest, SessionStatus};

use crate::backoff::RngSource;
use crate::clock::{timeout, BackgroundClock, Clock};
use crate::error::{LockError, TransportError};
use crate::events::{ClientEvent, EventSink, NoEvents, SessionLostCounter};
use crate::handle::{LockHandle, LostReason};
use crate::policy::AcquirePolicy;
use crate::reentrancy::{Holds, InFlightGuard, ReleaseStep};
use crate::schedule;
use crate::spawn::{Notify, Signal, Spawner};
use crate::transport::Transport;

/// Per-request timeout of every call (ASSUMPTION: 2 s, `lock.client.request-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// First round-trip estimate before any L4 was measured (ASSUMPTION: 50 ms).
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(50);
/// Fixed floor delay after 503 NOT_LEADER (ASSUMPTION: 100 ms).
pub const DEFAULT_NOT_LEADER_DELAY: Duration = Duration::from_millis(100);
/// Smallest safety margin (ASSUMPTION, DESIGN §6: 500 ms or ttl/10, whichever is larger).
pub const MIN_SAFETY_MARGIN: Duration = Duration::from_millis(500);

/// Client settings beyond the seams. All have defaults (ASSUMPTIONS, see the constants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Session TTL asked for in L1; `None` takes the server default (15 s).
    pub session_ttl: Option<Duration>,
    /// Owner label sent in L1.
    pub owner: Option<String>,
    /// Timeout of every request (L4 adds its `waitMillis`).
    pub request_timeout: Duration,
    /// Fixed safety margin; `None` uses [`safety_margin`]'s rule.
    pub safety_margin: Option<Duration>,
    /// Backend label of `lock_session_lost{backend}` (e.g. `sqlite`, `etcd`).
    pub backend: String,
    /// Round-trip estimate until L4 calls have been measured.
    pub initial_rtt: Duration,
    /// Floor delay after 503.
    pub not_leader_delay: Duration,
    /// Lock TTL of [`LockClientSession::acquire_default`].
    pub default_lock_ttl: Duration,
}

impl ClientConfig {
    /// The safety margin these settings give a TTL: the fixed one, or [`safety_margin`].
    pub fn margin(&self, ttl: Duration) -> Duration {
        self.safety_margin.unwrap_or_else(|| safety_margin(ttl))
    }

    /// The shortest lock TTL heartbeats can keep alive under this margin (see
    /// [`crate::schedule`]; 300 ms with the default margin); `None` if none can.
    pub fn shortest_lock_ttl(&self) -> Option<Duration> {
        schedule::shortest_lock_ttl(|ttl| self.margin(ttl))
    }

    /// Checks a lock TTL: the contract's range, then the renewal rule. VALIDATION_FAILED
    /// names `field` and, for a TTL too short to renew, the shortest one that works.
    pub fn check_lock_ttl(&self, ttl: Duration, field: &str) -> Result<(), LockError> {
        let ms = crate::backoff::millis(ttl);
        validate_ttl(ms).map_err(|m| LockError::validation(field, m))?;
        match self.shortest_lock_ttl() {
            Some(shortest) if ttl >= shortest => Ok(()),
            Some(shortest) => Err(LockError::validation(
                field,
                format!(
                    "must be at least {} ms, got {ms}: a shorter lock's local deadline comes \
                     too soon after its scheduled renewal for the renewal to be answered",
                    crate::backoff::millis(shortest)
                ),
            )),
            None => Err(LockError::validation(
                field,
                "the configured safety margin leaves no lock TTL time to be renewed",
            )),
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            session_ttl: None,
            owner: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            safety_margin: None,
            backend: "unknown".into(),
            initial_rtt: DEFAULT_INITIAL_RTT,
            not_leader_delay: DEFAULT_NOT_LEADER_DELAY,
            default_lock_ttl: Duration::from_millis(DEFAULT_LOCK_TTL_MILLIS),
        }
    }
}

/// The default safety margin for a TTL: `max(500 ms, ttl/10)` (DESIGN §6), but never more
/// than `ttl/2` (ASSUMPTION: otherwise a TTL ≤ 500 ms would yield handles born lost).
pub fn safety_margin(ttl: Duration) -> Duration {
    MIN_SAFETY_MARGIN.max(ttl / 10).min(ttl / 2)
}

/// Entry point: the seams and settings shared by every session it opens.
#[derive(Clone)]
pub struct LockClient {
    pub(crate) parts: Arc<ClientParts>,
}

pub(crate) struct ClientParts {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) spawner: Arc<dyn Spawner>,
    pub(crate) rng: Arc<dyn RngSource>,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) config: ClientConfig,
    pub(crate) sessions_lost: Arc<SessionLostCounter>,
}

impl LockClient {
    /// A client over the given seams, with default settings and no event sink.
    pub fn new(
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        spawner: Arc<dyn Spawner>,
        rng: Arc<dyn RngSource>,
    ) -> Self {
        LockClient {
            parts: Arc::new(ClientParts {
                transport,
                clock,
                spawner,
                rng,
                events: Arc::new(NoEvents),
                config: ClientConfig::default(),
                sessions_lost: Arc::default(),
            }),
        }
    }

    /// Replaces the event sink (logs, JS `onEvent`).
    pub fn with_events(self, events: Arc<dyn EventSink>) -> Self {
        self.map_parts(|p| p.events = events)
    }

    /// Replaces the settings.
    pub fn with_config(self, config: ClientConfig) -> Self {
        self.map_parts(|p| p.config = config)
    }

    fn map_parts(self, f: impl FnOnce(&mut ClientParts)) -> Self {
        let p = &self.parts;
        let mut parts = ClientParts {
            transport: p.transport.clone(),
            clock: p.clock.clone(),
            spawner: p.spawner.clone(),
            rng: p.rng.clone(),
            events: p.events.clone(),
            config: p.config.clone(),
            sessions_lost: p.sessions_lost.clone(),
        };
        f(&mut parts);
        LockClient {
            parts: Arc::new(parts),
        }
    }

    /// The settings in use.
    pub fn config(&self) -> &ClientConfig {
        &self.parts.config
    }

    /// `lock_session_lost{backend}`: sessions of this client lost so far. The SDK's only
    /// metric; label it with [`ClientConfig::backend`] when exporting.
    pub fn session_lost_count(&self) -> u64 {
        self.parts.sessions_lost.get()
    }

    /// L1: opens a session and starts its heartbeat task.
    pub async fn open_session(&self) -> Result<LockClientSession, LockError> {
        let parts = self.parts.clone();
        let request = OpenSessionRequest {
            ttl_millis: parts.config.session_ttl.map(crate::backoff::millis),
            owner: parts.config.owner.clone(),
        };
        let hop = parts.config.request_timeout;
        let sent_at = parts.clock.now();
        let opened = call(
            &*parts.clock,
            hop,
            parts.transport.open_session(&request, hop),
        )
        .await
        .map_err(|e| LockError::from_transport(e, ""))?;
        let ttl = Duration::from_millis(opened.ttl_millis);
        let shared = Arc::new(SessionShared {
            id: opened.session_id,
            heartbeat_every: Duration::from_millis(opened.heartbeat_millis.max(1)),
            state: Mutex::new(SessionState {
                status: Status::Open,
                deadline: (sent_at + ttl).saturating_sub(parts.margin(ttl)),
                last_heartbeat: sent_at,
                next_seq: 0,
                rtt: parts.config.initial_rtt,
                suspects: BTreeMap::new(),
                released: BTreeMap::new(),
            }),
            holds: Arc::default(),
            ended: Signal::new(),
            schedule: Notify::default(),
            parts,
        });
        // The background task waits on a background view of the clock: in Node its timers
        // are unref'd, so an open session never keeps a process alive by itself.
        let clock: Arc<dyn Clock> = Arc::new(BackgroundClock(shared.parts.clock.clone()));
        let heartbeats = heartbeat_loop(Arc::downgrade(&shared), clock.clone());
        let deadlines = deadline_watch(Arc::downgrade(&shared), clock);
        // Both loops end when the session does; whichever notices first ends the task.
        let task = async move {
            select(Box::pin(heartbeats), Box::pin(deadlines)).await;
        };
        shared.parts.spawner.spawn(Box::pin(task));
        Ok(LockClientSession { shared })
    }
}

impl ClientParts {
    pub(crate) fn margin(&self, ttl: Duration) -> Duration {
        self.config.margin(ttl)
    }
}

/// One server session. Cheap to clone; clones share the session. Dropping every clone
/// without [`LockClientSession::close`] stops the heartbeat and lets the server expire it.
#[derive(Clone)]
pub struct LockClientSession {
    pub(crate) shared: Arc<SessionShared>,
}

pub(crate) struct SessionShared {
    pub(crate) id: String,
    pub(crate) parts: Arc<ClientParts>,
    heartbeat_every: Duration,
    state: Mutex<SessionState>,
    pub(crate) holds: Arc<Holds>,
    /// Set when the session is closed or lost: wakes the heartbeat task and every waiter.
    pub(crate) ended: Signal,
    /// Notified whenever the heartbeat schedule or the set of deadlines may have changed
    /// (grant, renewal, release, loss): wakes the heartbeat loop and the deadline watchdog
    /// to recompute their next wake-up.
    pub(crate) schedule: Notify,
}

struct SessionState {
    status: Status,
    /// Conservative local deadline of the session itself.
    deadline: Duration,
    /// Send time of the last L2 (L1's at first): the schedule counts from it.
    last_heartbeat: Duration,
    /// Next handle sequence number (see `LockHandle::seq`).
    next_seq: u64,
    /// Round-trip estimate of L4 (EWMA, weight 1/4 per sample).
    rtt: Duration,
    /// Keys this session may hold without a handle: an L4 went unanswered (timeout, network,
    /// dropped future) and its acquire ended without a grant. Value: (earliest send time of
    /// such an L4, when recorded). See [`SessionShared::grant_anchor`].
    suspects: BTreeMap<String, (Duration, Duration)>,
    /// Highest token this session released successfully, per key. A heartbeat answer is a
    /// snapshot that may predate a release; without this, a key released after the snapshot
    /// would look like an orphan and block a fresh acquire of it while the needless L6 runs.
    released: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    Lost,
    Closed,
}

impl LockClientSession {
    /// The server's session id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Acquires `key` for `ttl` under `policy`: `Ok(Some(handle))` when granted (or already
    /// held by this session: a nested hold), `Ok(None)` when not granted within the budget.
    /// See [`crate::acquire`] for the loop. Cancel by dropping the future.
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        crate::acquire::acquire(&self.shared, key, ttl, policy).await
    }

    /// [`LockClientSession::acquire`] with the default lock TTL and [`AcquirePolicy::default`].
    pub async fn acquire_default(&self, key: &str) -> Result<Option<LockHandle>, LockError> {
        let ttl = self.shared.parts.config.default_lock_ttl;
        self.acquire(key, ttl, &AcquirePolicy::default()).await
    }

    /// Releases one hold of `handle`. Only the outermost release (depth zero) sends L6;
    /// 409 LOCK_LOST is benign (the lock is already gone). A released handle reports lost.
    /// Releasing a handle that is no longer registered does nothing. A lost or closed session
    /// sends nothing: its locks are gone with it.
    pub async fn release(&self, handle: &LockHandle) -> Result<(), LockError> {
        let s = &self.shared;
        if handle.session_id() != s.id {
            return Err(LockError::validation(
                "handle",
                "handle belongs to another session",
            ));
        }
        let _in_flight = match s.holds.release(handle) {
            ReleaseStep::NotHeld | ReleaseStep::Nested => return Ok(()),
            ReleaseStep::Last(guard) => guard,
        };
        s.report_lost(handle, LostReason::Released);
        if s.ensure_open().is_err() {
            return Ok(());
        }
        let result = s
            .send_release(
                handle.key(),
                handle.fencing_token(),
                &*s.parts.clock,
                s.parts.config.request_timeout,
            )
            .await;
        match &result {
            Ok(()) => {
                let mut state = s.state.lock().unwrap();
                let released = state.released.entry(handle.key().to_owned()).or_insert(0);
                *released = (*released).max(handle.fencing_token());
            }
            Err(LockError::SessionLost) => s.mark_lost(),
            // The lock may still be held (e.g. the L6 was lost): the next heartbeat releases
            // it as an orphan, and until then a new grant of the key counts from its anchor.
            Err(_) => s.record_suspect(handle.key(), handle.anchor()),
        }
        result
    }

    /// L3: closes the session (the server releases all its locks) and stops the heartbeat.
    /// 404 is benign; closing a lost or closed session sends nothing.
    pub async fn close(&self) -> Result<(), LockError> {
        let s = &self.shared;
        if !s.end(Status::Closed) {
            return Ok(());
        }
        let hop = s.parts.config.request_timeout;
        match call(
            &*s.parts.clock,
            hop,
            s.parts.transport.close_session(&s.id, hop),
        )
        .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => Ok(()),
            Err(e) => Err(LockError::from_transport(e, "")),
        }
    }

    /// L5: the server's view of this session.
    pub async fn status(&self) -> Result<SessionStatus, LockError> {
        let s = &self.shared;
        s.ensure_open()?;
        let hop = s.parts.config.request_timeout;
        let result = call(
            &*s.parts.clock,
            hop,
            s.parts.transport.session_status(&s.id, hop),
        )
        .await;
        s.check_session_answer(result)
    }

    /// True once the session is lost (404 or deadline passed without renewal).
    pub fn is_lost(&self) -> bool {
        self.shared.status() == Status::Lost
    }

    /// True once [`LockClientSession::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared.status() == Status::Closed
    }

    /// The session's conservative local deadline, on the client's clock.
    pub fn deadline(&self) -> Duration {
        self.shared.state.lock().unwrap().deadline
    }
}

impl SessionShared {
    fn status(&self) -> Status {
        self.state.lock().unwrap().status
    }

    /// `Ok` while the session is open; the error a waiter should fail with otherwise. A
    /// session whose deadline passed is lost now, even if the heartbeat task has not run yet
    /// (e.g. the process was paused), so nothing is sent on its behalf.
    pub(crate) fn ensure_open(&self) -> Result<(), LockError> {
        if self.status() == Status::Open && self.parts.clock.now() >= self.deadline() {
            self.mark_lost();
        }
        match self.status() {
            Status::Open => Ok(()),
            Status::Lost => Err(LockError::SessionLost),
            Status::Closed => Err(LockError::Closed),
        }
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.state.lock().unwrap().deadline
    }

    pub(crate) fn rtt_estimate(&self) -> Duration {
        self.state.lock().unwrap().rtt
    }

    /// Folds one measured L4 round trip into the estimate.
    pub(crate) fn observe_rtt(&self, sample: Duration) {
        let mut state = self.state.lock().unwrap();
        state.rtt = (state.rtt * 3 + sample) / 4;
    }

    pub(crate) fn next_seq(&self) -> u64 {
        let mut state = self.state.lock().unwrap();
        state.next_seq += 1;
        state.next_seq
    }

    /// A lock's conservative deadline for a request sent at `sent_at`.
    pub(crate) fn lock_deadline(&self, sent_at: Duration, ttl: Duration) -> Duration {
        (sent_at + ttl)
            .saturating_sub(self.parts.margin(ttl))
            .min(self.deadline())
    }

    /// Records that `key` may have been granted by an L4 sent at `since` whose answer never
    /// arrived, although the acquire ended without a handle.
    pub(crate) fn record_suspect(&self, key: &str, since: Duration) {
        let now = self.parts.clock.now();
        let mut state = self.state.lock().unwrap();
        let entry = state.suspects.entry(key.to_owned()).or_insert((since, now));
        entry.0 = entry.0.min(since);
        entry.1 = now;
    }

    /// The send time a fresh grant's deadline must count from.
    ///
    /// The server answers an L4 by a session that already holds the key with the existing
    /// grant, *without renewing it*. So if an earlier L4 for this key went unanswered (in this
    /// acquire: `in_loop`, or in an earlier one: a suspect), the grant may date from that
    /// earlier send, and the deadline must count from there, not from this attempt.
    pub(crate) fn grant_anchor(
        &self,
        key: &str,
        sent_at: Duration,
        in_loop: Option<Duration>,
    ) -> Duration {
        let mut state = self.state.lock().unwrap();
        let suspect = state.suspects.remove(key).map(|(since, _)| since);
        [Some(sent_at), in_loop, suspect]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(sent_at)
    }

    pub(crate) fn emit(&self, event: ClientEvent) {
        self.parts.events.on_event(&event);
    }

    /// Moves the session to `to` if it is open: marks every handle lost, wakes everyone.
    /// Returns false when it had already ended.
    fn end(&self, to: Status) -> bool {
        {
            let mut state = self.state.lock().unwrap();
            if state.status != Status::Open {
                return false;
            }
            state.status = to;
        }
        let now = self.parts.clock.now();
        for handle in self.holds.clear() {
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
            self.emit(ClientEvent::SessionLost {
                session_id: self.id.clone(),
            });
        }
        self.ended.set();
        true
    }

    /// The session is gone (404 or deadline passed): see the module docs.
    pub(crate) fn mark_lost(&self) {
        self.end(Status::Lost);
    }

    /// Reports `handle` lost for `reason` (once; a `lock_lost` event unless the owner ended
    /// it) and wakes the schedule, which no longer counts it.
    fn report_lost(&self, handle: &LockHandle, reason: LostReason) {
        if handle.mark_lost(reason) && !reason.by_owner() {
            self.emit(ClientEvent::Lost {
                key: handle.key().to_owned(),
                fencing_token: handle.fencing_token(),
                reason,
            });
        }
        self.schedule.notify();
    }

    /// Registers a fresh grant and wakes the schedule: the new lock may be due for renewal
    /// before the next heartbeat, and its deadline may be the earliest. A grant whose
    /// deadline passed before its answer came (it counts from an earlier unanswered L4) is
    /// reported lost at once.
    pub(crate) fn register(&self, guard: InFlightGuard, handle: &LockHandle) {
        self.holds.register(guard, handle.clone());
        if self.parts.clock.now() >= handle.deadline() {
            self.report_lost(handle, LostReason::DeadlinePassed);
        }
        self.schedule.notify();
    }

    /// Maps a session-surface answer; 404 marks the session lost.
    fn check_session_answer<T>(&self, result: Result<T, TransportError>) -> Result<T, LockError> {
        result.map_err(|e| {
            let err = LockError::from_transport(e, "");
            if err == LockError::SessionLost {
                self.mark_lost();
            }
            err
        })
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

    /// One L2 round: renew or mark lost. Never outlives the session deadline nor the next due
    /// round. Its calls time out on `clock`, the heartbeat task's background clock.
    async fn heartbeat_once(&self, clock: &dyn Clock) {
        let now = self.parts.clock.now();
        let deadline = self.deadline();
        if now >= deadline {
            self.mark_lost();
            return;
        }
        let seq_at_send = {
            let mut state = self.state.lock().unwrap();
            state.last_heartbeat = now;
            state.next_seq
        };
        let hop = self.round_hop(deadline - now);
        let result = call(clock, hop, self.parts.transport.heartbeat(&self.id, hop)).await;
        if self.status() != Status::Open {
            return;
        }
        match result {
            Ok(answer) => self.on_heartbeat(now, seq_at_send, answer, clock).await,
            Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => self.mark_lost(),
            // Anything else is transient until the deadline, which the watchdog keeps.
            Err(_) => {}
        }
    }

    /// Applies an L2 answer to a heartbeat sent at `sent_at`.
    async fn on_heartbeat(
        &self,
        sent_at: Duration,
        seq_at_send: u64,
        answer: HeartbeatResponse,
        clock: &dyn Clock,
    ) {
        let ttl = Duration::from_millis(answer.ttl_millis);
        {
            let mut state = self.state.lock().unwrap();
            let renewed = (sent_at + ttl).saturating_sub(self.parts.margin(ttl));
            state.deadline = state.deadline.max(renewed);
            // A suspect recorded before this heartbeat was sent and not listed by it is not
            // held (the server answered after the suspect L4 had timed out).
            state.suspects.retain(|key, (_, recorded)| {
                *recorded >= sent_at || answer.locks.iter().any(|l| &l.key == key)
            });
        }
        let now = self.parts.clock.now();
        for handle in self.holds.handles() {
            if handle.seq() > seq_at_send {
                // Registered after this heartbeat was sent: its lock list may predate the
                // grant, so it says nothing of the lock; but the session it renewed lifts the
                // session's cap on the lock's deadline (a late cap would lose the lock before
                // its own renewal is due).
                handle.renew(
                    handle.anchor(),
                    self.lock_deadline(handle.anchor(), handle.ttl()),
                );
                continue;
            }
            let listed = answer
                .locks
                .iter()
                .any(|l| l.key == handle.key() && l.fencing_token == handle.fencing_token());
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
        self.release_orphans(&answer, clock).await;
    }

    /// Releases grants the server lists but no handle tracks (an acquire that timed out or
    /// was dropped after the server granted): heartbeats would otherwise renew them forever.
    async fn release_orphans(&self, answer: &HeartbeatResponse, clock: &dyn Clock) {
        for lock in &answer.locks {
            let stale = self
                .state
                .lock()
                .unwrap()
                .released
                .get(&lock.key)
                .is_some_and(|&token| token >= lock.fencing_token);
            if stale {
                continue;
            }
            let Some(_guard) = self.holds.claim_orphan(&lock.key) else {
                continue;
            };
            if self.status() != Status::Open {
                return;
            }
            let hop = self.round_hop(Duration::MAX);
            if hop.is_zero() {
                return;
            }
            // Best effort: a failure leaves it for the next heartbeat.
            if self
                .send_release(&lock.key, lock.fencing_token, clock, hop)
                .await
                .is_ok()
            {
                self.state.lock().unwrap().suspects.remove(&lock.key);
            }
        }
    }

    /// The timeout of a call of the heartbeat task: the request timeout, but never past
    /// `limit` nor the next due heartbeat, so a lost request is retried on schedule instead
    /// of after a whole request timeout.
    fn round_hop(&self, limit: Duration) -> Duration {
        let until_next = self.next_heartbeat().saturating_sub(self.parts.clock.now());
        self.parts.config.request_timeout.min(limit).min(until_next)
    }

    /// When the next L2 is due (see [`crate::schedule`]): the session's period after the
    /// last one, or a third of a held lock's TTL after its last renewal (or after the last
    /// L2, if that one failed), whichever comes first.
    fn next_heartbeat(&self) -> Duration {
        let last = self.state.lock().unwrap().last_heartbeat;
        self.holds
            .handles()
            .iter()
            .filter(|h| h.lost_reason().is_none())
            .map(|h| schedule::renew_by(h.anchor().max(last), h.ttl()))
            .fold(last + self.heartbeat_every, Duration::min)
    }

    /// Reports every deadline that has passed by now: each unreported handle whose deadline
    /// passed is lost, then the session if its own did.
    fn expire_passed(&self) {
        let now = self.parts.clock.now();
        for handle in self.holds.handles() {
            if handle.lost_reason().is_none() && now >= handle.deadline() {
                self.report_lost(&handle, LostReason::DeadlinePassed);
            }
        }
        if self.status() == Status::Open && now >= self.deadline() {
            self.mark_lost();
        }
    }

    /// The earliest deadline still to be kept: the session's or an unreported handle's.
    fn next_deadline(&self) -> Duration {
        self.holds
            .handles()
            .iter()
            .filter(|h| h.lost_reason().is_none())
            .map(LockHandle::deadline)
            .fold(self.deadline(), Duration::min)
    }
}

/// Dropping every clone of a session stops its heartbeats (the server then expires it): its
/// handles can no longer be kept, so they end here, as by a close.
impl Drop for SessionShared {
    fn drop(&mut self) {
        for handle in self.holds.clear() {
            handle.mark_lost(LostReason::SessionClosed);
        }
    }
}

/// What woke a background loop.
enum Wake {
    /// Its timer: the time it waited for has come.
    Due,
    /// The schedule changed: recompute.
    Rescheduled,
    /// The session ended (closed, lost) or was dropped: stop.
    Ended,
}

/// Sleeps on `clock` until `at`, or until the session's schedule changes or it ends. Holds
/// only a weak reference while waiting, so dropping the last [`LockClientSession`] ends the
/// loops on their next wake-up.
async fn wait_until(
    session: &Weak<SessionShared>,
    clock: &dyn Clock,
    at: impl FnOnce(&SessionShared) -> Duration,
) -> Wake {
    let (sleep, rescheduled, ended) = {
        let Some(s) = session.upgrade() else {
            return Wake::Ended;
        };
        if s.status() != Status::Open {
            return Wake::Ended;
        }
        // Listen before reading the schedule, so a change made in between is not missed.
        let rescheduled = s.schedule.listen();
        let wait = at(&s).saturating_sub(clock.now());
        (clock.sleep(wait), rescheduled, s.ended.wait())
    };
    let changed = select(Box::pin(rescheduled), Box::pin(ended));
    match select(sleep, changed).await {
        Either::Left(_) => Wake::Due,
        Either::Right((Either::Left(_), _)) => Wake::Rescheduled,
        Either::Right((Either::Right(_), _)) => Wake::Ended,
    }
}

/// The heartbeat loop: one L2 whenever [`SessionShared::next_heartbeat`] comes. Every wait
/// of the task is on `clock`, the background view of the client's clock that
/// [`LockClient::open_session`] gives it.
async fn heartbeat_loop(session: Weak<SessionShared>, clock: Arc<dyn Clock>) {
    loop {
        match wait_until(&session, &*clock, SessionShared::next_heartbeat).await {
            Wake::Due => {}
            Wake::Rescheduled => continue,
            Wake::Ended => return,
        }
        let Some(s) = session.upgrade() else { return };
        if clock.now() >= s.next_heartbeat() {
            s.heartbeat_once(&*clock).await;
        }
    }
}

/// The deadline watchdog: at each deadline of the session and its handles, on the client's
/// clock, reports what passed (see [`SessionShared::expire_passed`]).
async fn deadline_watch(session: Weak<SessionShared>, clock: Arc<dyn Clock>) {
    loop {
        if let Some(s) = session.upgrade() {
            s.expire_passed();
        }
        if let Wake::Ended = wait_until(&session, &*clock, SessionShared::next_deadline).await {
            return;
        }
    }
}

/// Runs a transport call under a timeout on `clock` (the transport is told the same timeout;
/// this makes it binding even if the transport ignores it).
pub(crate) async fn call<T>(
    clock: &dyn Clock,
    hop: Duration,
    fut: impl std::future::Future<Output = Result<T, TransportError>>,
) -> Result<T, TransportError> {
    timeout(clock, hop, fut)
        .await
        .unwrap_or(Err(TransportError::Timeout(hop)))
}

#[cfg(all(test, not(target_arch = "wasm32")))] // uses test_support (native only)
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::test_support::Fixture;
    use crate::transport::{Call, ScriptedTransport};
    use lock_api::{HeldLock, LockGrant};

    fn grant(key: &str, token: u64) -> Result<LockGrant, TransportError> {
        Ok(ScriptedTransport::grant(key, "s1", token, 10_000))
    }

    fn heartbeat(locks: &[(&str, u64)]) -> Result<HeartbeatResponse, TransportError> {
        Ok(HeartbeatResponse {
            ttl_millis: 15_000,
            locks: locks
                .iter()
                .map(|(key, token)| HeldLock {
                    key: (*key).into(),
                    fencing_token: *token,
                })
                .collect(),
        })
    }

    /// Criterion 6: nested acquires → one L4, the same token, one L6 on the outer release.
    #[test]
    fn nested_acquires_share_one_grant_and_one_release() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 77));
        let (outer, inner, after_inner) = f.run(async move {
            let outer = session.acquire_default("k").await.unwrap().unwrap();
            let inner = session.acquire_default("k").await.unwrap().unwrap();
            session.release(&inner).await.unwrap();
            let after_inner = outer.is_lost();
            session.release(&outer).await.unwrap();
            (outer, inner, after_inner)
        });
        assert_eq!(f.transport.acquire_calls(), 1);
        assert_eq!(outer.fencing_token(), 77);
        assert_eq!(inner.fencing_token(), outer.fencing_token());
        assert!(!after_inner, "the inner release keeps the outer hold");
        assert_eq!(f.transport.release_calls(), 1);
        assert!(outer.is_lost(), "a released handle reports lost");
    }

    /// Criterion 7: a key missing from a heartbeat is lost at once; re-acquiring it fails
    /// with LockLost and sends no L4.
    #[test]
    fn reacquiring_a_lost_key_fails_without_a_request() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 5));
        f.transport.push_heartbeat(heartbeat(&[]));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        let deadline = handle.deadline();
        f.clock.advance(Duration::from_secs(5)); // the first heartbeat answers without "k"
        let s = session.clone();
        let result = f.run(async move { s.acquire_default("k").await });
        assert!(handle.is_lost());
        assert!(
            f.clock.now() < deadline,
            "lost before its deadline, from the heartbeat"
        );
        assert_eq!(result.unwrap_err(), LockError::LockLost { key: "k".into() });
        assert_eq!(f.transport.acquire_calls(), 1);
        assert!(f.event_names().contains(&"lock_lost"));
        // Releasing the lost handle (LOCK_LOST is benign) makes the key acquirable again.
        f.transport
            .push_release(Err(ScriptedTransport::error(ErrorCode::LockLost)));
        f.transport.push_acquire(grant("k", 6));
        let again = f.run(async move {
            session.release(&handle).await.unwrap();
            session.acquire_default("k").await
        });
        assert_eq!(again.unwrap().unwrap().fencing_token(), 6);
    }

    #[test]
    fn deadlines_count_from_the_send_time_minus_the_margin_and_heartbeats_move_them() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        // Granted at t=0 with a 10 s TTL: margin max(500 ms, 1 s) = 1 s.
        assert_eq!(handle.deadline(), Duration::from_secs(9));
        f.clock.advance(Duration::from_secs(5)); // heartbeat sent at 5 s lists the lock
        let s = session.clone();
        f.run(async move { s.is_lost() });
        assert_eq!(handle.deadline(), Duration::from_secs(14));
        assert_eq!(
            session.deadline(),
            Duration::from_millis(5_000 + 15_000 - 1_500)
        );
    }

    #[test]
    fn failed_heartbeats_past_the_deadline_lose_the_session_and_count_it() {
        let f = Fixture::new();
        let session = f.session();
        for _ in 0..10 {
            f.transport
                .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        }
        f.transport.push_acquire(grant("k", 1));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        // Session deadline 13.5 s (15 s TTL, 1.5 s margin); every heartbeat before it fails
        // (due at a third of the lock's TTL while it is held, then every 5 s).
        let heartbeats = || {
            f.transport
                .calls()
                .iter()
                .filter(|c| matches!(c, Call::Heartbeat(_)))
                .count()
        };
        let mut at_loss = None;
        for _ in 0..20 {
            f.clock.advance(Duration::from_secs(1));
            let s = session.clone();
            if f.run(async move { s.is_lost() }) && at_loss.is_none() {
                at_loss = Some(heartbeats());
            }
        }
        assert!(session.is_lost());
        assert!(handle.is_lost());
        assert_eq!(f.client.session_lost_count(), 1);
        assert!(at_loss.is_some_and(|n| n >= 2), "{at_loss:?}");
        assert_eq!(Some(heartbeats()), at_loss, "no heartbeat after the loss");
        let s = session.clone();
        assert_eq!(f.run(async move { s.release(&handle).await }), Ok(()));
        assert_eq!(
            f.transport.release_calls(),
            0,
            "a lost session sends nothing"
        );
        assert_eq!(f.run(async move { session.close().await }), Ok(()));
        assert!(!f
            .transport
            .calls()
            .iter()
            .any(|c| matches!(c, Call::CloseSession(_))));
    }

    fn heartbeat_calls(f: &Fixture) -> usize {
        f.transport
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Heartbeat(_)))
            .count()
    }

    /// Lets `by` of simulated time pass, every timer firing at its instant.
    fn pass(f: &Fixture, by: Duration) {
        let clock = f.clock.clone();
        f.run(async move { clock.sleep(by).await });
    }

    /// A 500 ms lock on a 15 s session (heartbeat period 5 s) is renewed every third of its
    /// TTL, so it stays held; released, the schedule falls back to the session's period.
    #[test]
    fn a_short_lock_is_renewed_in_time_and_its_release_relaxes_the_schedule() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 500,
            ..g
        }));
        let s = session.clone();
        let policy = AcquirePolicy::default();
        let handle = f.run(async move {
            let h = s.acquire("k", Duration::from_millis(500), &policy).await;
            h.unwrap().unwrap()
        });
        pass(&f, Duration::from_secs(5));
        assert!(!handle.is_lost(), "{handle:?}");
        assert_eq!(handle.lost_reason(), None);
        let held = heartbeat_calls(&f);
        assert!((29..=31).contains(&held), "one L2 every 167 ms: {held}");
        let (s, h) = (session.clone(), handle.clone());
        f.run(async move { s.release(&h).await.unwrap() });
        assert_eq!(handle.lost_reason(), Some(LostReason::Released));
        pass(&f, Duration::from_secs(10));
        assert_eq!(heartbeat_calls(&f) - held, 2, "back to one L2 every 5 s");
        assert!(
            !f.event_names().contains(&"lock_lost"),
            "a release is no loss"
        );
    }

    /// The heartbeat task sleeping towards the session's next heartbeat is woken by a grant
    /// whose renewal is due sooner.
    #[test]
    fn a_grant_wakes_the_heartbeat_early() {
        let f = Fixture::new();
        let session = f.session();
        pass(&f, Duration::from_secs(1));
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 600,
            ..g
        }));
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let granted =
            f.run(async move { s.acquire("k", Duration::from_millis(600), &policy).await });
        assert!(matches!(granted, Ok(Some(_))), "{granted:?}");
        pass(&f, Duration::from_millis(199));
        assert_eq!(heartbeat_calls(&f), 0);
        pass(&f, Duration::from_millis(1));
        assert_eq!(heartbeat_calls(&f), 1, "due at 1 s + 600 ms / 3");
    }

    /// With every heartbeat failing, a 1 s lock is reported lost at its deadline (500 ms):
    /// its `lost()` future completes then, with one `lock_lost` event.
    #[test]
    fn a_passed_deadline_is_reported_at_that_instant() {
        let f = Fixture::new();
        let session = f.session();
        for _ in 0..10 {
            f.transport
                .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        }
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 1_000,
            ..g
        }));
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let handle = f.run(async move {
            let h = s.acquire("k", Duration::from_secs(1), &policy).await;
            h.unwrap().unwrap()
        });
        assert_eq!(handle.deadline(), Duration::from_millis(500));
        let (h, clock) = (handle.clone(), f.clock.clone());
        let (at, reason) = f.run(async move {
            let reason = h.lost().await;
            (clock.now(), reason)
        });
        assert_eq!(
            (at, reason),
            (Duration::from_millis(500), LostReason::DeadlinePassed)
        );
        let lost: Vec<_> = f
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.name() == "lock_lost")
            .cloned()
            .collect();
        assert_eq!(
            lost,
            [ClientEvent::Lost {
                key: "k".into(),
                fencing_token: 1,
                reason: LostReason::DeadlinePassed
            }]
        );
        drop(session);
    }

    /// Dropping every clone of a session ends its handles: nothing can renew them now.
    #[test]
    fn dropping_the_session_ends_its_handles() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1));
        let handle = f.run(async move { session.acquire_default("k").await.unwrap().unwrap() });
        assert_eq!(handle.lost_reason(), Some(LostReason::SessionClosed));
    }

    #[test]
    fn a_ttl_too_short_to_renew_is_refused_naming_the_shortest_that_works() {
        let f = Fixture::new();
        let session = f.session();
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let refused =
            f.run(async move { s.acquire("k", Duration::from_millis(299), &policy).await });
        let Err(LockError::Validation { field, message }) = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(field, "ttlMillis");
        assert!(message.contains("at least 300 ms"), "{message}");
        assert_eq!(f.transport.acquire_calls(), 0);
        f.transport.push_acquire(grant("k", 1));
        let granted = f.run(async move {
            session
                .acquire("k", Duration::from_millis(300), &policy)
                .await
        });
        assert!(matches!(granted, Ok(Some(_))), "{granted:?}");
    }

    #[test]
    fn close_sends_l3_once_and_ends_the_session() {
        let f = Fixture::new();
        let session = f.session();
        let s = session.clone();
        let (first, second, acquire) = f.run(async move {
            (
                s.close().await,
                s.close().await,
                s.acquire_default("k").await,
            )
        });
        assert_eq!((first, second), (Ok(()), Ok(())));
        assert_eq!(acquire.unwrap_err(), LockError::Closed);
        let closes = f
            .transport
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::CloseSession(_)))
            .count();
        assert_eq!(closes, 1);
        assert!(session.is_closed());
    }

    /// A grant the client has no handle for (its acquire timed out) is released by the
    /// next heartbeat instead of being renewed forever.
    #[test]
    fn heartbeats_release_orphan_grants() {
        let f = Fixture::new();
        let _session = f.session();
        f.transport.push_heartbeat(heartbeat(&[("orphan", 12)]));
        f.clock.advance(Duration::from_secs(5));
        f.run(async {});
        let released: Vec<_> = f
            .transport
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Release(key, req) => Some((key, req.fencing_token)),
                _ => None,
            })
            .collect();
        assert_eq!(
            released,
            vec![("orphan".to_owned(), 12)],
            "{:?}",
            f.transport.calls()
        );
    }

    #[test]
    fn the_margin_is_the_larger_of_500ms_and_a_tenth_but_at_most_half() {
        assert_eq!(
            safety_margin(Duration::from_secs(10)),
            Duration::from_secs(1)
        );
        assert_eq!(
            safety_margin(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(
            safety_margin(Duration::from_millis(400)),
            Duration::from_millis(200)
        );
    }

    /// Records whether each sleep of a [`ManualClock`] was a background one.
    #[derive(Clone)]
    struct RecordingClock {
        inner: ManualClock,
        background: Arc<Mutex<Vec<bool>>>,
    }

    impl Clock for RecordingClock {
        fn now(&self) -> Duration {
            self.inner.now()
        }

        fn sleep(&self, duration: Duration) -> crate::spawn::BoxFuture<'static, ()> {
            self.background.lock().unwrap().push(false);
            self.inner.sleep(duration)
        }

        fn background_sleep(&self, duration: Duration) -> crate::spawn::BoxFuture<'static, ()> {
            self.background.lock().unwrap().push(true);
            self.inner.sleep(duration)
        }
    }

    /// The heartbeat task waits only on background sleeps (JS: unref'd timers, so an open
    /// session never keeps Node alive), the caller's calls only on foreground ones.
    #[test]
    fn only_the_heartbeat_task_sleeps_in_the_background() {
        let f = Fixture::new();
        let clock = RecordingClock {
            inner: f.clock.clone(),
            background: Arc::default(),
        };
        let client = LockClient::new(
            Arc::new(f.transport.clone()),
            Arc::new(clock.clone()),
            f.exec.spawner(1),
            Arc::new(crate::backoff::SeededRngSource::new(1)),
        )
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_secs(15)),
            ..ClientConfig::default()
        });
        let taken = || std::mem::take(&mut *clock.background.lock().unwrap());
        let session = f.run(async move { client.open_session().await.unwrap() });
        f.run(async {}); // the background task arms its waits
        assert_eq!(
            taken(),
            [false, true, true],
            "L1's timeout, then the heartbeat's and the deadline watchdog's waits"
        );
        f.transport.push_heartbeat(heartbeat(&[]));
        f.clock.advance(Duration::from_secs(5));
        f.run(async {});
        let heartbeat_round = taken();
        assert!(heartbeat_round.len() >= 2, "{heartbeat_round:?}");
        assert!(heartbeat_round.iter().all(|&b| b), "{heartbeat_round:?}");
        f.transport.push_acquire(grant("k", 1));
        f.run(async move { session.acquire_default("k").await.unwrap().unwrap() });
        let acquire = taken();
        assert!(
            !acquire.is_empty() && acquire.iter().all(|&b| !b),
            "{acquire:?}"
        );
    }
}
