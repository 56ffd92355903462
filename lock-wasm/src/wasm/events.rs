//! [`JsEvents`]: the core's [`EventSink`] delivering [`ClientEvent`]s to a JS listener as
//! plain objects (`{ type: "contention", key, attempt, delayMs, reason }`, ...).

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::JsValue;

use crate::events::{ClientEvent, EventSink, Field};

/// The listener slot of one session; the JS side may replace the listener at any time.
#[derive(Clone, Default)]
pub struct JsEvents {
    listener: Rc<RefCell<Option<Listener>>>,
}

#[derive(Clone)]
struct Listener {
    function: js_sys::Function,
    /// Only `contention` events (all the npm package's tracing reads): the others are not
    /// built, which saves a JS object and a call into JS per grant.
    contention_only: bool,
}

impl JsEvents {
    /// Sets or clears the listener; `contention_only` leaves out every other event.
    pub fn set(&self, listener: Option<js_sys::Function>, contention_only: bool) {
        *self.listener.borrow_mut() = listener.map(|function| Listener {
            function,
            contention_only,
        });
    }
}

impl EventSink for JsEvents {
    fn on_event(&self, event: &ClientEvent) {
        // Clone out of the cell first: the listener may call `set` (re-entrantly).
        let listener = self.listener.borrow().clone();
        if let Some(Listener {
            function: listener,
            contention_only,
        }) = listener
        {
            if contention_only && !matches!(event, ClientEvent::Contention { .. }) {
                return;
            }
            // A throwing listener must not break the acquire loop or the heartbeat that
            // reported the event; the JS layer reports listener errors on its own.
            let _ = listener.call1(&JsValue::NULL, &to_js(event));
        }
    }
}

/// The JS shape of an event: `type`, then its fields (camelCase, milliseconds and tokens as
/// numbers).
pub fn to_js(event: &ClientEvent) -> JsValue {
    let object = js_sys::Object::new();
    let set = |name: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&object, &JsValue::from_str(name), &value);
    };
    set("type", JsValue::from_str(js_type(event)));
    for field in event.fields() {
        match field {
            Field::Key(key) => set("key", JsValue::from_str(key)),
            Field::Text(name, text) => set(name, JsValue::from_str(text)),
            Field::Number(name, n) => set(name, JsValue::from_f64(n as f64)),
            Field::Millis(name, d) => set(
                &format!("{name}Ms"),
                JsValue::from_f64(d.as_secs_f64() * 1000.0),
            ),
        }
    }
    object.into()
}

/// The `type` of the JS event (the TypeScript union's tags).
fn js_type(event: &ClientEvent) -> &'static str {
    match event {
        ClientEvent::Granted { .. } => "granted",
        ClientEvent::Contention { .. } => "contention",
        ClientEvent::NotGranted { .. } => "notGranted",
        ClientEvent::Lost { .. } => "lost",
        ClientEvent::ReleaseFailed { .. } => "releaseFailed",
        ClientEvent::SessionLost { .. } => "sessionLost",
    }
}
