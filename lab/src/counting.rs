//! [`Counting`]: a transport that counts the calls passing through it to another one, per
//! operation, and how many of them failed. The live sweep reads its L4 calls per grant off
//! it, the session-load run its heartbeat traffic; the SDK above it runs unchanged.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_api::{
    AcquireRequest, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest, ReleaseRequest,
    SessionOpened, SessionStatus,
};
use lock_wasm::{Transport, TransportError};

/// The operations of contract C3, one per [`Transport`] method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// L1 open session.
    OpenSession,
    /// L2 heartbeat.
    Heartbeat,
    /// L3 close session.
    CloseSession,
    /// L4 acquire.
    Acquire,
    /// L5 session status.
    SessionStatus,
    /// L6 release.
    Release,
    /// L7 read lock.
    ReadLock,
}

const OPERATIONS: usize = 7;

/// Counts what passes through to `T`.
pub struct Counting<T> {
    inner: T,
    calls: [AtomicU64; OPERATIONS],
    failures: [AtomicU64; OPERATIONS],
}

impl<T> Counting<T> {
    /// Counts the calls made to `inner`, from zero.
    pub fn new(inner: T) -> Self {
        Counting {
            inner,
            calls: Default::default(),
            failures: Default::default(),
        }
    }

    /// Calls of `operation` sent so far (answered or not).
    pub fn calls(&self, operation: Operation) -> u64 {
        self.calls[operation as usize].load(Ordering::Relaxed)
    }

    /// Calls of `operation` that failed (any error).
    pub fn failures(&self, operation: Operation) -> u64 {
        self.failures[operation as usize].load(Ordering::Relaxed)
    }

    /// Counts `call` as sent, runs it, and counts it again if it failed.
    async fn tally<V>(
        &self,
        operation: Operation,
        call: impl Future<Output = Result<V, TransportError>>,
    ) -> Result<V, TransportError> {
        self.calls[operation as usize].fetch_add(1, Ordering::Relaxed);
        let answer = call.await;
        if answer.is_err() {
            self.failures[operation as usize].fetch_add(1, Ordering::Relaxed);
        }
        answer
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl<T: Transport> Transport for Counting<T> {
    async fn open_session(
        &self,
        r: &OpenSessionRequest,
        t: Duration,
    ) -> Result<SessionOpened, TransportError> {
        let call = self.inner.open_session(r, t);
        self.tally(Operation::OpenSession, call).await
    }

    async fn heartbeat(&self, id: &str, t: Duration) -> Result<HeartbeatResponse, TransportError> {
        self.tally(Operation::Heartbeat, self.inner.heartbeat(id, t))
            .await
    }

    async fn close_session(&self, id: &str, t: Duration) -> Result<(), TransportError> {
        self.tally(Operation::CloseSession, self.inner.close_session(id, t))
            .await
    }

    async fn acquire(
        &self,
        key: &str,
        r: &AcquireRequest,
        t: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.tally(Operation::Acquire, self.inner.acquire(key, r, t))
            .await
    }

    async fn session_status(&self, id: &str, t: Duration) -> Result<SessionStatus, TransportError> {
        let call = self.inner.session_status(id, t);
        self.tally(Operation::SessionStatus, call).await
    }

    async fn release(
        &self,
        key: &str,
        r: &ReleaseRequest,
        t: Duration,
    ) -> Result<(), TransportError> {
        self.tally(Operation::Release, self.inner.release(key, r, t))
            .await
    }

    async fn read_lock(&self, key: &str, t: Duration) -> Result<LockState, TransportError> {
        self.tally(Operation::ReadLock, self.inner.read_lock(key, t))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use lock_api::ErrorCode;
    use lock_wasm::ScriptedTransport;

    #[test]
    fn calls_and_failures_are_counted_per_operation_and_passed_through() {
        let scripted = ScriptedTransport::new();
        scripted.push_acquire(Ok(ScriptedTransport::grant("k", "s1", 4, 1_000)));
        scripted.push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
        let counting = Counting::new(scripted.clone());
        let t = Duration::from_secs(1);
        block_on(async {
            let opened = counting
                .open_session(&OpenSessionRequest::default(), t)
                .await;
            assert_eq!(opened.unwrap().session_id, "s1");
            let request = AcquireRequest {
                session_id: "s1".into(),
                ttl_millis: None,
                wait_millis: None,
            };
            assert_eq!(
                counting
                    .acquire("k", &request, t)
                    .await
                    .unwrap()
                    .fencing_token,
                4
            );
            // The script's default L4 answer is 409.
            assert!(counting.acquire("k", &request, t).await.is_err());
            assert!(counting.heartbeat("s1", t).await.is_err());
            assert!(counting.heartbeat("s1", t).await.is_ok());
        });
        assert_eq!(counting.calls(Operation::OpenSession), 1);
        assert_eq!(
            (
                counting.calls(Operation::Acquire),
                counting.failures(Operation::Acquire)
            ),
            (2, 1)
        );
        assert_eq!(
            (
                counting.calls(Operation::Heartbeat),
                counting.failures(Operation::Heartbeat)
            ),
            (2, 1)
        );
        assert_eq!(counting.calls(Operation::Release), 0);
        assert_eq!(
            scripted.acquire_calls(),
            2,
            "every call reached the inner transport"
        );
    }
}
