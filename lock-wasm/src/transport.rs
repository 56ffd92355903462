//! The request seam: one method per HTTP call of contract C3 (L1–L7). Implementations:
//! [`crate::native::HttpTransport`] (reqwest), the wasm fetch transport, the scripted
//! transport for unit tests ([`ScriptedTransport`]) and the simulated lock service of
//! [`crate::sim`].
//!
//! Keys are passed decoded; an HTTP implementation percent-encodes them with
//! [`lock_api::limits::encode_key`]. Every call carries the timeout the caller budgeted for
//! it: the implementation should abort the request after it (so the connection is not left
//! hanging), and the SDK additionally races every call against the same timeout on its
//! [`crate::clock::Clock`], so a transport that ignores it cannot stretch a deadline.
//! Status mapping: 2xx → `Ok`, anything else → [`TransportError::from_status`]; HTTP
//! transports share it through [`http_answer`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};

use crate::error::TransportError;
use crate::spawn::{MaybeSend, MaybeSync};

/// The answer mapping every HTTP transport shares: a 2xx answer passes its body text on to
/// be decoded as the success type; any other status becomes [`TransportError::Status`] via
/// [`TransportError::from_status_with`], with `decode_error` reading the contract error body
/// (each transport brings its own JSON decoder).
pub fn http_answer(
    status: u16,
    body_text: &str,
    decode_error: impl FnOnce(&str) -> Option<ErrorBody>,
) -> Result<&str, TransportError> {
    if (200..300).contains(&status) {
        Ok(body_text)
    } else {
        Err(TransportError::from_status_with(
            status,
            body_text,
            decode_error,
        ))
    }
}

/// The L1–L7 calls. Implement with
/// `#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]` and
/// `#[cfg_attr(not(target_arch = "wasm32"), async_trait)]` (see [`crate::spawn`]).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Transport: MaybeSend + MaybeSync {
    /// L1 `POST /v1/sessions` → 201.
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError>;

    /// L2 `POST /v1/sessions/{id}/heartbeat` → 200.
    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError>;

    /// L3 `DELETE /v1/sessions/{id}` → 204.
    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError>;

    /// L4 `POST /v1/locks/{key}/acquire` → 200 [`LockGrant`].
    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError>;

    /// L5 `GET /v1/sessions/{id}` → 200.
    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError>;

    /// L6 `POST /v1/locks/{key}/release` → 204.
    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError>;

    /// L7 `GET /v1/locks/{key}` → 200 (advisory).
    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError>;
}

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
            holder_id: "h1".into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn json_body(text: &str) -> Option<ErrorBody> {
        serde_json::from_str(text).ok()
    }

    #[test]
    fn a_2xx_answer_passes_its_body_on() {
        assert_eq!(http_answer(200, "{\"a\":1}", json_body), Ok("{\"a\":1}"));
        assert_eq!(http_answer(204, "", json_body), Ok(""));
    }

    #[test]
    fn other_statuses_map_through_the_decoder_or_the_fallback() {
        let contract = r#"{"code":"LOCK_CONTENDED","message":"held"}"#;
        let err = http_answer(409, contract, json_body).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::LockContended));
        let err = http_answer(502, "<html>bad gateway</html>", json_body).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Internal));
        let err = http_answer(503, "", json_body).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::NotLeader));
        // The transport's decoder decides what counts as a contract body.
        let err = http_answer(409, contract, |_| None).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Internal));
    }
}
