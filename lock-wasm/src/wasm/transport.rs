//! [`FetchTransport`]: the [`Transport`] seam (L1–L7) over the platform `fetch`.
//!
//! Bodies go through the platform's `JSON.parse`/`JSON.stringify` and serde-wasm-bindgen
//! rather than serde_json: same contract types, but the module does not carry a second JSON
//! parser and float formatter (about a fifth of the gzipped .wasm).

use std::time::Duration;

use lock_api::paths;
use lock_api::{
    AcquireRequest, ErrorBody, ErrorCode, HeartbeatResponse, LockGrant, LockState,
    OpenSessionRequest, ReleaseRequest, SessionOpened, SessionStatus,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;

use crate::error::TransportError;
use crate::transport::{http_answer, Transport};

use super::fetch::{exchange, FetchError, Reply};

/// Speaks contract C3 to one lock-server base URL (`http://127.0.0.1:7878`, no trailing
/// slash needed). Each call is one `fetch` with its own timeout; statuses map through
/// [`http_answer`] like the native transport's.
#[derive(Debug, Clone)]
pub struct FetchTransport {
    base: String,
}

impl FetchTransport {
    /// A transport for `base_url`.
    pub fn new(base_url: &str) -> Self {
        FetchTransport {
            base: base_url.trim_end_matches('/').to_owned(),
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> Result<Reply, TransportError> {
        let url = format!("{}{path}", self.base);
        let reply = exchange(method, &url, body.as_deref(), timeout)
            .await
            .map_err(|err| match err {
                FetchError::Timeout => TransportError::Timeout(timeout),
                FetchError::Network(message) => TransportError::Network(message),
            })?;
        http_answer(reply.status, &reply.body, wire_error)?;
        Ok(reply)
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> Result<T, TransportError> {
        let reply = self.call(method, path, body, timeout).await?;
        decode(&reply.body).map_err(TransportError::Decode)
    }
}

/// `JSON.parse` then serde-wasm-bindgen into a contract type.
fn decode<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let value = js_sys::JSON::parse(text).map_err(|_| "body is not JSON".to_owned())?;
    // A fixed message, not serde's text: formatting it links float formatting into the
    // module, and a body of the wrong shape is a server bug whatever the detail.
    serde_wasm_bindgen::from_value(value).map_err(|_| "body does not match the contract".to_owned())
}

fn body(value: &impl Serialize) -> Option<String> {
    // The contract's request types always serialise (strings and safe integers only).
    let value = serde_wasm_bindgen::to_value(value).unwrap_or(JsValue::NULL);
    js_sys::JSON::stringify(&value).ok().map(String::from)
}

/// The error body fields the SDK reads; unknown details are ignored rather than kept (the
/// SDK never forwards them).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireError {
    code: ErrorCode,
    message: String,
    field: Option<String>,
    leader: Option<String>,
    retry_after_millis: Option<u64>,
    highest_token: Option<u64>,
}

/// Decodes a contract error body for [`http_answer`], which maps a body this rejects.
fn wire_error(text: &str) -> Option<ErrorBody> {
    let wire = decode::<WireError>(text).ok()?;
    let mut body = ErrorBody::new(wire.code, wire.message);
    body.field = wire.field;
    body.leader = wire.leader;
    body.retry_after_millis = wire.retry_after_millis;
    body.highest_token = wire.highest_token;
    Some(body)
}

#[async_trait::async_trait(?Send)]
impl Transport for FetchTransport {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.json("POST", paths::SESSIONS, body(request), timeout)
            .await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        self.json("POST", &paths::heartbeat(session_id), None, timeout)
            .await
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.call("DELETE", &paths::session(session_id), None, timeout)
            .await
            .map(drop)
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        self.json("POST", &paths::acquire(key), body(request), timeout)
            .await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.json("GET", &paths::session(session_id), None, timeout)
            .await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.call("POST", &paths::release(key), body(request), timeout)
            .await
            .map(drop)
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.json("GET", &paths::lock(key), None, timeout).await
    }
}
