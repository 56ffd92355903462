//! Native runtime for the SDK (feature `native`, non-wasm targets): tokio clock and spawner,
//! a reqwest HTTP transport and an OS-seeded per-call RNG, so Rust services, the e2e tests
//! and the bench harness run the same core against a real server.

use std::sync::Arc;
use std::time::Duration;

use lock_api::paths;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use serde::de::DeserializeOwned;

use crate::backoff::RngSource;
use crate::clock::Clock;
use crate::error::{LockError, TransportError};
use crate::session::LockClient;
use crate::spawn::{BoxFuture, Spawner};
use crate::transport::http::{Method, ReadJson};
use crate::transport::{http_answer, Answer, Request, Transport};

/// Monotonic time from `tokio::time::Instant` (so tokio's paused test clock applies too).
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    // The seam's implementation: the one place natively that reads tokio's clock.
    #[allow(clippy::disallowed_methods)]
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

// The seam's implementation: the one place natively that reads and sleeps on tokio's clock.
#[allow(clippy::disallowed_methods)]
impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Spawns onto the current tokio runtime.
pub struct TokioSpawner;

impl Spawner for TokioSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        tokio::spawn(task);
    }
}

/// A fresh [`SmallRng`] per acquire, seeded from the OS: fast, and never shared between
/// concurrent acquires.
pub struct OsRngSource;

impl RngSource for OsRngSource {
    // The seam's implementation: the one place natively that draws from the OS.
    #[allow(clippy::disallowed_methods)]
    fn rng(&self) -> SmallRng {
        // getrandom only fails on platforms without an entropy source; fall back to a fixed
        // seed there rather than failing the acquire (the jitter is for spreading, not secrecy).
        SmallRng::seed_from_u64(getrandom::u64().unwrap_or(0x5eed))
    }
}

/// L1–L7 over HTTP with reqwest, against `base_url` (e.g. `http://127.0.0.1:7070`, or
/// `https://…`: rustls trusting the system's root certificates, HTTP/2 when the server offers
/// it; a private CA with [`HttpTransport::with_root_ca`]).
pub struct HttpTransport {
    base_url: String,
    http: reqwest::Client,
    /// `Bearer <token>`, marked sensitive so no debug output of a request shows it.
    authorization: Option<HeaderValue>,
}

/// A root certificate [`HttpTransport::with_root_ca`] could not use.
#[derive(Debug, thiserror::Error)]
#[error("invalid root certificate: {0}")]
pub struct RootCaError(String);

impl HttpTransport {
    /// A transport for the server at `base_url` (no trailing slash needed).
    pub fn new(base_url: impl Into<String>) -> Self {
        HttpTransport {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            authorization: None,
        }
    }

    /// Sends `Authorization: Bearer <token>` with every request: the token of a client of
    /// the server's auth file. A token that cannot be one (see
    /// [`lock_api::limits::validate_token`]) is refused here, before anything is sent.
    pub fn with_token(mut self, token: &str) -> Result<Self, LockError> {
        let invalid = |message: String| LockError::validation("token", message);
        lock_api::limits::validate_token(token).map_err(invalid)?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| invalid(e.to_string()))?;
        value.set_sensitive(true);
        self.authorization = Some(value);
        Ok(self)
    }

    /// Also trusts the CA certificates in `pem` (one or more PEM blocks) for https, e.g. a
    /// `--tls-self-signed` server's `self-signed-cert.pem`; the system's roots stay trusted.
    pub fn with_root_ca(mut self, pem: &[u8]) -> Result<Self, RootCaError> {
        let certs =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| RootCaError(e.to_string()))?;
        if certs.is_empty() {
            return Err(RootCaError("no certificate in the PEM data".into()));
        }
        let builder = certs
            .into_iter()
            .fold(reqwest::Client::builder(), |b, cert| {
                b.add_root_certificate(cert)
            });
        self.http = builder.build().map_err(|e| RootCaError(e.to_string()))?;
        Ok(self)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// Sends and maps the answer: a 2xx answer's body text, else the contract error.
    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
        timeout: Duration,
    ) -> Result<String, TransportError> {
        let request = match &self.authorization {
            Some(value) => request.header(AUTHORIZATION, value.clone()),
            None => request,
        };
        let response = request
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| map_err(e, timeout))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| map_err(e, timeout))?;
        http_answer(status, &text, |body| serde_json::from_str(body).ok())?;
        Ok(text)
    }
}

/// Reads answers with serde_json.
struct SerdeJson;

impl<T: DeserializeOwned> ReadJson<T> for SerdeJson {
    fn read(&self, text: &str) -> Result<T, String> {
        if text.is_empty() {
            return Err("empty body".into());
        }
        serde_json::from_str(text).map_err(|e| e.to_string())
    }
}

fn map_err(err: reqwest::Error, timeout: Duration) -> TransportError {
    if err.is_timeout() {
        TransportError::Timeout(timeout)
    } else {
        TransportError::Network(with_causes(&err))
    }
}

/// The error and its causes, `: `-joined: reqwest's own message leaves the cause out (e.g.
/// which certificate TLS refused, or that the connection was refused).
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[async_trait::async_trait]
impl Transport for HttpTransport {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Answer {
        let method = match request.method() {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Delete => reqwest::Method::DELETE,
        };
        // JSON answers only: L8 answers its long poll rather than a server-sent stream.
        let mut http = self
            .http
            .request(method, self.url(&request.path()))
            .header(ACCEPT, "application/json");
        if let Some(session_id) = request.session_header() {
            http = http.header(paths::SESSION_ID_HEADER, session_id);
        }
        if let Some(body) = request.body() {
            http = http.json(&body);
        }
        let text = self.exchange(http, timeout).await?;
        request.read_reply(&text, &SerdeJson)
    }
}

impl LockClient {
    /// A client for the server at `base_url` on the current tokio runtime: reqwest transport,
    /// tokio clock and spawner, OS-seeded RNG.
    pub fn native(base_url: impl Into<String>) -> Self {
        LockClient::native_over(HttpTransport::new(base_url))
    }

    /// [`LockClient::native`] for a server with an auth file: every request carries
    /// `Authorization: Bearer <token>`. A malformed token is a `Validation` error on `token`;
    /// an unknown one makes every call fail with [`LockError::Unauthorized`].
    pub fn native_with_token(base_url: impl Into<String>, token: &str) -> Result<Self, LockError> {
        Ok(LockClient::native_over(
            HttpTransport::new(base_url).with_token(token)?,
        ))
    }

    /// A client over a configured [`HttpTransport`] with the other native seams.
    pub fn native_over(transport: HttpTransport) -> Self {
        LockClient::new(
            Arc::new(transport),
            Arc::new(TokioClock::new()),
            Arc::new(TokioSpawner),
            Arc::new(OsRngSource),
        )
    }
}
