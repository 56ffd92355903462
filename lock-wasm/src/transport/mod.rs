//! The request seam: one method, [`Transport::send`], taking a [`Request`] — one of the HTTP
//! calls of contract C3 (L1–L7) — and answering its [`Reply`]; the SDK calls the seven typed
//! methods of [`TransportExt`] over it. Implementations: `native::HttpTransport` (reqwest),
//! the wasm fetch transport (both read method, path, body and answer type off the request:
//! [`http`]), and, with feature `test-util`, the scripted transport for unit tests
//! (`ScriptedTransport`) and the simulated lock service of `sim`. What sits in front of a
//! transport (fault injection, a test kit's partitions, the dashboard's wait lanes) is an
//! [`Intercept`] inside [`Intercepted`].
//!
//! Keys are passed decoded; an HTTP implementation percent-encodes them (the paths of
//! [`Request::path`] do). Every call carries the timeout the caller budgeted for it: the
//! implementation should abort the request after it (so the connection is not left
//! hanging), and the SDK additionally races every call against the same timeout on its
//! [`crate::clock::Clock`], so a transport that ignores it cannot stretch a deadline.
//! Status mapping: 2xx → `Ok`, anything else → [`TransportError::from_status`]; HTTP
//! transports share it through [`http_answer`].

use std::time::Duration;

use crate::clock::{timeout, Clock};
use crate::error::TransportError;
use crate::spawn::{MaybeSend, MaybeSync};

/// Runs a transport call under a timeout on `clock` (the transport is told the same timeout;
/// this makes it binding even if the transport ignores it).
pub(crate) async fn call<T>(
    clock: &dyn Clock,
    hop: Duration,
    fut: impl std::future::Future<Output = Result<T, TransportError>>,
) -> Result<T, TransportError> {
    timeout(clock, hop, fut)
        .await
        .unwrap_or(Err(TransportError::Timeout(hop)))
}

/// The seam every call of contract C3 goes through. A custom transport implements `send`
/// with `#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]` and
/// `#[cfg_attr(not(target_arch = "wasm32"), async_trait)]` (see [`crate::spawn`]), answering
/// each [`Request`] with its own [`Reply`] variant (the one its doc names); callers use the
/// typed methods of [`TransportExt`], which treat any other reply as a malformed answer.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Transport: MaybeSend + MaybeSync {
    /// Sends `request`, aborting after `timeout`: its 2xx answer's body, or why there is none.
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Result<Reply, TransportError>;
}

pub mod http;
pub use http::http_answer;

mod request;
pub use request::{Answer, Reply, Request, Route, SessionRef};

mod typed;
pub use typed::{FromReply, TransportExt, Typed};

mod intercept;
pub use intercept::{Intercept, Intercepted, Outgoing};

#[cfg(any(test, feature = "test-util"))]
mod scripted;
#[cfg(any(test, feature = "test-util"))]
pub use scripted::{Call, ScriptedTransport};
