//! One HTTP exchange over the platform `fetch`, with a per-request timeout.
//!
//! `fetch` is bound on the global object, so the same code runs in browsers, Node ≥ 18 and
//! Deno. Each request gets its own `AbortController`: the timeout aborts it, and so does
//! dropping the future (an acquire cancelled by its AbortSignal must not leave a request
//! running whose answer nobody reads).

use std::time::Duration;

use futures::future::{select, Either};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, RequestInit, Response};

use super::timer::{Sleep, TimerKind};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(url: &str, init: &RequestInit) -> js_sys::Promise;
}

/// A completed exchange: any status, with the body read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// Why no reply arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// No complete answer within the per-request timeout.
    Timeout,
    /// The platform refused or failed the request (connection refused, CORS, DNS...).
    Network(String),
}

/// Aborts the request unless disarmed: covers both the timeout and a dropped future.
struct AbortOnDrop(Option<AbortController>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(controller) = self.0.take() {
            controller.abort();
        }
    }
}

/// Sends `method url` with an optional JSON body, an optional `Authorization` header value
/// and extra headers (a plain object of name → value, e.g. `{ traceparent }`), and waits for
/// status and body text.
pub async fn exchange(
    method: &str,
    url: &str,
    json_body: Option<&str>,
    authorization: Option<&str>,
    extra_headers: Option<&js_sys::Object>,
    timeout: Duration,
) -> Result<Reply, FetchError> {
    let controller = AbortController::new().map_err(|e| FetchError::Network(describe(&e)))?;
    let init = RequestInit::new();
    init.set_method(method);
    init.set_signal(Some(&controller.signal()));
    let headers = js_sys::Object::new();
    if let Some(extra) = extra_headers {
        js_sys::Object::assign(&headers, extra);
    }
    // Set after the extra headers, which cannot replace them.
    let header = |name: &str, value: &str| {
        let _ = js_sys::Reflect::set(&headers, &name.into(), &value.into());
    };
    if let Some(value) = authorization {
        header("authorization", value);
    }
    if let Some(body) = json_body {
        header("content-type", "application/json");
        init.set_body(&JsValue::from_str(body));
    }
    init.set_headers(&headers);
    let mut guard = AbortOnDrop(Some(controller));
    let request = Box::pin(send(url, init));
    // A foreground timer even for a heartbeat's request: it lives only while the request is
    // in flight, which keeps Node alive by itself anyway, and is cleared when the exchange
    // ends. The heartbeat's own timeout of the same call is on its background clock.
    let timeout_timer = Sleep::new(timeout, TimerKind::Foreground);
    match select(request, Box::pin(timeout_timer)).await {
        Either::Left((reply, _)) => {
            // Finished: nothing left to abort.
            guard.0 = None;
            reply
        }
        // The guard aborts the request as it goes out of scope.
        Either::Right(((), _)) => Err(FetchError::Timeout),
    }
}

async fn send(url: &str, init: RequestInit) -> Result<Reply, FetchError> {
    let response = JsFuture::from(global_fetch(url, &init))
        .await
        .map_err(|e| FetchError::Network(describe(&e)))?;
    let response: Response = response.unchecked_into();
    let status = response.status();
    let text = response
        .text()
        .map_err(|e| FetchError::Network(describe(&e)))?;
    let body = JsFuture::from(text)
        .await
        .map_err(|e| FetchError::Network(describe(&e)))?
        .as_string()
        .unwrap_or_default();
    Ok(Reply { status, body })
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
