//! The request seam: one method per HTTP call of contract C3 (L1–L7). Implementations:
//! `native::HttpTransport` (reqwest), the wasm fetch transport, and, with feature
//! `test-util`, the scripted transport for unit tests (`ScriptedTransport`) and the simulated
//! lock service of `sim`. What sits in front of a transport (fault injection, a test kit's
//! partitions, the dashboard's wait lanes) is an [`Intercept`] inside [`Intercepted`].
//!
//! Keys are passed decoded; an HTTP implementation percent-encodes them with
//! [`lock_api::limits::encode_key`]. Every call carries the timeout the caller budgeted for
//! it: the implementation should abort the request after it (so the connection is not left
//! hanging), and the SDK additionally races every call against the same timeout on its
//! [`crate::clock::Clock`], so a transport that ignores it cannot stretch a deadline.
//! Status mapping: 2xx → `Ok`, anything else → [`TransportError::from_status`]; HTTP
//! transports share it through [`http_answer`].

use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest,
    ReleaseRequest, SessionOpened, SessionStatus,
};

use crate::clock::{timeout, Clock};
use crate::error::TransportError;
use crate::spawn::{MaybeSend, MaybeSync};

/// The answer mapping every HTTP transport shares: a 2xx answer passes its body text on to
/// be decoded as the success type; any other status becomes a [`TransportError`] via
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

mod intercept;
pub use intercept::{Answer, Intercept, Intercepted, Outgoing, Route};

#[cfg(any(test, feature = "test-util"))]
mod scripted;
#[cfg(any(test, feature = "test-util"))]
pub use scripted::{Call, ScriptedTransport};

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::ErrorCode;

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
        // Not the lock service's answer: no contract code, and never the page as a message.
        let err = http_answer(502, "<html>bad gateway</html>", json_body).unwrap_err();
        assert!(
            matches!(err, TransportError::Unexpected { status: 502, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains("html"), "{err}");
        let err = http_answer(503, "", json_body).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::NotLeader));
        // The transport's decoder decides what counts as a contract body.
        let err = http_answer(409, contract, |_| None).unwrap_err();
        assert!(
            matches!(err, TransportError::Unexpected { status: 409, .. }),
            "{err:?}"
        );
    }
}
