//! One HTTP exchange over the platform `fetch`, with a per-request timeout.
//!
//! `fetch` is bound on the global object, so the same code runs in browsers, Node ≥ 18 and
//! Deno. Each request gets its own `AbortController`: the timeout aborts it (a platform
//! timer calling `abort` directly), and so does dropping the future (an acquire cancelled by
//! its AbortSignal must not leave a request running whose answer nobody reads).

use std::time::Duration;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, RequestInit, Response};

use super::timer::{clear_timeout, set_timeout, timeout_millis};

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

/// The request's `AbortController` and its timeout: a platform timer that calls the
/// controller's `abort` itself (no wasm callback per request). Dropping it before the
/// exchange finished (the caller gave up, or the core's own race timed out) aborts the
/// request too, so a stalled server never keeps a socket.
struct Cancel {
    controller: AbortController,
    timer: JsValue,
    done: bool,
}

impl Cancel {
    fn new(timeout: Duration) -> Result<Cancel, FetchError> {
        let controller = AbortController::new().map_err(|e| FetchError::Network(describe(&e)))?;
        let abort: js_sys::Function = js_sys::Reflect::get(&controller, &"abort".into())
            .map_err(|e| FetchError::Network(describe(&e)))?
            .unchecked_into();
        let timer = set_timeout(&abort.bind0(&controller), timeout_millis(timeout));
        Ok(Cancel {
            controller,
            timer,
            done: false,
        })
    }

    /// Whether the timeout aborted the request.
    fn timed_out(&self) -> bool {
        self.controller.signal().aborted()
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        clear_timeout(&self.timer);
        if !self.done {
            self.controller.abort();
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
    let init = RequestInit::new();
    init.set_method(method);
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
    // A foreground timer even for a heartbeat's request: it lives only while the request is
    // in flight, which keeps Node alive by itself anyway, and is cleared when the exchange
    // ends. The heartbeat's own timeout of the same call is on its background clock.
    let mut cancel = Cancel::new(timeout)?;
    init.set_signal(Some(&cancel.controller.signal()));
    let reply = send(url, init).await;
    // Finished either way: nothing left to abort.
    cancel.done = true;
    match reply {
        Err(_) if cancel.timed_out() => Err(FetchError::Timeout),
        reply => reply,
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
