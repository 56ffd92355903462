//! [`Request`]: one call of contract C3 (L1–L9) as a value, with what it names; [`Reply`]:
//! the answer a transport gives it; [`Route`]: which call it is.
//!
//! A transport has one method, [`super::Transport::send`], taking a `Request`: what sits in
//! front of a transport or answers in place of a server (an intercept, the scripted and the
//! simulated transports) reads what it needs off the value, and the HTTP transports read
//! their method, path and body off it ([`super::http`]).

use lock_api::{
    AcquireRequest, EventBatch, HeartbeatRequest, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ProclaimRequest, ReleaseRequest, SessionOpened, SessionStatus,
};

use crate::error::TransportError;

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
    /// L8 the key's events (the JSON long poll).
    Events,
    /// L9 replace a hold's value.
    Proclaim,
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
            Route::Events => "L8",
            Route::Proclaim => "L9",
        }
    }

    /// Whether the call changes the store (L1–L4, L6 and L9); L5, L7 and L8 only read.
    pub fn writes(self) -> bool {
        !matches!(self, Route::SessionStatus | Route::ReadLock | Route::Events)
    }
}

/// The session an L2, L3 or L5 call names: its id, the session's credential, which HTTP
/// sends in the `Lock-Session-Id` header, and its public holder id, which names it in the
/// path (a URL ends up in proxy logs and traces; a header does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRef<'a> {
    /// The session id (from L1's `sessionId`).
    pub id: &'a str,
    /// The holder id (from L1's `holderId`).
    pub holder_id: &'a str,
}

/// One call of contract C3, borrowing what it names. Keys are decoded (an HTTP transport
/// percent-encodes them through [`lock_api::paths`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Request<'a> {
    /// L1 `POST /v1/sessions` → 201 [`Reply::Opened`].
    OpenSession(&'a OpenSessionRequest),
    /// L2 `POST /v1/sessions/{holderId}/heartbeat` → 200 [`Reply::Renewed`]; the body only
    /// with `since`.
    Heartbeat(SessionRef<'a>, &'a HeartbeatRequest),
    /// L3 `DELETE /v1/sessions/{holderId}` → 204 [`Reply::Done`].
    CloseSession(SessionRef<'a>),
    /// L4 `POST /v1/locks/{key}/acquire` → 200 [`Reply::Granted`].
    Acquire(&'a str, &'a AcquireRequest),
    /// L5 `GET /v1/sessions/{holderId}` → 200 [`Reply::Status`].
    SessionStatus(SessionRef<'a>),
    /// L6 `POST /v1/locks/{key}/release` → 204 [`Reply::Done`].
    Release(&'a str, &'a ReleaseRequest),
    /// L7 `GET /v1/locks/{key}` → 200 [`Reply::Lock`] (advisory).
    ReadLock(&'a str),
    /// L8 `GET /v1/locks/{key}/events?after=<id>&waitMillis=<n>` with `Accept:
    /// application/json` → 200 [`Reply::Events`]: the events after `after` (a `snapshot`
    /// without it), waiting up to `wait_millis` for the first.
    Events {
        /// The watched key.
        key: &'a str,
        /// The id of the last event seen; `None` for a fresh watch.
        after: Option<&'a str>,
        /// How long the server may wait for the first event (0…30000).
        wait_millis: u64,
    },
    /// L9 `POST /v1/locks/{key}/value` → 204 [`Reply::Done`].
    Proclaim(&'a str, &'a ProclaimRequest),
}

impl<'a> Request<'a> {
    /// Which call it is.
    pub fn route(self) -> Route {
        match self {
            Request::OpenSession(_) => Route::OpenSession,
            Request::Heartbeat(..) => Route::Heartbeat,
            Request::CloseSession(_) => Route::CloseSession,
            Request::Acquire(..) => Route::Acquire,
            Request::SessionStatus(_) => Route::SessionStatus,
            Request::Release(..) => Route::Release,
            Request::ReadLock(_) => Route::ReadLock,
            Request::Events { .. } => Route::Events,
            Request::Proclaim(..) => Route::Proclaim,
        }
    }

    /// The session the call names: L2–L5, and L6 when its body names one.
    pub fn session_id(self) -> Option<&'a str> {
        match self {
            Request::Heartbeat(session, _)
            | Request::CloseSession(session)
            | Request::SessionStatus(session) => Some(session.id),
            Request::Acquire(_, body) => Some(&body.session_id),
            Request::Release(_, body) => body.session_id.as_deref(),
            Request::Proclaim(_, body) => Some(&body.session_id),
            Request::OpenSession(_) | Request::ReadLock(_) | Request::Events { .. } => None,
        }
    }

    /// The key the call names: L4 and L6–L9.
    pub fn key(self) -> Option<&'a str> {
        match self {
            Request::Acquire(key, _)
            | Request::Release(key, _)
            | Request::ReadLock(key)
            | Request::Proclaim(key, _)
            | Request::Events { key, .. } => Some(key),
            _ => None,
        }
    }

    /// L4's and L8's `waitMillis` (0 when absent and for every other call).
    pub fn wait_millis(self) -> u64 {
        match self {
            Request::Acquire(_, body) => body.wait_millis.unwrap_or(0),
            Request::Events { wait_millis, .. } => wait_millis,
            _ => 0,
        }
    }
}

/// A transport's answer to a [`Request`]: the success body of its call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// L1's session.
    Opened(SessionOpened),
    /// L2's renewal.
    Renewed(HeartbeatResponse),
    /// L3's, L6's and L9's: no body (204).
    Done,
    /// L4's grant.
    Granted(LockGrant),
    /// L5's session status.
    Status(SessionStatus),
    /// L7's holder read.
    Lock(LockState),
    /// L8's events.
    Events(EventBatch),
}

/// A call's answer: its [`Reply`], or why there is none.
pub type Answer = Result<Reply, TransportError>;
