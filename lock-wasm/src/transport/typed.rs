//! [`TransportExt`]: the nine calls, typed, over the one method of [`Transport`]. The SDK,
//! the simulation and the test and bench code call these; a transport implements only
//! [`Transport::send`].
//!
//! A reply of another call than the one sent (a custom transport's bug) is a
//! [`TransportError::Decode`], so the caller sees a malformed answer, never a panic.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use lock_api::{
    AcquireRequest, EventBatch, HeartbeatRequest, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ProclaimRequest, ReleaseRequest, SessionOpened, SessionStatus,
};

use super::{Answer, Reply, Request, Route, SessionRef, Transport};
use crate::error::TransportError;
use crate::spawn::BoxFuture;

/// The typed calls of every [`Transport`] (implemented for all of them; import the trait to
/// call them).
pub trait TransportExt: Transport {
    /// L1 `POST /v1/sessions` → 201.
    fn open_session<'a>(
        &'a self,
        request: &'a OpenSessionRequest,
        timeout: Duration,
    ) -> Typed<'a, SessionOpened> {
        Typed::new(self, Request::OpenSession(request), timeout)
    }

    /// L2 `POST /v1/sessions/{holderId}/heartbeat` without `since` → 200 with every lock.
    fn heartbeat<'a>(
        &'a self,
        session: SessionRef<'a>,
        timeout: Duration,
    ) -> Typed<'a, HeartbeatResponse> {
        const FULL: &HeartbeatRequest = &HeartbeatRequest { since: None };
        Typed::new(self, Request::Heartbeat(session, FULL), timeout)
    }

    /// L2 with `request`'s `since` → 200: every lock, what changed after it, or nothing.
    fn heartbeat_since<'a>(
        &'a self,
        session: SessionRef<'a>,
        request: &'a HeartbeatRequest,
        timeout: Duration,
    ) -> Typed<'a, HeartbeatResponse> {
        Typed::new(self, Request::Heartbeat(session, request), timeout)
    }

    /// L3 `DELETE /v1/sessions/{holderId}` → 204.
    fn close_session<'a>(&'a self, session: SessionRef<'a>, timeout: Duration) -> Typed<'a, ()> {
        Typed::new(self, Request::CloseSession(session), timeout)
    }

    /// L4 `POST /v1/locks/{key}/acquire` → 200 [`LockGrant`].
    fn acquire<'a>(
        &'a self,
        key: &'a str,
        request: &'a AcquireRequest,
        timeout: Duration,
    ) -> Typed<'a, LockGrant> {
        Typed::new(self, Request::Acquire(key, request), timeout)
    }

    /// L5 `GET /v1/sessions/{holderId}` → 200.
    fn session_status<'a>(
        &'a self,
        session: SessionRef<'a>,
        timeout: Duration,
    ) -> Typed<'a, SessionStatus> {
        Typed::new(self, Request::SessionStatus(session), timeout)
    }

    /// L6 `POST /v1/locks/{key}/release` → 204.
    fn release<'a>(
        &'a self,
        key: &'a str,
        request: &'a ReleaseRequest,
        timeout: Duration,
    ) -> Typed<'a, ()> {
        Typed::new(self, Request::Release(key, request), timeout)
    }

    /// L7 `GET /v1/locks/{key}` → 200 (advisory).
    fn read_lock<'a>(&'a self, key: &'a str, timeout: Duration) -> Typed<'a, LockState> {
        Typed::new(self, Request::ReadLock(key), timeout)
    }

    /// L8 `GET /v1/locks/{key}/events` (JSON long poll) → 200 [`EventBatch`]. `timeout` is
    /// the whole hop: the request timeout plus `wait_millis`.
    fn events<'a>(
        &'a self,
        key: &'a str,
        after: Option<&'a str>,
        wait_millis: u64,
        timeout: Duration,
    ) -> Typed<'a, EventBatch> {
        let request = Request::Events {
            key,
            after,
            wait_millis,
        };
        Typed::new(self, request, timeout)
    }

    /// L9 `POST /v1/locks/{key}/value` → 204.
    fn proclaim<'a>(
        &'a self,
        key: &'a str,
        request: &'a ProclaimRequest,
        timeout: Duration,
    ) -> Typed<'a, ()> {
        Typed::new(self, Request::Proclaim(key, request), timeout)
    }
}

impl<T: Transport + ?Sized> TransportExt for T {}

/// A sent call whose reply is taken as its answer type `T`.
pub struct Typed<'a, T> {
    route: Route,
    sent: BoxFuture<'a, Answer>,
    answer: PhantomData<fn() -> T>,
}

impl<'a, T> Typed<'a, T> {
    fn new<S>(transport: &'a S, request: Request<'a>, timeout: Duration) -> Self
    where
        S: Transport + ?Sized,
    {
        Typed {
            route: request.route(),
            sent: transport.send(request, timeout),
            answer: PhantomData,
        }
    }
}

impl<T: FromReply> Future for Typed<'_, T> {
    type Output = Result<T, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let route = self.route;
        self.sent.as_mut().poll(cx).map(|answer| {
            T::from_reply(answer?).ok_or_else(|| {
                let call = route.label();
                TransportError::Decode(format!("{call} answered with another call's reply"))
            })
        })
    }
}

/// An answer type: the [`Reply`] variant that carries it.
pub trait FromReply: Sized {
    /// The answer, if `reply` is its variant.
    fn from_reply(reply: Reply) -> Option<Self>;
}

/// One `FromReply` a line: `Type: pattern => answer`.
macro_rules! from_reply {
    ($($answer:ty: $pattern:pat => $value:expr),* $(,)?) => {$(
        impl FromReply for $answer {
            fn from_reply(reply: Reply) -> Option<Self> {
                match reply {
                    $pattern => Some($value),
                    _ => None,
                }
            }
        }
    )*};
}

from_reply! {
    SessionOpened: Reply::Opened(opened) => opened,
    HeartbeatResponse: Reply::Renewed(renewed) => renewed,
    (): Reply::Done => (),
    LockGrant: Reply::Granted(grant) => grant,
    SessionStatus: Reply::Status(status) => status,
    LockState: Reply::Lock(state) => state,
    EventBatch: Reply::Events(batch) => batch,
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use futures::executor::block_on;

    use super::*;

    /// A broken transport: answers every call with one fixed reply.
    struct Answers(Reply);

    #[async_trait::async_trait]
    impl Transport for Answers {
        async fn send(&self, _: Request<'_>, _: Duration) -> Result<Reply, TransportError> {
            Ok(self.0.clone())
        }
    }

    fn malformed<T: std::fmt::Debug>(answer: Result<T, TransportError>, call: &str) {
        match answer {
            Err(TransportError::Decode(message)) => assert!(message.starts_with(call), "{message}"),
            other => panic!("{call}: expected a malformed answer, got {other:?}"),
        }
    }

    #[test]
    fn a_reply_of_another_call_is_a_malformed_answer_not_a_panic() {
        let t = Answers(Reply::Done);
        let hop = Duration::from_secs(1);
        let acquire = AcquireRequest {
            value: None,
            session_id: "s1".into(),
            ttl_millis: None,
            wait_millis: None,
            mode: None,
            limit: None,
        };
        block_on(async {
            malformed(
                t.open_session(&OpenSessionRequest::default(), hop).await,
                "L1",
            );
            malformed(t.heartbeat(S1, hop).await, "L2");
            malformed(t.acquire("k", &acquire, hop).await, "L4");
            malformed(t.session_status(S1, hop).await, "L5");
            malformed(t.read_lock("k", hop).await, "L7");
            let state = LockState {
                key: "k".into(),
                mode: None,
                holder: None,
                holders: Vec::new(),
                limit: None,
                waiter_count: 0,
            };
            let t = Answers(Reply::Lock(state.clone()));
            malformed(t.close_session(S1, hop).await, "L3");
            let release = ReleaseRequest {
                fencing_token: 1,
                session_id: None,
            };
            malformed(t.release("k", &release, hop).await, "L6");
            // The matching reply is the answer.
            assert_eq!(t.read_lock("k", hop).await, Ok(state));
        });
    }

    const S1: SessionRef<'static> = SessionRef {
        id: "s1",
        holder_id: "h1",
    };

    #[test]
    fn an_error_passes_through_as_it_is() {
        struct Fails;
        #[async_trait::async_trait]
        impl Transport for Fails {
            async fn send(&self, _: Request<'_>, t: Duration) -> Result<Reply, TransportError> {
                Err(TransportError::Timeout(t))
            }
        }
        let hop = Duration::from_millis(5);
        let answer = block_on(Fails.heartbeat(S1, hop));
        assert_eq!(answer, Err(TransportError::Timeout(hop)));
    }
}
