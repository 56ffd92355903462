//! [`Intercepted`]: a transport in front of another that sees every call on its way through
//! and may hold it up, fail it or watch its answer.
//!
//! What sits in front of a transport (the simulation's fault injection and heartbeat
//! record, the test kit's partitions, the dashboard's wait lanes) cares about a call's
//! route and session, never about its typed body; an [`Intercept`] sees exactly that
//! ([`Outgoing`]: the [`Request`] and its timeout) and decides around the call.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Answer, Request, Transport};
use crate::spawn::{MaybeSend, MaybeSync};

/// A call on its way through an [`Intercepted`] transport: what it names, its timeout, and
/// the means to send it on.
pub struct Outgoing<'a> {
    inner: &'a dyn Transport,
    request: Request<'a>,
    timeout: Duration,
}

impl<'a> Outgoing<'a> {
    /// The call: its route, and the session, key and `waitMillis` it names.
    pub fn request(&self) -> Request<'a> {
        self.request
    }

    /// The caller's timeout for the call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends the call on with its own timeout.
    pub async fn send(self) -> Answer {
        let timeout = self.timeout;
        self.send_within(timeout).await
    }

    /// Sends the call on with `timeout` instead (what is left after a wait of the
    /// intercept's own).
    pub async fn send_within(self, timeout: Duration) -> Answer {
        self.inner.send(self.request, timeout).await
    }
}

/// Decides around every call an [`Intercepted`] transport makes.
pub trait Intercept: MaybeSend + MaybeSync {
    /// Makes `call`: sending it passes it on to the inner transport; not sending it fails
    /// the call without reaching the inner transport.
    fn around<'a>(&'a self, call: Outgoing<'a>) -> impl Future<Output = Answer> + MaybeSend;
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
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Answer {
        let inner = &*self.inner;
        let call = Outgoing {
            inner,
            request,
            timeout,
        };
        self.intercept.around(call).await
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::sync::Mutex;

    use futures::executor::block_on;
    use lock_api::{AcquireRequest, ErrorCode, OpenSessionRequest, ReleaseRequest};

    use super::*;
    use crate::transport::{Call, Route, ScriptedTransport, SessionRef, TransportExt};

    /// Records what it saw, one line a call, and refuses L7 without sending it.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Intercept for Recorder {
        async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
            let request = call.request();
            let (route, session, key) = (request.route(), request.session_id(), request.key());
            let (wait, timeout) = (request.wait_millis(), call.timeout());
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
            let opened = opened.unwrap();
            let id = opened.session_id.clone();
            let session = SessionRef {
                id: &opened.session_id,
                holder_id: &opened.holder_id,
            };
            t.heartbeat(session, hop).await.unwrap();
            let acquire = AcquireRequest {
                value: None,
                session_id: id.clone(),
                ttl_millis: None,
                wait_millis: Some(250),
                mode: None,
                limit: None,
            };
            t.acquire("k", &acquire, hop).await.unwrap_err();
            t.session_status(session, hop).await.unwrap_err();
            let release = ReleaseRequest {
                fencing_token: 1,
                session_id: None,
            };
            t.release("k", &release, hop).await.unwrap();
            t.read_lock("k", hop).await.unwrap_err();
            t.close_session(session, hop).await.unwrap();
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
