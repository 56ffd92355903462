//! A model of lock-server for the simulation: sessions and locks with TTLs on the simulated
//! clock, per-key strictly increasing fencing tokens, idempotent L4 per session, and
//! compare-and-delete L6 — the C3 rules, in memory. [`SimTransport`] puts a seeded, lossy
//! network in front of it.

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
use crate::transport::Transport;

/// Deliberate bugs, to prove the simulation's invariants can fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// L4 grants even when another session holds the key (a broken server).
    pub double_grant: bool,
    /// Locks expire after half their TTL (a server clock running twice as fast as the
    /// client's: beyond what any safety margin covers).
    pub fast_expiry: bool,
}

/// The modelled server. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct SimService {
    clock: ManualClock,
    faults: Faults,
    state: Arc<Mutex<ServiceState>>,
}

#[derive(Default)]
struct ServiceState {
    next_session: u64,
    sessions: BTreeMap<String, SimSession>,
    locks: BTreeMap<String, SimLock>,
    last_token: BTreeMap<String, u64>,
    /// Locks that ran out their own TTL while their session lived, in expiry order.
    lapsed: Vec<Lapse>,
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
        }
    }

    /// Drops expired sessions and locks; a lock dies with its session. A lock whose own TTL
    /// ran out first is recorded as a [`Lapse`].
    fn expire(&self, s: &mut ServiceState) {
        let now = self.clock.now();
        let ServiceState {
            sessions,
            locks,
            lapsed,
            ..
        } = s;
        locks.retain(|key, lock| {
            if lock.expires > now {
                return true;
            }
            let session_expires = sessions.get(&lock.session).map(|s| s.expires);
            if session_expires.is_some_and(|e| e > lock.expires) {
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
                key: key.clone(),
                fencing_token: lock.token,
            });
        }
        Ok(HeartbeatResponse { ttl_millis, locks })
    }

    fn close(&self, id: &str) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        s.locks.retain(|_, l| l.session != id);
        match s.sessions.remove(id) {
            Some(_) => Ok(()),
            None => Err(status(ErrorCode::SessionNotFound)),
        }
    }

    fn acquire(&self, key: &str, request: &AcquireRequest) -> Result<LockGrant, TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        if !s.sessions.contains_key(&request.session_id) {
            return Err(status(ErrorCode::SessionNotFound));
        }
        let mut ttl = Duration::from_millis(request.ttl_millis.unwrap_or(10_000));
        if self.faults.fast_expiry {
            ttl /= 2;
        }
        if let Some(lock) = s.locks.get(key) {
            if lock.session == request.session_id {
                // Idempotent per session: a retried L4 gets the same token.
                return Ok(grant(key, lock));
            }
            if !self.faults.double_grant {
                return Err(status(ErrorCode::LockContended));
            }
        }
        let token = s.last_token.get(key).copied().unwrap_or(0) + 1;
        s.last_token.insert(key.to_owned(), token);
        let lock = SimLock {
            session: request.session_id.clone(),
            token,
            ttl,
            expires: self.clock.now() + ttl,
        };
        let mut answer = grant(key, &lock);
        answer.ttl_millis = request.ttl_millis.unwrap_or(10_000);
        s.locks.insert(key.to_owned(), lock);
        Ok(answer)
    }

    fn release(&self, key: &str, request: &ReleaseRequest) -> Result<(), TransportError> {
        let mut s = self.state.lock().unwrap();
        self.expire(&mut s);
        match s.locks.get(key) {
            Some(lock) if lock.token == request.fencing_token => {
                s.locks.remove(key);
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
                key: key.clone(),
                fencing_token: l.token,
                remaining_millis: (l.expires - now).as_millis() as u64,
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
            key: key.to_owned(),
            holder: s.locks.get(key).map(|l| Holder {
                session_id: l.session.clone(),
                fencing_token: l.token,
                remaining_millis: (l.expires - now).as_millis() as u64,
            }),
            waiter_count: 0,
        }
    }
}

fn grant(key: &str, lock: &SimLock) -> LockGrant {
    LockGrant {
        key: key.to_owned(),
        session_id: lock.session.clone(),
        fencing_token: lock.token,
        ttl_millis: lock.ttl.as_millis() as u64,
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

    /// Request hop, the server's work at arrival time, answer hop.
    async fn exchange<T: std::fmt::Debug>(&self, apply: impl FnOnce(&SimService) -> T) -> T {
        self.hop().await;
        let answer = apply(&self.service);
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
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        _timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        Ok(self.exchange(|s| s.open(request)).await)
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        self.check_session("L2", session_id);
        self.exchange(|s| s.heartbeat(session_id)).await
    }

    async fn close_session(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<(), TransportError> {
        self.check_session("L3", session_id);
        self.exchange(|s| s.close(session_id)).await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        _timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.check_session("L4", &request.session_id);
        self.exchange(|s| s.acquire(key, request)).await
    }

    async fn session_status(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.check_session("L5", session_id);
        self.exchange(|s| s.status(session_id)).await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        _timeout: Duration,
    ) -> Result<(), TransportError> {
        if let Some(id) = &request.session_id {
            self.check_session("L6", id);
        }
        self.exchange(|s| s.release(key, request)).await
    }

    async fn read_lock(&self, key: &str, _timeout: Duration) -> Result<LockState, TransportError> {
        Ok(self.exchange(|s| s.read(key)).await)
    }
}
