//! The JS face of watch and election: `RawStream` (a watch or an observe, one `next()` at a
//! time, cancelled by an `AbortSignal`), and the events and leaders as plain JS objects
//! (`RawLeadership`, a won campaign, is `api`'s, beside the `RawHandle` it carries).
//!
//! `lock-wasm/npm/src/api.js` wraps `RawStream` into an async iterator that ends cleanly on
//! its signal or a `break`, and `RawLeadership` into `Leadership`. The rules (resume, the
//! leader's deduplication, proclaim refused after a loss) are the core's, in
//! `crate::watch` and `crate::election`.

// Arcs of !Send JS-backed values are fine here: wasm32 has one thread.
#![allow(clippy::arc_with_non_send_sync)]

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;

use futures::future::{select, Either};
use futures::{Stream, StreamExt};
use lock_api::{Holder, LockState, WatchEvent};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::election::Leader;
use crate::error::LockError;

use super::abort::Aborted;
use super::js_error::to_js;

/// The items of a stream as JS values.
type JsStream = Pin<Box<dyn Stream<Item = Result<JsValue, LockError>>>>;

/// A watch's events or an observe's leaders, one `next()` at a time (the JS iterator never
/// asks twice at once): each `next()` takes the stream for its wait and puts it back, so an
/// aborted wait drops it, which ends the stream and its poll in flight.
#[wasm_bindgen]
pub struct RawStream {
    stream: Rc<RefCell<Option<JsStream>>>,
}

impl RawStream {
    /// A watch's events as JS objects.
    pub(crate) fn events(stream: crate::watch::WatchStream) -> RawStream {
        RawStream::over(Box::pin(stream.map(|item| item.map(|e| event_js(&e)))))
    }

    /// An observe's leaders as JS objects (`null`: no leader).
    pub(crate) fn leaders(stream: crate::election::ObserveStream) -> RawStream {
        RawStream::over(Box::pin(
            stream.map(|item| item.map(|l| leader_js(l.as_ref()))),
        ))
    }

    fn over(stream: JsStream) -> RawStream {
        RawStream {
            stream: Rc::new(RefCell::new(Some(stream))),
        }
    }
}

#[wasm_bindgen]
impl RawStream {
    /// Resolves the next item, or `undefined` once the stream ended; rejects with its error
    /// (which ends it), or with the signal's reason when `signal` aborts first (which drops
    /// the stream and the poll in flight: it has ended).
    pub fn next(&self, signal: Option<web_sys::AbortSignal>) -> js_sys::Promise {
        let slot = self.stream.clone();
        let taken = slot.borrow_mut().take();
        future_to_promise(async move {
            let Some(mut stream) = taken else {
                return Ok(JsValue::UNDEFINED);
            };
            let next = Box::pin(async move {
                let item = stream.next().await;
                *slot.borrow_mut() = Some(stream);
                item
            });
            let item = match signal {
                None => next.await,
                Some(signal) => match select(next, Box::pin(Aborted::new(signal))).await {
                    Either::Left((item, _)) => item,
                    Either::Right((reason, _)) => return Err(reason),
                },
            };
            match item {
                None => Ok(JsValue::UNDEFINED),
                Some(Ok(value)) => Ok(value),
                Some(Err(e)) => Err(to_js(&e)),
            }
        })
    }
}

/// Sets `name` on `object` when `value` is a value.
fn set(object: &js_sys::Object, name: &str, value: JsValue) {
    if !value.is_undefined() {
        let _ = js_sys::Reflect::set(object, &JsValue::from_str(name), &value);
    }
}

/// An L8 event as the wire's JSON object (absent fields left out).
fn event_js(e: &WatchEvent) -> JsValue {
    let o = js_sys::Object::new();
    set(&o, "id", JsValue::from(e.id.as_str()));
    set(&o, "kind", JsValue::from(e.kind.as_str()));
    set(&o, "key", JsValue::from(e.key.as_str()));
    set(&o, "atMillis", JsValue::from(e.at_millis as f64));
    set(
        &o,
        "fencingToken",
        JsValue::from(e.fencing_token.map(|t| t as f64)),
    );
    set(&o, "holderId", JsValue::from(e.holder_id.as_deref()));
    set(&o, "owner", JsValue::from(e.owner.as_deref()));
    set(&o, "mode", JsValue::from(e.mode.map(|m| m.as_str())));
    set(&o, "limit", JsValue::from(e.limit));
    set(&o, "value", JsValue::from(e.value.as_deref()));
    set(&o, "waiterCount", JsValue::from(e.waiter_count));
    if let Some(state) = &e.state {
        set(&o, "state", state_js(state));
    }
    o.into()
}

/// L7's answer as its JSON object.
fn state_js(s: &LockState) -> JsValue {
    let o = js_sys::Object::new();
    set(&o, "key", JsValue::from(s.key.as_str()));
    set(
        &o,
        "mode",
        s.mode.map_or(JsValue::NULL, |m| m.as_str().into()),
    );
    set(
        &o,
        "holder",
        s.holder.as_ref().map_or(JsValue::NULL, holder_js),
    );
    let holders: js_sys::Array = s.holders.iter().map(holder_js).collect();
    set(&o, "holders", holders.into());
    set(&o, "limit", s.limit.map_or(JsValue::NULL, JsValue::from));
    set(&o, "waiterCount", JsValue::from(s.waiter_count));
    o.into()
}

fn holder_js(h: &Holder) -> JsValue {
    let o = js_sys::Object::new();
    set(&o, "holderId", JsValue::from(h.holder_id.as_str()));
    set(
        &o,
        "owner",
        h.owner.as_deref().map_or(JsValue::NULL, JsValue::from),
    );
    set(&o, "fencingToken", JsValue::from(h.fencing_token as f64));
    set(
        &o,
        "remainingMillis",
        JsValue::from(h.remaining_millis as f64),
    );
    set(&o, "value", JsValue::from(h.value.as_deref()));
    o.into()
}

/// A leader as `{ value, term, holderId }` (`value` `null` when it has none); `null` for none.
pub(crate) fn leader_js(leader: Option<&Leader>) -> JsValue {
    let Some(l) = leader else {
        return JsValue::NULL;
    };
    let o = js_sys::Object::new();
    set(
        &o,
        "value",
        l.value.as_deref().map_or(JsValue::NULL, JsValue::from),
    );
    set(&o, "term", JsValue::from(l.term as f64));
    set(&o, "holderId", JsValue::from(l.holder_id.as_str()));
    o.into()
}
