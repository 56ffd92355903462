//! [`HeartbeatWatch`]: the clients' transport as the simulation's invariants see it. It
//! passes every call through and records each L2 as its client saw it: when it was sent,
//! and when its success arrived (never, if it failed, timed out or was dropped).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{
    AcquireRequest, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest, ReleaseRequest,
    SessionOpened, SessionStatus,
};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::transport::Transport;

/// One L2 as its client saw it.
#[derive(Debug, Clone)]
struct Sent {
    session: String,
    at: Duration,
    answered: Option<Duration>,
}

/// Records every L2 on its way through to `inner`. Cheap to clone; clones share the record.
#[derive(Clone)]
pub struct HeartbeatWatch {
    inner: Arc<dyn Transport>,
    clock: ManualClock,
    sent: Arc<Mutex<Vec<Sent>>>,
}

impl HeartbeatWatch {
    /// Watches the L2 calls made through `inner`, timed on `clock`.
    pub fn new(inner: Arc<dyn Transport>, clock: ManualClock) -> Self {
        HeartbeatWatch {
            inner,
            clock,
            sent: Arc::default(),
        }
    }

    /// Whether every L2 of `session` sent up to `until` came back successfully within
    /// `within` of being sent.
    pub fn all_answered(&self, session: &str, until: Duration, within: Duration) -> bool {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.session == session && s.at <= until)
            .all(|s| s.answered.is_some_and(|a| a - s.at <= within))
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for HeartbeatWatch {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.inner.open_session(request, timeout).await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        // Unanswered until its success arrives; a failure, or a future dropped on timeout,
        // leaves it so.
        let index = {
            let mut sent = self.sent.lock().unwrap();
            sent.push(Sent {
                session: session_id.to_owned(),
                at: self.clock.now(),
                answered: None,
            });
            sent.len() - 1
        };
        let answer = self.inner.heartbeat(session_id, timeout).await;
        if answer.is_ok() {
            self.sent.lock().unwrap()[index].answered = Some(self.clock.now());
        }
        answer
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.close_session(session_id, timeout).await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.inner.acquire(key, request, timeout).await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.inner.session_status(session_id, timeout).await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.release(key, request, timeout).await
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.inner.read_lock(key, timeout).await
    }
}
