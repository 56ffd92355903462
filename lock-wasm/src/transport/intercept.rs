//! [`Intercepted`]: a transport in front of another that sees every call on its way through
//! and may hold it up, fail it or watch its answer, written once for the seven calls.
//!
//! What sits in front of a transport (the simulation's fault injection and heartbeat
//! record, the test kit's partitions, the dashboard's wait lanes) cares about a call's
//! route and session, never about its typed body; an [`Intercept`] sees exactly that
//! ([`Outgoing`]) and decides around the call, so none of them restates the seven methods
//! of [`Transport`] only to pass six of them on.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lock_api::{
    AcquireRequest, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest, ReleaseRequest,
    SessionOpened, SessionStatus,
};

use super::Transport;
use crate::error::TransportError;
use crate::spawn::{BoxFuture, MaybeSend, MaybeSync};

/// Which call of contract C3 a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// L1 open a session.
    OpenSession,
    /// L2 heartbeat.
    Heartbeat,
    /// L3 close a session.
    CloseSession,
    /// L4 acquire.
    Acquire,
    /// L5 session status.
    SessionStatus,
    /// L6 release.
    Release,
    /// L7 advisory holder read.
    ReadLock,
}

impl Route {
    /// The contract's name of the call, `"L1"` … `"L7"`.
    pub fn label(self) -> &'static str {
        match self {
            Route::OpenSession => "L1",
            Route::Heartbeat => "L2",
            Route::CloseSession => "L3",
            Route::Acquire => "L4",
            Route::SessionStatus => "L5",
            Route::Release => "L6",
            Route::ReadLock => "L7",
        }
    }

    /// Whether the call changes the store (L1–L4 and L6); L5 and L7 only read.
    pub fn writes(self) -> bool {
        !matches!(self, Route::SessionStatus | Route::ReadLock)
    }
}

/// A call's answer.
pub type Answer<T> = Result<T, TransportError>;

/// Sends a call on to the inner transport with the timeout given.
#[cfg(not(target_arch = "wasm32"))]
type PassOn<'a, T> = Box<dyn FnOnce(Duration) -> BoxFuture<'a, Answer<T>> + Send + 'a>;
/// Sends a call on to the inner transport with the timeout given.
#[cfg(target_arch = "wasm32")]
type PassOn<'a, T> = Box<dyn FnOnce(Duration) -> BoxFuture<'a, Answer<T>> + 'a>;

/// A call on its way through an [`Intercepted`] transport: what it names, its timeout, and
/// the means to send it on.
pub struct Outgoing<'a, T> {
    /// Which call.
    pub route: Route,
    /// The session the call names: L2–L5, and L6 when its body names one.
    pub session_id: Option<&'a str>,
    /// The key the call names: L4, L6 and L7.
    pub key: Option<&'a str>,
    /// L4's `waitMillis` (0 when absent and for every other call).
    pub wait_millis: u64,
    /// The caller's timeout for the call.
    pub timeout: Duration,
    pass_on: PassOn<'a, T>,
}

impl<'a, T> Outgoing<'a, T> {
    fn new(
        route: Route,
        session_id: Option<&'a str>,
        timeout: Duration,
        pass_on: PassOn<'a, T>,
    ) -> Self {
        Outgoing {
            route,
            session_id,
            key: None,
            wait_millis: 0,
            timeout,
            pass_on,
        }
    }

    fn on_key(self, key: &'a str) -> Self {
        Outgoing {
            key: Some(key),
            ..self
        }
    }

    /// Sends the call on with its own timeout.
    pub async fn send(self) -> Answer<T> {
        let timeout = self.timeout;
        self.send_within(timeout).await
    }

    /// Sends the call on with `timeout` instead (what is left after a wait of the
    /// intercept's own).
    pub async fn send_within(self, timeout: Duration) -> Answer<T> {
        (self.pass_on)(timeout).await
    }
}

/// Decides around every call an [`Intercepted`] transport makes.
pub trait Intercept: MaybeSend + MaybeSync {
    /// Makes `call`: sending it passes it on to the inner transport; not sending it fails
    /// the call without reaching the inner transport.
    fn around<'a, T: MaybeSend>(
        &'a self,
        call: Outgoing<'a, T>,
    ) -> impl Future<Output = Answer<T>> + MaybeSend;
}

/// `inner` with `intercept` around each of its calls.
pub struct Intercepted<I> {
    inner: Arc<dyn Transport>,
    intercept: I,
}

impl<I> Intercepted<I> {
    /// Puts `intercept` in front of `inner`.
    pub fn new(inner: Arc<dyn Transport>, intercept: I) -> Self {
        Intercepted { inner, intercept }
    }

    /// The intercept, to read what it recorded.
    pub fn intercept(&self) -> &I {
        &self.intercept
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl<I: Intercept> Transport for Intercepted<I> {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        let send = Box::new(|t| self.inner.open_session(request, t));
        let call = Outgoing::new(Route::OpenSession, None, timeout, send);
        self.intercept.around(call).await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        let send = Box::new(|t| self.inner.heartbeat(session_id, t));
        let call = Outgoing::new(Route::Heartbeat, Some(session_id), timeout, send);
        self.intercept.around(call).await
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        let send = Box::new(|t| self.inner.close_session(session_id, t));
        let call = Outgoing::new(Route::CloseSession, Some(session_id), timeout, send);
        self.intercept.around(call).await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        let send = Box::new(|t| self.inner.acquire(key, request, t));
        let call = Outgoing {
            wait_millis: request.wait_millis.unwrap_or(0),
            ..Outgoing::new(Route::Acquire, Some(&request.session_id), timeout, send).on_key(key)
        };
        self.intercept.around(call).await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        let send = Box::new(|t| self.inner.session_status(session_id, t));
        let call = Outgoing::new(Route::SessionStatus, Some(session_id), timeout, send);
        self.intercept.around(call).await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        let send = Box::new(|t| self.inner.release(key, request, t));
        let session_id = request.session_id.as_deref();
        let call = Outgoing::new(Route::Release, session_id, timeout, send).on_key(key);
        self.intercept.around(call).await
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        let send = Box::new(|t| self.inner.read_lock(key, t));
        let call = Outgoing::new(Route::ReadLock, None, timeout, send).on_key(key);
        self.intercept.around(call).await
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::sync::Mutex;

    use futures::executor::block_on;
    use lock_api::ErrorCode;

    use super::*;
    use crate::transport::{Call, ScriptedTransport};

    /// Records what it saw, one line a call, and refuses L7 without sending it.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Intercept for Recorder {
        async fn around<'a, T: MaybeSend>(&'a self, call: Outgoing<'a, T>) -> Answer<T> {
            let (route, session, key) = (call.route, call.session_id, call.key);
            let (wait, timeout) = (call.wait_millis, call.timeout);
            let line = format!("{} {session:?} {key:?} {wait} {timeout:?}", route.label());
            self.0.lock().unwrap().push(line);
            if route == Route::ReadLock {
                return Err(ScriptedTransport::error(ErrorCode::Internal));
            }
            call.send().await
        }
    }

    #[test]
    fn every_call_passes_the_intercept_with_what_it_names() {
        let inner = ScriptedTransport::new();
        let t = Intercepted::new(Arc::new(inner.clone()), Recorder::default());
        let hop = Duration::from_millis(100);
        block_on(async {
            let opened = t.open_session(&OpenSessionRequest::default(), hop).await;
            let id = opened.unwrap().session_id;
            t.heartbeat(&id, hop).await.unwrap();
            let acquire = AcquireRequest {
                session_id: id.clone(),
                ttl_millis: None,
                wait_millis: Some(250),
            };
            t.acquire("k", &acquire, hop).await.unwrap_err();
            t.session_status(&id, hop).await.unwrap_err();
            let release = ReleaseRequest {
                fencing_token: 1,
                session_id: None,
            };
            t.release("k", &release, hop).await.unwrap();
            t.read_lock("k", hop).await.unwrap_err();
            t.close_session(&id, hop).await.unwrap();
        });
        assert_eq!(
            *t.intercept().0.lock().unwrap(),
            [
                "L1 None None 0 100ms",
                "L2 Some(\"s1\") None 0 100ms",
                "L4 Some(\"s1\") Some(\"k\") 250 100ms",
                "L5 Some(\"s1\") None 0 100ms",
                "L6 None Some(\"k\") 0 100ms",
                "L7 None Some(\"k\") 0 100ms",
                "L3 Some(\"s1\") None 0 100ms",
            ]
        );
        // The refused L7 never reached the inner transport; the others did.
        assert!(!inner.calls().iter().any(|c| matches!(c, Call::ReadLock(_))));
        assert_eq!(inner.calls().len(), 6);
    }
}
