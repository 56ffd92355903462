//! [`FetchTransport`]: the [`Transport`] seam (L1–L9) over the platform `fetch`; what each
//! call is over HTTP comes from [`crate::transport::http`].
//!
//! Bodies go through the platform's `JSON.parse`/`JSON.stringify` and the hand-written
//! readers of [`super::wire`] rather than serde_json or serde-wasm-bindgen: same contract
//! types, but the module carries no second JSON parser and no float formatter (serde's error
//! text links one in).

use std::time::Duration;

use lock_api::{
    AcquireRequest, ErrorBody, HeartbeatRequest, LockMode, OpenSessionRequest, ProclaimRequest,
    ReleaseRequest,
};

use crate::error::{LockError, TransportError};
use crate::transport::http::{Body, ReadJson};
use crate::transport::{http_answer, Answer, Request, Transport};

use super::fetch::{exchange, Headers, Reply};
use super::trace_context::TraceContexts;
use super::wire::{FromJs, JsObject};

/// Speaks contract C3 to one lock-server base URL (`http://127.0.0.1:7878`, no trailing
/// slash needed). Each call is one `fetch` with its own timeout; statuses map through
/// [`http_answer`] like the native transport's.
#[derive(Clone)]
pub struct FetchTransport {
    base: String,
    /// `Bearer <token>` for a server with an auth file.
    authorization: Option<String>,
    /// The `traceparent` of each request, when the npm package's tracing sets them.
    traces: Option<TraceContexts>,
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
            traces: None,
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

    /// Sends with each request the `traceparent` `traces` holds for it (the npm package's
    /// tracing sets them per session and per call).
    pub fn with_traces(mut self, traces: TraceContexts) -> Self {
        self.traces = Some(traces);
        self
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        headers: Headers<'_>,
        timeout: Duration,
    ) -> Result<Reply, TransportError> {
        let url = format!("{}{path}", self.base);
        let headers = Headers {
            authorization: self.authorization.as_deref(),
            ..headers
        };
        let reply = exchange(method, &url, body.as_deref(), headers, timeout).await?;
        http_answer(reply.status, &reply.body, wire_error)?;
        Ok(reply)
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

/// L2's body (sent only with `since`).
fn heartbeat_body(request: &HeartbeatRequest) -> Option<String> {
    JsObject::default()
        .opt_text("since", request.since.as_deref())
        .to_json()
}

/// L4's body.
fn acquire_body(request: &AcquireRequest) -> Option<String> {
    let AcquireRequest {
        session_id,
        ttl_millis,
        wait_millis,
        mode,
        limit,
        value,
    } = request;
    JsObject::default()
        .text("sessionId", session_id)
        .opt_number("ttlMillis", *ttl_millis)
        .opt_number("waitMillis", *wait_millis)
        .opt_text("mode", mode.map(LockMode::as_str))
        .opt_number("limit", limit.map(u64::from))
        .opt_text("value", value.as_deref())
        .to_json()
}

/// L9's body.
fn proclaim_body(request: &ProclaimRequest) -> Option<String> {
    let ProclaimRequest {
        session_id,
        fencing_token,
        value,
    } = request;
    JsObject::default()
        .text("sessionId", session_id)
        .number("fencingToken", *fencing_token)
        .text("value", value)
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

/// A request's body as JSON text.
fn body_json(body: Body<'_>) -> Option<String> {
    match body {
        Body::OpenSession(request) => open_session_body(request),
        Body::Heartbeat(request) => heartbeat_body(request),
        Body::Acquire(request) => acquire_body(request),
        Body::Release(request) => release_body(request),
        Body::Proclaim(request) => proclaim_body(request),
    }
}

/// Reads answers with [`decode`].
struct PlatformJson;

impl<T: FromJs> ReadJson<T> for PlatformJson {
    fn read(&self, text: &str) -> Result<T, String> {
        decode(text)
    }
}

#[async_trait::async_trait(?Send)]
impl Transport for FetchTransport {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Answer {
        let (method, path) = (request.method().as_str(), request.path());
        let body = request.body().and_then(body_json);
        let traceparent = self.traces.as_ref().and_then(|t| t.for_request(&request));
        let headers = Headers {
            traceparent: traceparent.as_deref(),
            session_id: request.session_header(),
            ..Headers::default()
        };
        let reply = self.call(method, &path, body, headers, timeout).await?;
        request.read_reply(&reply.body, &PlatformJson)
    }
}

// Run with `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test
// -p lock-wasm --target wasm32-unknown-unknown --lib` (Node).
#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    /// The L4 body the platform's transport writes is the one the native transport (serde)
    /// writes, in both modes: an exclusive acquire carries no `mode` and no `limit`.
    #[wasm_bindgen_test]
    fn acquire_bodies_are_serdes_in_both_modes() {
        let exclusive = AcquireRequest {
            session_id: "s".into(),
            ttl_millis: Some(5_000),
            wait_millis: Some(0),
            mode: None,
            limit: None,
            value: None,
        };
        let shared = AcquireRequest {
            mode: Some(LockMode::Shared),
            limit: Some(3),
            ..exclusive.clone()
        };
        for request in [&exclusive, &shared] {
            assert_eq!(
                acquire_body(request).unwrap(),
                serde_json::to_string(request).unwrap()
            );
        }
        assert_eq!(
            acquire_body(&exclusive).unwrap(),
            r#"{"sessionId":"s","ttlMillis":5000,"waitMillis":0}"#
        );
    }
}
