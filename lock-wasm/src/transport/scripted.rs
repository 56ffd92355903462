//! [`ScriptedTransport`]: answers from per-call queues, for unit tests (feature
//! `test-util`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};

use super::Transport;
use crate::error::TransportError;

/// One call as a [`ScriptedTransport`] saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// L1.
    OpenSession(OpenSessionRequest),
    /// L2 with the session id.
    Heartbeat(String),
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
}

/// A transport for unit tests: answers from per-call queues and records every call.
///
/// Queues that run dry fall back to a sensible default: L1 opens `"s1"` (TTL 15 s, heartbeat
/// 5 s), L2 renews with the locks granted so far and not released, L3/L6 succeed, L4 answers
/// 409 LOCK_CONTENDED, L5/L7 answer 404. Answers are immediate: time is the clock's business.
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
        }
    }

    /// An error answer with the code's status.
    pub fn error(code: ErrorCode) -> TransportError {
        TransportError::Status {
            status: code.status(),
            body: ErrorBody::new(code, "scripted"),
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for ScriptedTransport {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        _timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::OpenSession(request.clone()));
        Ok(SessionOpened {
            session_id: "s1".into(),
            ttl_millis: request.ttl_millis.unwrap_or(15_000),
            heartbeat_millis: request.ttl_millis.unwrap_or(15_000) / 3,
        })
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::Heartbeat(session_id.to_owned()));
        let locks = s
            .held
            .iter()
            .map(|(key, token)| lock_api::HeldLock {
                key: key.clone(),
                fencing_token: *token,
            })
            .collect();
        s.heartbeat.pop_front().unwrap_or(Ok(HeartbeatResponse {
            ttl_millis: 15_000,
            locks,
        }))
    }

    async fn close_session(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<(), TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::CloseSession(session_id.to_owned()));
        s.held.clear();
        Ok(())
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        _timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::Acquire(key.to_owned(), request.clone()));
        let answer = s
            .acquire
            .pop_front()
            .unwrap_or_else(|| Err(Self::error(ErrorCode::LockContended)));
        if let Ok(grant) = &answer {
            s.held.push((grant.key.clone(), grant.fencing_token));
        }
        answer
    }

    async fn session_status(
        &self,
        session_id: &str,
        _timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::SessionStatus(session_id.to_owned()));
        Err(Self::error(ErrorCode::SessionNotFound))
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        _timeout: Duration,
    ) -> Result<(), TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::Release(key.to_owned(), request.clone()));
        s.held
            .retain(|(k, t)| !(k == key && *t == request.fencing_token));
        s.release.pop_front().unwrap_or(Ok(()))
    }

    async fn read_lock(&self, key: &str, _timeout: Duration) -> Result<LockState, TransportError> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(Call::ReadLock(key.to_owned()));
        Err(Self::error(ErrorCode::NotFound))
    }
}
