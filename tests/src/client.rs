//! A small typed async HTTP client for the C3 surfaces, used by the e2e tests.
//!
//! Every method returns a [`Reply`] (status + raw JSON) so tests can assert on error codes;
//! the `*_ok` helpers unwrap the happy path into `lock-api` types.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use lock_api::limits::WAIT_MILLIS_MAX;
use lock_api::paths;
use lock_api::{
    ErrorBody, HeartbeatResponse, LedgerEntries, LockGrant, LockState, SessionOpened,
    UnfencedAppended,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// The holder ids of the sessions this process opened, by session id. L2, L3 and L5 name a
/// session by its holder id in the path and carry its id in a header, and the tests name
/// sessions by id: every 201 to L1 through [`Api`] is remembered here (sessions opened
/// another way, by the SDK, with [`remember_session`]).
static HOLDER_IDS: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Mutex::default);

/// The holder id sent for a session id this process never opened: names no session, so
/// the server answers 404 SESSION_NOT_FOUND, as for an unknown id.
pub const UNKNOWN_HOLDER_ID: &str = "00000000000000000000000000000000";

/// Remembers a session opened without [`Api`] (by the SDK), so L2, L3 and L5 can name it.
pub fn remember_session(session_id: &str, holder_id: &str) {
    HOLDER_IDS
        .lock()
        .unwrap()
        .insert(session_id.to_owned(), holder_id.to_owned());
}

/// The holder id of `session_id` if this process opened it, else [`UNKNOWN_HOLDER_ID`].
pub fn holder_id_of(session_id: &str) -> String {
    HOLDER_IDS
        .lock()
        .unwrap()
        .get(session_id)
        .cloned()
        .unwrap_or_else(|| UNKNOWN_HOLDER_ID.to_owned())
}

/// One HTTP answer: status, headers of interest and the body parsed as JSON (`Null` if empty
/// or not JSON; `text` keeps the raw body).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub content_type: Option<String>,
    pub retry_after: Option<String>,
    pub allow: Option<String>,
    pub connection: Option<String>,
    pub www_authenticate: Option<String>,
    /// The HTTP version the answer came over.
    pub version: reqwest::Version,
}

impl Reply {
    /// The error body's `code`, if any.
    pub fn code(&self) -> Option<&str> {
        self.body.get("code").and_then(Value::as_str)
    }

    /// Parses the body into `T`, panicking with the reply on mismatch.
    pub fn parse<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.body.clone())
            .unwrap_or_else(|e| panic!("cannot parse {self:?}: {e}"))
    }

    /// The body as a contract error body.
    pub fn error(&self) -> ErrorBody {
        self.parse()
    }

    /// Asserts status and error code, and that the body is a well-formed JSON error body.
    pub fn assert_error(&self, status: u16, code: &str) -> ErrorBody {
        assert_eq!(self.status, status, "unexpected status: {self:?}");
        assert_eq!(self.code(), Some(code), "unexpected code: {self:?}");
        assert!(
            self.content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("application/json")),
            "error body must be JSON: {self:?}"
        );
        self.error()
    }

    /// Asserts a well-formed 503 NOT_LEADER: a retry hint of at most 5 s in the body
    /// (`retryAfterMillis`) and in the `retry-after` header.
    pub fn assert_not_leader(&self) -> ErrorBody {
        let body = self.assert_error(503, "NOT_LEADER");
        assert!(
            body.retry_after_millis.is_some_and(|m| m > 0 && m <= 5_000),
            "retryAfterMillis must be in 1..=5000: {self:?}"
        );
        assert!(self.retry_after.is_some(), "retry-after header: {self:?}");
        body
    }

    /// Asserts a well-formed 503 STORE_UNAVAILABLE: a `reason` from the contract's closed
    /// set, a retry hint of at most 5 s in the body and the `retry-after` header, and a
    /// message that names no path or address; returns the reason.
    pub fn assert_store_unavailable(&self) -> lock_api::Unavailability {
        let body = self.assert_error(503, "STORE_UNAVAILABLE");
        let reason = body
            .reason
            .as_deref()
            .and_then(lock_api::Unavailability::from_label)
            .unwrap_or_else(|| panic!("reason from the closed set: {self:?}"));
        assert!(
            body.retry_after_millis.is_some_and(|m| m > 0 && m <= 5_000),
            "retryAfterMillis must be in 1..=5000: {self:?}"
        );
        assert!(self.retry_after.is_some(), "retry-after header: {self:?}");
        assert!(
            !body.message.contains('/') && !body.message.contains("127.0.0.1"),
            "the message names no path or address: {self:?}"
        );
        reason
    }
}

/// Bound on one request, answer included: the longest server-side wait C3 allows plus a
/// generous margin for a loaded machine. Only a request nobody answers runs into it (a
/// stalled server, or another process that took a dead server's port); it then fails with a
/// transport error instead of hanging the suite.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(WAIT_MILLIS_MAX + 30_000);

/// Bound on opening a connection (loopback: refused or accepted at once, unless a listen
/// queue is full).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Typed client for one server.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    admin_token: Option<String>,
    /// Sent as `Authorization: Bearer` on every request that sets no `authorization` of its
    /// own (a client of the server's auth file).
    token: Option<String>,
    http: reqwest::Client,
}

/// Idle connections a pooled client keeps per host.
pub const POOL: usize = 64;

/// A reqwest client keeping up to `idle` idle connections per host (0: a new connection per
/// request, for a server whose short idle bound would close pooled connections under a
/// request being sent). With `ca`, https trusts that CA only, and ALPN offers `h2`.
pub fn http_client(ca: Option<&Path>, idle: usize) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT);
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).expect("read CA");
        let cert = reqwest::Certificate::from_pem(&pem).expect("CA PEM");
        builder = builder
            .tls_built_in_root_certs(false)
            .add_root_certificate(cert);
    }
    builder.build().expect("reqwest client")
}

impl Api {
    /// A pooled client for a plain-HTTP `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: String, admin_token: Option<String>) -> Api {
        Api::with_client(base, admin_token, http_client(None, POOL))
    }

    /// A client for `base` over `http` (see [`http_client`]).
    pub fn with_client(base: String, admin_token: Option<String>, http: reqwest::Client) -> Api {
        Api {
            base,
            admin_token,
            token: None,
            http,
        }
    }

    /// The same client, calling as the auth-file client whose bearer token is `token`.
    pub fn with_token(&self, token: &str) -> Api {
        Api {
            token: Some(token.to_string()),
            ..self.clone()
        }
    }

    /// The HTTP client, for requests the typed methods do not cover.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The auth-file client's bearer token this client calls with, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Any request with an optional raw body; the building block of everything else.
    /// Panics when the request cannot be sent (server down): tests expect it up.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Reply {
        self.try_raw(method, path, body, headers)
            .await
            .expect("request failed")
    }

    /// Like [`Api::raw`], but a transport failure (server restarting) is an `Err`.
    pub async fn try_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, reqwest::Error> {
        let opens = method == "POST" && path == paths::SESSIONS;
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        let own_auth = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        if let (Some(token), false) = (&self.token, own_auth) {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let version = resp.version();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header("content-type");
        let retry_after = header("retry-after");
        let allow = header("allow");
        let connection = header("connection");
        let www_authenticate = header("www-authenticate");
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        if opens && status == 201 {
            if let Ok(opened) = serde_json::from_value::<SessionOpened>(body.clone()) {
                remember_session(&opened.session_id, &opened.holder_id);
            }
        }
        Ok(Reply {
            status,
            body,
            text,
            content_type,
            retry_after,
            allow,
            connection,
            www_authenticate,
            version,
        })
    }

    /// A JSON request that may fail at the transport level.
    pub async fn try_json(
        &self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<Reply, reqwest::Error> {
        self.try_raw(method, path, Some(body.to_string().into_bytes()), &[])
            .await
    }

    /// A JSON request.
    pub async fn json(&self, method: &str, path: &str, body: &Value) -> Reply {
        self.raw(method, path, Some(body.to_string().into_bytes()), &[])
            .await
    }

    /// L1 with an explicit body.
    pub async fn open_session_with(&self, body: Value) -> Reply {
        self.json("POST", "/v1/sessions", &body).await
    }

    /// L1 with a TTL; panics unless 201.
    pub async fn open_session(&self, ttl_millis: u64) -> SessionOpened {
        let reply = self
            .open_session_with(json!({ "ttlMillis": ttl_millis }))
            .await;
        assert_eq!(reply.status, 201, "{reply:?}");
        reply.parse()
    }

    /// L2 `session_id` names (its holder id in the path, its id in the header).
    pub async fn heartbeat(&self, session_id: &str) -> Reply {
        self.session_call("POST", session_id, None).await
    }

    /// L2, L3 or L5 (by `method`) of `session_id`, with `body`.
    pub async fn session_call(
        &self,
        method: &str,
        session_id: &str,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let holder_id = holder_id_of(session_id);
        let path = match method {
            "POST" => paths::heartbeat(&holder_id),
            _ => paths::session(&holder_id),
        };
        let header = [(paths::SESSION_ID_HEADER, session_id)];
        self.raw(method, &path, body, &header).await
    }

    /// L2; panics unless 200.
    pub async fn heartbeat_ok(&self, session_id: &str) -> HeartbeatResponse {
        let reply = self.heartbeat(session_id).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    }

    /// L3.
    pub async fn close_session(&self, session_id: &str) -> Reply {
        self.session_call("DELETE", session_id, None).await
    }

    /// L5.
    pub async fn session_status(&self, session_id: &str) -> Reply {
        self.session_call("GET", session_id, None).await
    }

    /// L4 with explicit fields.
    pub async fn acquire(
        &self,
        key: &str,
        session_id: &str,
        ttl_millis: Option<u64>,
        wait_millis: Option<u64>,
    ) -> Reply {
        let mut body = json!({ "sessionId": session_id });
        if let Some(ttl) = ttl_millis {
            body["ttlMillis"] = json!(ttl);
        }
        if let Some(wait) = wait_millis {
            body["waitMillis"] = json!(wait);
        }
        self.json("POST", &paths::acquire(key), &body).await
    }

    /// L4 of a shared hold (`mode: "shared"`, with `limit` when given).
    pub async fn acquire_shared(
        &self,
        key: &str,
        session_id: &str,
        limit: Option<u32>,
        wait_millis: Option<u64>,
    ) -> Reply {
        let mut body = json!({ "sessionId": session_id, "ttlMillis": 30_000, "mode": "shared" });
        if let Some(limit) = limit {
            body["limit"] = json!(limit);
        }
        if let Some(wait) = wait_millis {
            body["waitMillis"] = json!(wait);
        }
        self.json("POST", &paths::acquire(key), &body).await
    }

    /// L4; panics unless 200.
    pub async fn acquire_ok(&self, key: &str, session_id: &str, ttl_millis: u64) -> LockGrant {
        let reply = self.acquire(key, session_id, Some(ttl_millis), None).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    }

    /// L6.
    pub async fn release(&self, key: &str, fencing_token: u64, session_id: Option<&str>) -> Reply {
        let mut body = json!({ "fencingToken": fencing_token });
        if let Some(id) = session_id {
            body["sessionId"] = json!(id);
        }
        self.json("POST", &paths::release(key), &body).await
    }

    /// L7, any answer.
    pub async fn lock_state_reply(&self, key: &str) -> Reply {
        self.raw("GET", &paths::lock(key), None, &[]).await
    }

    /// L7; panics unless 200.
    pub async fn lock_state(&self, key: &str) -> LockState {
        let reply = self.lock_state_reply(key).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    }

    /// R1 with the configured admin token (or none).
    pub async fn revoke(&self, key: &str, reason: &str) -> Reply {
        let auth = self.admin_token.as_ref().map(|t| format!("Bearer {t}"));
        self.revoke_with_auth(key, reason, auth.as_deref()).await
    }

    /// R1 of the one hold with `fencing_token`, with the configured admin token.
    pub async fn revoke_hold(&self, key: &str, reason: &str, fencing_token: u64) -> Reply {
        let auth = self.admin_token.as_ref().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth
            .as_deref()
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        let body = json!({ "reason": reason, "fencingToken": fencing_token });
        self.raw(
            "POST",
            &paths::revoke(key),
            Some(body.to_string().into_bytes()),
            &headers,
        )
        .await
    }

    /// R1 with an explicit `Authorization` header value.
    pub async fn revoke_with_auth(&self, key: &str, reason: &str, auth: Option<&str>) -> Reply {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
        self.raw(
            "POST",
            &paths::revoke(key),
            Some(json!({ "reason": reason }).to_string().into_bytes()),
            &headers,
        )
        .await
    }

    /// Demo ledger append.
    pub async fn ledger_append(&self, key: &str, fencing_token: u64, entry: &str) -> Reply {
        self.json(
            "POST",
            &paths::ledger(key),
            &json!({ "fencingToken": fencing_token, "entry": entry }),
        )
        .await
    }

    /// Demo ledger read, any answer.
    pub async fn ledger_read_reply(&self, key: &str) -> Reply {
        self.raw("GET", &paths::ledger(key), None, &[]).await
    }

    /// Demo ledger read; panics unless 200.
    pub async fn ledger_read(&self, key: &str) -> LedgerEntries {
        let reply = self.ledger_read_reply(key).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    }

    /// Unfenced demo ledger append, any answer.
    pub async fn unfenced_append(&self, key: &str, fencing_token: u64, entry: &str) -> Reply {
        self.json(
            "POST",
            &paths::unfenced_ledger(key),
            &json!({ "fencingToken": fencing_token, "entry": entry }),
        )
        .await
    }

    /// Unfenced demo ledger append; panics unless 200, answers `stale`.
    pub async fn unfenced_append_ok(&self, key: &str, fencing_token: u64, entry: &str) -> bool {
        let reply = self.unfenced_append(key, fencing_token, entry).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse::<UnfencedAppended>().stale
    }

    /// Unfenced demo ledger read, any answer.
    pub async fn unfenced_read_reply(&self, key: &str) -> Reply {
        self.raw("GET", &paths::unfenced_ledger(key), None, &[])
            .await
    }

    /// Unfenced demo ledger read; panics unless 200.
    pub async fn unfenced_read(&self, key: &str) -> LedgerEntries {
        let reply = self.unfenced_read_reply(key).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    }

    /// `GET /metrics` text.
    pub async fn metrics(&self) -> String {
        self.raw("GET", "/metrics", None, &[]).await.text
    }
}
