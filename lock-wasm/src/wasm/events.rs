//! [`JsEvents`]: the core's [`EventSink`] delivering [`ClientEvent`]s to a JS listener as
//! plain objects (`{ type: "contention", key, attempt, delayMs, reason }`, ...).

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::JsValue;

use crate::events::{ClientEvent, EventSink};

/// The listener slot of one session; the JS side may replace the listener at any time.
#[derive(Clone, Default)]
pub struct JsEvents {
    listener: Rc<RefCell<Option<js_sys::Function>>>,
}

impl JsEvents {
    /// Sets or clears the listener.
    pub fn set(&self, listener: Option<js_sys::Function>) {
        *self.listener.borrow_mut() = listener;
    }
}

impl EventSink for JsEvents {
    fn on_event(&self, event: &ClientEvent) {
        // Clone out of the cell first: the listener may call `set` (re-entrantly).
        let listener = self.listener.borrow().clone();
        if let Some(listener) = listener {
            // A throwing listener must not break the acquire loop or the heartbeat that
            // reported the event; the JS layer reports listener errors on its own.
            let _ = listener.call1(&JsValue::NULL, &to_js(event));
        }
    }
}

fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JS shape of an event (camelCase, milliseconds as numbers, tokens as numbers).
pub fn to_js(event: &ClientEvent) -> JsValue {
    let object = js_sys::Object::new();
    let set = |name: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&object, &JsValue::from_str(name), &value);
    };
    let text = |s: &str| JsValue::from_str(s);
    let num = |n: f64| JsValue::from_f64(n);
    match event {
        ClientEvent::Granted {
            key,
            session_id,
            fencing_token,
            attempts,
            waited,
        } => {
            set("type", text("granted"));
            set("key", text(key));
            set("sessionId", text(session_id));
            set("fencingToken", num(*fencing_token as f64));
            set("attempts", num(f64::from(*attempts)));
            set("waitedMs", num(millis(*waited)));
        }
        ClientEvent::Contention {
            key,
            attempt,
            delay,
            reason,
        } => {
            set("type", text("contention"));
            set("key", text(key));
            set("attempt", num(f64::from(*attempt)));
            set("delayMs", num(millis(*delay)));
            set("reason", text(reason));
        }
        ClientEvent::NotGranted {
            key,
            attempts,
            waited,
        } => {
            set("type", text("notGranted"));
            set("key", text(key));
            set("attempts", num(f64::from(*attempts)));
            set("waitedMs", num(millis(*waited)));
        }
        ClientEvent::Lost {
            key,
            fencing_token,
            reason,
        } => {
            set("type", text("lost"));
            set("key", text(key));
            set("fencingToken", num(*fencing_token as f64));
            set("reason", text(reason.as_str()));
        }
        ClientEvent::SessionLost { session_id } => {
            set("type", text("sessionLost"));
            set("sessionId", text(session_id));
        }
    }
    object.into()
}
