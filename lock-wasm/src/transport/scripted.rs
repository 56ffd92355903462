//! [`ScriptedTransport`]: answers from per-call queues, for unit tests (feature
//! `test-util`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, EventBatch, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ProclaimRequest, ReleaseRequest, SessionOpened, Unavailability,
};

use super::{Answer, Reply, Request, Transport};
use crate::error::TransportError;

/// One call as a [`ScriptedTransport`] saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// L1.
    OpenSession(OpenSessionRequest),
    /// L2 with the session id and the `since` it carried.
    Heartbeat(String, Option<String>),
    /// L3 with the session id.
    CloseSession(String),
    /// L4 with the key.
    Acquire(String, AcquireRequest),
    /// L5 with the session id.
    SessionStatus(String),
    /// L6 with the key.
    Release(String, ReleaseRequest),
    /// L7 with the key.
    ReadLock(String),
    /// L8 with the key, `after` and `waitMillis`.
    Events(String, Option<String>, u64),
    /// L9 with the key.
    Proclaim(String, ProclaimRequest),
}

/// A transport for unit tests: answers from per-call queues and records every call.
///
/// Queues that run dry fall back to a sensible default: L1 opens `"s1"` (TTL 15 s, heartbeat
/// 5 s), L2 renews with the locks granted so far and not released, L3/L6 succeed, L4 answers
/// 409 LOCK_CONTENDED, L5/L7 answer 404, L9 succeeds, and L8 never answers (the caller's
/// hop timeout on its clock ends it). Answers are immediate: time is the clock's business.
#[derive(Clone, Default)]
pub struct ScriptedTransport {
    inner: Arc<Mutex<Script>>,
}

#[derive(Default)]
struct Script {
    calls: Vec<Call>,
    acquire: VecDeque<Result<LockGrant, TransportError>>,
    heartbeat: VecDeque<Result<HeartbeatResponse, TransportError>>,
    release: VecDeque<Result<(), TransportError>>,
    events: VecDeque<Result<EventBatch, TransportError>>,
    read: VecDeque<Result<LockState, TransportError>>,
    proclaim: VecDeque<Result<(), TransportError>>,
    /// Grants handed out and not released, for the default heartbeat answer.
    held: Vec<(String, u64)>,
}

impl ScriptedTransport {
    /// An empty script (all defaults).
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues an L4 answer.
    pub fn push_acquire(&self, answer: Result<LockGrant, TransportError>) {
        self.inner.lock().unwrap().acquire.push_back(answer);
    }

    /// Queues an L2 answer.
    pub fn push_heartbeat(&self, answer: Result<HeartbeatResponse, TransportError>) {
        self.inner.lock().unwrap().heartbeat.push_back(answer);
    }

    /// Queues an L6 answer.
    pub fn push_release(&self, answer: Result<(), TransportError>) {
        self.inner.lock().unwrap().release.push_back(answer);
    }

    /// Queues an L8 answer.
    pub fn push_events(&self, answer: Result<EventBatch, TransportError>) {
        self.inner.lock().unwrap().events.push_back(answer);
    }

    /// Queues an L7 answer.
    pub fn push_read(&self, answer: Result<LockState, TransportError>) {
        self.inner.lock().unwrap().read.push_back(answer);
    }

    /// Queues an L9 answer.
    pub fn push_proclaim(&self, answer: Result<(), TransportError>) {
        self.inner.lock().unwrap().proclaim.push_back(answer);
    }

    /// How many L9 calls were made.
    pub fn proclaim_calls(&self) -> usize {
        self.count(|c| matches!(c, Call::Proclaim(..)))
    }

    /// Drops the L2 answers still queued: from now on L2 gets the default answer (an outage
    /// scripted as many failures ends here, whatever number of them was used).
    pub fn clear_heartbeats(&self) {
        self.inner.lock().unwrap().heartbeat.clear();
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// How many L4 calls were made.
    pub fn acquire_calls(&self) -> usize {
        self.count(|c| matches!(c, Call::Acquire(..)))
    }

    /// How many L6 calls were made.
    pub fn release_calls(&self) -> usize {
        self.count(|c| matches!(c, Call::Release(..)))
    }

    fn count(&self, pred: impl Fn(&Call) -> bool) -> usize {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| pred(c))
            .count()
    }

    /// A grant body as the server would send it.
    pub fn grant(key: &str, session_id: &str, token: u64, ttl_millis: u64) -> LockGrant {
        LockGrant {
            key: key.to_owned(),
            session_id: session_id.to_owned(),
            fencing_token: token,
            ttl_millis,
            waited_millis: 0,
            mode: Default::default(),
            limit: None,
        }
    }

    /// A 503 STORE_UNAVAILABLE answer with its `reason` and retry hint.
    pub fn store_unavailable(reason: Unavailability, retry_after_millis: u64) -> TransportError {
        let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, reason.message());
        body.reason = Some(reason.label().to_owned());
        body.retry_after_millis = Some(retry_after_millis);
        TransportError::Status { status: 503, body }
    }

    /// An error answer with the code's status.
    pub fn error(code: ErrorCode) -> TransportError {
        TransportError::Status {
            status: code.status(),
            body: ErrorBody::new(code, "scripted"),
        }
    }
}

impl From<Request<'_>> for Call {
    fn from(request: Request<'_>) -> Self {
        match request {
            Request::OpenSession(body) => Call::OpenSession(body.clone()),
            Request::Heartbeat(session, body) => {
                Call::Heartbeat(session.id.to_owned(), body.since.clone())
            }
            Request::CloseSession(session) => Call::CloseSession(session.id.to_owned()),
            Request::Acquire(key, body) => Call::Acquire(key.to_owned(), body.clone()),
            Request::SessionStatus(session) => Call::SessionStatus(session.id.to_owned()),
            Request::Release(key, body) => Call::Release(key.to_owned(), body.clone()),
            Request::ReadLock(key) => Call::ReadLock(key.to_owned()),
            Request::Events {
                key,
                after,
                wait_millis,
            } => Call::Events(key.to_owned(), after.map(str::to_owned), wait_millis),
            Request::Proclaim(key, body) => Call::Proclaim(key.to_owned(), body.clone()),
        }
    }
}

impl Script {
    /// L2's answer: the next queued one, else a renewal naming the locks held.
    fn renewal(&mut self) -> Result<HeartbeatResponse, TransportError> {
        let locks = self
            .held
            .iter()
            .map(|(key, token)| lock_api::HeldLock {
                key: key.clone(),
                fencing_token: *token,
                mode: Default::default(),
            })
            .collect();
        // A server from before versions: no version, so the client never sends `since`.
        let full = HeartbeatResponse::full(15_000, None, locks);
        self.heartbeat.pop_front().unwrap_or(Ok(full))
    }

    /// L4's answer: the next queued one (a grant is held from then on), else 409.
    fn grant(&mut self) -> Result<LockGrant, TransportError> {
        let answer = self
            .acquire
            .pop_front()
            .unwrap_or_else(|| Err(ScriptedTransport::error(ErrorCode::LockContended)));
        if let Ok(grant) = &answer {
            self.held.push((grant.key.clone(), grant.fencing_token));
        }
        answer
    }

    /// L6's answer: the next queued one, else success; the grant is no longer held.
    fn release(&mut self, key: &str, token: u64) -> Result<(), TransportError> {
        self.held.retain(|(k, t)| !(k == key && *t == token));
        self.release.pop_front().unwrap_or(Ok(()))
    }
}

/// L1's answer: session `"s1"` with the TTL asked for (15 s when none).
fn opened(request: &OpenSessionRequest) -> SessionOpened {
    let ttl_millis = request.ttl_millis.unwrap_or(15_000);
    SessionOpened {
        session_id: "s1".into(),
        holder_id: "h1".into(),
        ttl_millis,
        heartbeat_millis: ttl_millis / 3,
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for ScriptedTransport {
    async fn send(&self, request: Request<'_>, _timeout: Duration) -> Answer {
        let events = {
            let mut s = self.inner.lock().unwrap();
            s.calls.push(Call::from(request));
            match request {
                Request::Events { .. } => s.events.pop_front(),
                _ => None,
            }
        };
        if let Request::Events { .. } = request {
            return match events {
                Some(answer) => answer.map(Reply::Events),
                None => futures::future::pending().await,
            };
        }
        let mut s = self.inner.lock().unwrap();
        match request {
            Request::OpenSession(body) => Ok(Reply::Opened(opened(body))),
            Request::Heartbeat(..) => s.renewal().map(Reply::Renewed),
            Request::CloseSession(_) => {
                s.held.clear();
                Ok(Reply::Done)
            }
            Request::Acquire(..) => s.grant().map(Reply::Granted),
            Request::SessionStatus(_) => Err(Self::error(ErrorCode::SessionNotFound)),
            Request::Release(key, body) => s.release(key, body.fencing_token).map(|()| Reply::Done),
            Request::ReadLock(_) => s
                .read
                .pop_front()
                .unwrap_or_else(|| Err(Self::error(ErrorCode::NotFound)))
                .map(Reply::Lock),
            Request::Proclaim(..) => s
                .proclaim
                .pop_front()
                .unwrap_or(Ok(()))
                .map(|()| Reply::Done),
            Request::Events { .. } => unreachable!("answered above"),
        }
    }
}
