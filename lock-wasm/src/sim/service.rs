//! A model of lock-server for the simulation: sessions and locks with TTLs on the simulated
//! clock, per-key strictly increasing fencing tokens, idempotent L4 per session,
//! compare-and-delete L6, and the wait queue per key (tickets served in arrival order, the
//! lock handed to the first live ticket when it ends, a grace period after a ticket's last
//! request, unclaimed hand-offs, no barging, the cap) — the C3 rules, in memory.
//! [`SimTransport`] puts a seeded, lossy network in front of it.
//!
//! One deliberate difference: an L4 by the holder returns its grant *without* renewing it
//! (a server of the kind C2 stays safe against), except when it claims an unclaimed
//! hand-off, which the server renews from the claiming request's arrival.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, HeldLock, Holder, LockGrant,
    LockState, LockStatus, OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::signal::Notify;
use crate::transport::{Answer, Reply, Request, Transport};

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
    locks: BTreeMap<String, SimLock>,
    last_token: BTreeMap<String, u64>,
    /// Locks that ran out their own TTL while their session lived, in expiry order.
    lapsed: Vec<Lapse>,
    /// Each key's wait queue, oldest ticket first.
    queues: BTreeMap<String, Vec<SimTicket>>,
    next_ticket: u64,
    /// Hand-offs that skipped an older live ticket (the FIFO invariant).
    out_of_order: Vec<String>,
}

/// A ticket in a key's wait queue.
#[derive(Clone)]
struct SimTicket {
    session: String,
    ttl: Duration,
    /// Until when a request of it is open.
    open_until: Duration,
    /// Arrival order.
    seq: u64,
}

impl SimTicket {
    fn live(&self, now: Duration, sessions: &BTreeMap<String, SimSession>) -> bool {
        now < self.open_until + GRACE && sessions.contains_key(&self.session)
    }
}

/// What one L4 attempt found.
enum Attempt {
    /// Granted; the lease runs from `lease_start`.
    Granted(LockGrant, Duration),
    Contended,
    /// This session's ticket waits; the holder's lock lives at most this much longer.
    Queued(Duration),
}

/// A lock that expired by its own TTL while its session was alive: nothing renewed it in
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

struct SimSession {
    ttl: Duration,
    expires: Duration,
}

#[derive(Clone)]
struct SimLock {
    session: String,
    token: u64,
    ttl: Duration,
    expires: Duration,
    /// A hand-off to a ticket whose request had ended: the lock lives only until then unless
    /// an L4 of its session claims it.
    claim_by: Option<Duration>,
}

impl SimLock {
    /// When it ends unless renewed or claimed.
    fn end(&self) -> Duration {
        self.claim_by.map_or(self.expires, |c| c.min(self.expires))
    }
}

fn status(code: ErrorCode) -> TransportError {
    TransportError::Status {
        status: code.status(),
        body: ErrorBody::new(code, "sim"),
    }
}

impl SimService {
    /// An empty server on `clock`.
    pub fn new(clock: ManualClock, faults: Faults) -> Self {
        SimService {
            clock,
            faults,
            state: Arc::default(),
            handed: Notify::default(),
        }
    }

    /// Drops expired sessions and locks (a lock dies with its session; one whose own TTL ran
    /// out first is recorded as a [`Lapse`]), then hands every free key with a live ticket
    /// to its queue. Every operation starts here, so, as at the real server, the first one
    /// after an expiry is what hands the key on.
    fn expire(&self, s: &mut ServiceState) {
        let now = self.clock.now();
        let ServiceState {
            sessions,
            locks,
            lapsed,
            ..
        } = s;
        locks.retain(|key, lock| {
            if lock.end() > now {
                return true;
            }
            let session_expires = sessions.get(&lock.session).map(|s| s.expires);
            if lock.claim_by.is_none() && session_expires.is_some_and(|e| e > lock.expires) {
                lapsed.push(Lapse {
                    key: key.clone(),
                    session: lock.session.clone(),
                    token: lock.token,
                    at: lock.expires,
                });
            }
            false
        });
        sessions.retain(|_, session| session.expires > now);
        locks.retain(|_, lock| sessions.contains_key(&lock.session));
        let keys: Vec<String> = s.queues.keys().cloned().collect();
        for key in keys {
            self.settle(s, &key);
        }
    }

    /// The hand-off: if `key` is free, grants it to the first live ticket of its queue
    /// (dropping dead ones ahead), checking that no older live ticket was passed over.
    fn settle(&self, s: &mut ServiceState, key: &str) {
        let now = self.clock.now();
        let Some(queue) = s.queues.get_mut(key) else {
            return;
        };
        let sessions = &s.sessions;
        queue.retain(|t| t.live(now, sessions));
        if s.locks.contains_key(key) || queue.is_empty() {
            if queue.is_empty() {
                s.queues.remove(key);
            }
            return;
        }
        let chosen = if self.faults.lifo_queue {
            queue.len() - 1
        } else {
            0
        };
        let oldest = queue.iter().map(|t| t.seq).min();
        let ticket = queue.remove(chosen);
        if oldest != Some(ticket.seq) {
            s.out_of_order.push(format!(
                "{key} handed at {now:?} to ticket {} of {} while ticket {oldest:?} waited",
                ticket.seq, ticket.session
            ));
        }
        let token = s.last_token.get(key).copied().unwrap_or(0) + 1;
        s.last_token.insert(key.to_owned(), token);
        s.locks.insert(
            key.to_owned(),
            SimLock {
                session: ticket.session,
                token,
                ttl: ticket.ttl,
                expires: now + ticket.ttl,
                claim_by: (now >= ticket.open_until).then_some(ticket.open_until + GRACE),
            },
        );
        self.handed.notify();
    }

    /// Hand-offs that passed over an older live ticket (always empty for a correct queue).
    pub fn out_of_order(&self) -> Vec<String> {
        self.state.lock().unwrap().out_of_order.clone()
    }

    /// Every [`Lapse`] so far.
    pub fn lapses(&self) -> Vec<Lapse> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.lapsed.clone()
    }

    /// The live holder of `key` right now: `(session, token)`.
    pub fn holder(&self, key: &str) -> Option<(String, u64)> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        s.locks.get(key).map(|l| (l.session.clone(), l.token))
    }

    /// R1, as an operator would: ends `key`'s lock whoever holds it. Returns its token.
    pub fn revoke(&self, key: &str) -> Option<u64> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let revoked = s.locks.remove(key).map(|lock| lock.token);
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
        s.sessions.insert(id.clone(), SimSession { ttl, expires });
        SessionOpened {
            holder_id: sim_holder_id(&id),
            session_id: id,
            ttl_millis: ttl.as_millis() as u64,
            heartbeat_millis: ttl.as_millis() as u64 / 3,
        }
    }

    fn heartbeat(&self, id: &str) -> Result<HeartbeatResponse, TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        let Some(session) = s.sessions.get_mut(id) else {
            return Err(status(ErrorCode::SessionNotFound));
        };
        session.expires = now + session.ttl;
        let ttl_millis = session.ttl.as_millis() as u64;
        let mut locks = Vec::new();
        for (key, lock) in s.locks.iter_mut().filter(|(_, l)| l.session == id) {
            lock.expires = now + lock.ttl;
            locks.push(HeldLock {
                mode: Default::default(),
                key: key.clone(),
                fencing_token: lock.token,
            });
        }
        Ok(HeartbeatResponse { ttl_millis, locks })
    }

    fn close(&self, id: &str) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        s.locks.retain(|_, l| l.session != id);
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
        let mut s = self.state.lock().unwrap();
        let now = self.clock.now();
        let id = &request.session_id;
        if let (Some(open_until), Some(queue)) = (open_until, s.queues.get_mut(key)) {
            // A live ticket stays open until this request's end; a dead one goes (the
            // request queues again at the end).
            queue.retain(|t| &t.session != id || now < t.open_until + GRACE);
            if let Some(ticket) = queue.iter_mut().find(|t| &t.session == id) {
                ticket.open_until = ticket.open_until.max(open_until);
            }
        }
        self.expire(&mut s);
        if !s.sessions.contains_key(id) {
            return Err(status(ErrorCode::SessionNotFound));
        }
        let mut ttl = Duration::from_millis(request.ttl_millis.unwrap_or(10_000));
        if self.faults.fast_expiry {
            ttl /= 2;
        }
        if let Some(lock) = s.locks.get_mut(key) {
            if &lock.session == id {
                // Idempotent per session: a retried L4 gets the same token. Claiming an
                // unclaimed hand-off renews it from now.
                let lease_start = match lock.claim_by.take() {
                    Some(_) => {
                        lock.expires = now + lock.ttl;
                        now
                    }
                    None => lock.expires - lock.ttl,
                };
                let answer = grant(key, lock);
                if let Some(queue) = s.queues.get_mut(key) {
                    queue.retain(|t| &t.session != id);
                }
                return Ok(Attempt::Granted(answer, lease_start));
            }
            if !self.faults.double_grant {
                let holder_left = lock.end().saturating_sub(now);
                return match open_until {
                    None => Ok(Attempt::Contended),
                    Some(open_until) => self.join(&mut s, key, id, ttl, open_until, holder_left),
                };
            }
        }
        // Free, and `expire` left no live ticket (no barging).
        let token = s.last_token.get(key).copied().unwrap_or(0) + 1;
        s.last_token.insert(key.to_owned(), token);
        let lock = SimLock {
            session: id.clone(),
            token,
            ttl,
            expires: now + ttl,
            claim_by: None,
        };
        let mut answer = grant(key, &lock);
        answer.ttl_millis = request.ttl_millis.unwrap_or(10_000);
        s.locks.insert(key.to_owned(), lock);
        Ok(Attempt::Granted(answer, now))
    }

    /// Takes a ticket at the end of `key`'s queue unless the session has one; 429 when full.
    fn join(
        &self,
        s: &mut ServiceState,
        key: &str,
        id: &str,
        ttl: Duration,
        open_until: Duration,
        holder_left: Duration,
    ) -> Result<Attempt, TransportError> {
        s.next_ticket += 1;
        let seq = s.next_ticket;
        let queue = s.queues.entry(key.to_owned()).or_default();
        if !queue.iter().any(|t| t.session == id) {
            if queue.len() >= QUEUE_CAP {
                return Err(status(ErrorCode::ContentionExceeded));
            }
            queue.push(SimTicket {
                session: id.to_owned(),
                ttl,
                open_until,
                seq,
            });
        }
        Ok(Attempt::Queued(holder_left))
    }

    /// L4 as the server runs it: one attempt, or, with `waitMillis` > 0, attempts until a
    /// hand-off grants the lock or the wait ends. `waitedMillis` is the lease's start minus
    /// the request's arrival.
    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
    ) -> Result<LockGrant, TransportError> {
        let arrival = self.clock.now();
        let wait = Duration::from_millis(request.wait_millis.unwrap_or(0));
        let open_until = (wait > Duration::ZERO).then_some(arrival + wait);
        loop {
            let handed = self.handed.listen();
            let holder_left = match self.attempt(key, request, open_until)? {
                Attempt::Granted(mut grant, lease_start) => {
                    grant.waited_millis = lease_start.saturating_sub(arrival).as_millis() as u64;
                    return Ok(grant);
                }
                Attempt::Contended => return Err(status(ErrorCode::LockContended)),
                Attempt::Queued(holder_left) => holder_left,
            };
            let left = (arrival + wait).saturating_sub(self.clock.now());
            if left.is_zero() {
                return Err(status(ErrorCode::LockContended));
            }
            let sleep = self.clock.sleep(left.min(holder_left + EXPIRY_SLACK));
            futures::future::select(Box::pin(handed), sleep).await;
        }
    }

    fn release(&self, key: &str, request: &ReleaseRequest) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        match s.locks.get(key) {
            Some(lock) if lock.token == request.fencing_token => {
                s.locks.remove(key);
                self.settle(&mut s, key);
                Ok(())
            }
            _ => Err(status(ErrorCode::LockLost)),
        }
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
            .filter(|(_, l)| l.session == id)
            .map(|(key, l)| LockStatus {
                mode: Default::default(),
                key: key.clone(),
                fencing_token: l.token,
                remaining_millis: (l.end() - now).as_millis() as u64,
            })
            .collect();
        Ok(SessionStatus {
            session_id: id.to_owned(),
            remaining_millis: (session.expires - now).as_millis() as u64,
            locks,
        })
    }

    fn read(&self, key: &str) -> LockState {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        let now = self.clock.now();
        LockState {
            mode: None,
            holders: Vec::new(),
            limit: None,
            key: key.to_owned(),
            holder: s.locks.get(key).map(|l| Holder {
                holder_id: sim_holder_id(&l.session),
                owner: None,
                fencing_token: l.token,
                remaining_millis: (l.end() - now).as_millis() as u64,
            }),
            waiter_count: s.queues.get(key).map_or(0, |q| q.len() as u32),
        }
    }

    /// The server's answer to `request` (L4 may wait in its queue).
    async fn answer(&self, request: Request<'_>) -> Answer {
        match request {
            Request::OpenSession(body) => Ok(Reply::Opened(self.open(body))),
            Request::Heartbeat(id) => self.heartbeat(id).map(Reply::Renewed),
            Request::CloseSession(id) => self.close(id).map(|()| Reply::Done),
            Request::Acquire(key, body) => self.acquire(key, body).await.map(Reply::Granted),
            Request::SessionStatus(id) => self.status(id).map(Reply::Status),
            Request::Release(key, body) => self.release(key, body).map(|()| Reply::Done),
            Request::ReadLock(key) => Ok(Reply::Lock(self.read(key))),
        }
    }
}

/// The simulated server's public name of a session (the real one is a keyed hash).
fn sim_holder_id(session_id: &str) -> String {
    format!("holder-of-{session_id}")
}

fn grant(key: &str, lock: &SimLock) -> LockGrant {
    LockGrant {
        mode: Default::default(),
        limit: None,
        key: key.to_owned(),
        session_id: lock.session.clone(),
        fencing_token: lock.token,
        ttl_millis: lock.ttl.as_millis() as u64,
        waited_millis: 0,
    }
}

/// Network behaviour of a [`SimTransport`].
#[derive(Debug, Clone, Copy)]
pub struct Network {
    /// One-way delay, uniform in `[min, max]` milliseconds.
    pub delay_millis: (u64, u64),
    /// Probability that a request or an answer is lost (the caller's timeout fires).
    pub loss: f64,
}

/// The invariant "no call after a lost session": sessions the clients declared lost are
/// registered in [`LostSessions::sessions`], and any later call naming one is a violation.
/// Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct LostSessions {
    lost: Arc<Mutex<BTreeSet<String>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl LostSessions {
    /// The set of sessions the clients have declared lost (shared with the harness).
    pub fn sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.clone()
    }

    /// Calls made after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// Records a violation if `what`, sent at `now`, names a session declared lost.
    pub fn check(&self, what: &str, session_id: &str, now: Duration) {
        if self.lost.lock().unwrap().contains(session_id) {
            self.violations.lock().unwrap().push(format!(
                "{what} sent at {now:?} for session {session_id} after it was declared lost"
            ));
        }
    }
}

/// A lossy network in front of a [`SimService`]. It also checks [`LostSessions`] as calls
/// reach it.
#[derive(Clone)]
pub struct SimTransport {
    service: SimService,
    network: Network,
    rng: Arc<Mutex<StdRng>>,
    lost: LostSessions,
    /// `SIM_TRACE` set: print every call and answer with its simulated time (for replaying a
    /// failing seed by hand).
    trace: bool,
}

impl SimTransport {
    /// A transport to `service` whose delays and losses are drawn from `seed`.
    pub fn new(service: SimService, network: Network, seed: u64) -> Self {
        SimTransport {
            service,
            network,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            lost: LostSessions::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    /// The set of sessions the client has declared lost (shared with the harness).
    pub fn lost_sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.sessions()
    }

    /// Calls made after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.lost.violations()
    }

    fn check_session(&self, what: &str, session_id: &str) {
        if self.trace {
            eprintln!("{:?} {session_id} sends {what}", self.service.clock.now());
        }
        self.lost.check(what, session_id, self.service.clock.now());
    }

    /// One network hop: a seeded delay, or forever if the packet is lost.
    async fn hop(&self) {
        let (delay, lost) = {
            let mut rng = self.rng.lock().unwrap();
            let (lo, hi) = self.network.delay_millis;
            (
                rng.random_range(lo..=hi),
                rng.random_bool(self.network.loss),
            )
        };
        if lost {
            std::future::pending::<()>().await;
        }
        self.service.clock.sleep(Duration::from_millis(delay)).await;
    }

    /// Request hop, the server's work from arrival time, answer hop.
    async fn exchange(&self, request: Request<'_>) -> Answer {
        self.hop().await;
        let answer = self.service.answer(request).await;
        if self.trace {
            eprintln!("{:?} server answered {answer:?}", self.service.clock.now());
        }
        self.hop().await;
        answer
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for SimTransport {
    async fn send(&self, request: Request<'_>, _timeout: Duration) -> Answer {
        if let Some(id) = request.session_id() {
            self.check_session(request.route().label(), id);
        }
        self.exchange(request).await
    }
}
