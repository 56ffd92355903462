//! One HTTP exchange over the platform `fetch`, with a per-request timeout.
//!
//! The request itself is made by `fetch.js` (the same directory; wasm-bindgen ships it with
//! the module): `fetch`, the timeout's `AbortController` and `res.text()` in one JS call,
//! which wakes this side once through the shared callback of [`super::wake`] when it
//! settled. `fetch` is bound on the global object, so the same code runs in browsers, Deno,
//! Bun and Workers; the npm package's Node build puts `fetch-node.cjs` in its place, the
//! same `send` over `node:http`/`node:https` (Node's `fetch` costs more than twice as much
//! per request). Each request gets its own `AbortController`: the timeout
//! aborts it (a JS timer), and so does dropping the future (an acquire cancelled by its
//! AbortSignal must not leave a request running whose answer nobody reads).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::error::TransportError;

use super::timer::timeout_millis;
use super::wake::{self, Wait};

#[wasm_bindgen(module = "/src/wasm/fetch.js")]
extern "C" {
    /// An exchange in flight; its fields are set when it settled.
    type Exchange;

    #[allow(clippy::too_many_arguments)]
    fn send(
        method: &str,
        url: &str,
        body: Option<&str>,
        authorization: Option<&str>,
        traceparent: Option<&str>,
        session_id: Option<&str>,
        timeout_millis: f64,
        wake: &js_sys::Function,
        id: u32,
    ) -> Exchange;

    #[wasm_bindgen(method, getter)]
    fn status(this: &Exchange) -> u16;
    #[wasm_bindgen(method, getter)]
    fn body(this: &Exchange) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn error(this: &Exchange) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = timedOut)]
    fn timed_out(this: &Exchange) -> bool;
    #[wasm_bindgen(method)]
    fn cancel(this: &Exchange);
}

/// A completed exchange: any status, with the body read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// The optional headers of one exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    /// `Authorization`'s value (`Bearer <token>`).
    pub authorization: Option<&'a str>,
    /// A W3C `traceparent`.
    pub traceparent: Option<&'a str>,
    /// `Lock-Session-Id`: L2's, L3's and L5's session id, which never goes in the URL.
    pub session_id: Option<&'a str>,
}

/// Sends `method url` with an optional JSON body and `headers`, and waits for
/// status and body text: no answer within `timeout` is [`TransportError::Timeout`], a request
/// the platform refused or failed (connection refused, CORS, DNS...) [`TransportError::Network`].
pub async fn exchange(
    method: &str,
    url: &str,
    json_body: Option<&str>,
    headers: Headers<'_>,
    timeout: Duration,
) -> Result<Reply, TransportError> {
    let wait = Wait::new();
    // A foreground timer even for a heartbeat's request: it lives only while the request is
    // in flight, which keeps Node alive by itself anyway, and is cleared when the exchange
    // ends. The heartbeat's own timeout of the same call is on its background clock.
    let exchange = wake::with_callback(|wake| {
        send(
            method,
            url,
            json_body,
            headers.authorization,
            headers.traceparent,
            headers.session_id,
            timeout_millis(timeout),
            wake,
            wait.id(),
        )
    });
    InFlight {
        exchange,
        wait,
        timeout,
    }
    .await
}

/// An exchange until it settled. Dropped before that (the caller gave up, or the core's own
/// race timed out), it aborts the request, so a stalled server never keeps a socket.
struct InFlight {
    exchange: Exchange,
    wait: Wait,
    timeout: Duration,
}

impl Future for InFlight {
    type Output = Result<Reply, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if Pin::new(&mut self.wait).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let exchange = &self.exchange;
        Poll::Ready(match exchange.body() {
            Some(body) => Ok(Reply {
                status: exchange.status(),
                body,
            }),
            None if exchange.timed_out() => Err(TransportError::Timeout(self.timeout)),
            None => Err(TransportError::Network(describe(&exchange.error()))),
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.wait.fired() {
            self.exchange.cancel();
        }
    }
}

/// A JS exception as text; `fetch` rejects with `TypeError`s whose `cause` has the detail.
fn describe(err: &JsValue) -> String {
    if let Some(err) = err.dyn_ref::<js_sys::Error>() {
        let mut text: String = err.message().into();
        if let Some(cause) = err.cause().dyn_ref::<js_sys::Error>() {
            text.push_str(": ");
            text.push_str(&String::from(cause.message()));
        }
        text
    } else {
        "fetch failed".to_owned()
    }
}
