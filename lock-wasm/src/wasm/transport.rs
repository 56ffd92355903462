//! [`FetchTransport`]: the [`Transport`] seam (L1–L7) over the platform `fetch`.
//!
//! Bodies go through the platform's `JSON.parse`/`JSON.stringify` and the hand-written
//! readers of [`super::wire`] rather than serde_json or serde-wasm-bindgen: same contract
//! types, but the module carries no second JSON parser and no float formatter (serde's error
//! text links one in).

use std::time::Duration;

use lock_api::paths;
use lock_api::{
    AcquireRequest, ErrorBody, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest,
    ReleaseRequest, SessionOpened, SessionStatus,
};

use wasm_bindgen::{JsCast, JsValue};

use crate::error::{LockError, TransportError};
use crate::transport::{http_answer, Transport};

use super::fetch::{exchange, FetchError, Reply};
use super::wire::{FromJs, JsObject};

/// Speaks contract C3 to one lock-server base URL (`http://127.0.0.1:7878`, no trailing
/// slash needed). Each call is one `fetch` with its own timeout; statuses map through
/// [`http_answer`] like the native transport's.
#[derive(Clone)]
pub struct FetchTransport {
    base: String,
    /// `Bearer <token>` for a server with an auth file.
    authorization: Option<String>,
    /// `(method, path) => headers | undefined`, asked before each request.
    request_headers: Option<js_sys::Function>,
}

impl std::fmt::Debug for FetchTransport {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchTransport")
            .field("base", &self.base)
            .field("token", &self.authorization.as_ref().map(|_| ".."))
            .finish()
    }
}

impl FetchTransport {
    /// A transport for `base_url`.
    pub fn new(base_url: &str) -> Self {
        FetchTransport {
            base: base_url.trim_end_matches('/').to_owned(),
            authorization: None,
            request_headers: None,
        }
    }

    /// Sends `Authorization: Bearer <token>` with every request: the token of a client of
    /// the server's auth file. A token that cannot be one (see
    /// [`lock_api::limits::validate_token`]) is a VALIDATION_FAILED on `token`.
    pub fn with_token(mut self, token: &str) -> Result<Self, LockError> {
        lock_api::limits::validate_token(token).map_err(|message| LockError::Validation {
            field: "token".to_owned(),
            message,
        })?;
        self.authorization = Some(format!("Bearer {token}"));
        Ok(self)
    }

    /// The `Authorization` header value it sends, if any (for the dashboard's own requests).
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// Asks `headers(method, path)` before each request for extra headers to send: a plain
    /// object of name → value, or `undefined` for none (the npm package's tracing passes
    /// the `traceparent` of the span a request belongs to). A callback that throws or
    /// answers anything but an object adds nothing.
    pub fn with_request_headers(mut self, headers: js_sys::Function) -> Self {
        self.request_headers = Some(headers);
        self
    }

    fn extra_headers(&self, method: &str, path: &str) -> Option<js_sys::Object> {
        let callback = self.request_headers.as_ref()?;
        let answer = callback
            .call2(&JsValue::NULL, &method.into(), &path.into())
            .ok()?;
        answer.dyn_into::<js_sys::Object>().ok()
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> Result<Reply, TransportError> {
        let url = format!("{}{path}", self.base);
        let extra = self.extra_headers(method, path);
        let reply = exchange(
            method,
            &url,
            body.as_deref(),
            self.authorization.as_deref(),
            extra.as_ref(),
            timeout,
        )
        .await
        .map_err(|err| match err {
            FetchError::Timeout => TransportError::Timeout(timeout),
            FetchError::Network(message) => TransportError::Network(message),
        })?;
        http_answer(reply.status, &reply.body, wire_error)?;
        Ok(reply)
    }

    async fn json<T: FromJs>(
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

/// `JSON.parse` then [`FromJs`] into a contract type.
fn decode<T: FromJs>(text: &str) -> Result<T, String> {
    let value = js_sys::JSON::parse(text).map_err(|_| "body is not JSON".to_owned())?;
    // A fixed message: a body of the wrong shape is a server bug whatever the detail.
    T::from_js(&value).ok_or_else(|| "body does not match the contract".to_owned())
}

// The bodies destructure their request type, so a field added to it in lock-api fails to
// compile here until the body writes it.

/// L1's body.
fn open_session_body(request: &OpenSessionRequest) -> Option<String> {
    let OpenSessionRequest { ttl_millis, owner } = request;
    JsObject::default()
        .opt_number("ttlMillis", *ttl_millis)
        .opt_text("owner", owner.as_deref())
        .to_json()
}

/// L4's body.
fn acquire_body(request: &AcquireRequest) -> Option<String> {
    let AcquireRequest {
        session_id,
        ttl_millis,
        wait_millis,
    } = request;
    JsObject::default()
        .text("sessionId", session_id)
        .opt_number("ttlMillis", *ttl_millis)
        .opt_number("waitMillis", *wait_millis)
        .to_json()
}

/// L6's body.
fn release_body(request: &ReleaseRequest) -> Option<String> {
    let ReleaseRequest {
        fencing_token,
        session_id,
    } = request;
    JsObject::default()
        .number("fencingToken", *fencing_token)
        .opt_text("sessionId", session_id.as_deref())
        .to_json()
}

/// Decodes a contract error body for [`http_answer`], which maps a body this rejects.
fn wire_error(text: &str) -> Option<ErrorBody> {
    decode(text).ok()
}

#[async_trait::async_trait(?Send)]
impl Transport for FetchTransport {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.json("POST", paths::SESSIONS, open_session_body(request), timeout)
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
        self.json("POST", &paths::acquire(key), acquire_body(request), timeout)
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
        self.call("POST", &paths::release(key), release_body(request), timeout)
            .await
            .map(drop)
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.json("GET", &paths::lock(key), None, timeout).await
    }
}
