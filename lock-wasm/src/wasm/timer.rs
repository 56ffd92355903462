//! JS timers as Rust futures: `setTimeout` for sleeping, `performance.now()` for the
//! monotonic reading, `Date.now()` to show deadlines in wall-clock terms.
//!
//! Why not `gloo_timers::future::TimeoutFuture`: it cannot `unref()` its Node timer, and a
//! heartbeat timer that stays referenced keeps a Node process alive after the user is done.
//! This future is the same idea (clear the timer on drop, so a cancelled wait leaves nothing
//! behind) plus that one Node call, made for [`TimerKind::Background`] timers. Which kind a
//! timer is, is the creator's explicit choice: the heartbeat task's clock is a
//! `BackgroundClock` (see `crate::clock`), whose sleeps [`super::JsClock`] makes background.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::wake::{self, Wait};

#[wasm_bindgen]
extern "C" {
    // Bound on the global object, so the same import works in browsers, Node and Deno
    // (there is no `window` in Node).
    /// `setTimeout(handler, millis, id)`: the handler is called with `id`.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout_with_arg(handler: &js_sys::Function, millis: f64, id: u32) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Milliseconds on the platform's monotonic clock (`performance.now()`), fractional.
pub fn monotonic_millis() -> f64 {
    performance_now()
}

/// Milliseconds since the Unix epoch (`Date.now()`); for display only, never for timing.
// Wall-clock time for `handle.deadline`'s display in `Date.now()` terms; nothing judges by it.
#[allow(clippy::disallowed_methods)]
pub fn epoch_millis() -> f64 {
    js_sys::Date::now()
}

/// `duration` as `setTimeout`'s delay. setTimeout clamps to about 24.8 days; a longer sleep
/// just wakes early, which every caller tolerates because it re-reads the clock.
pub(super) fn timeout_millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0).min(2_147_483_647.0)
}

/// Whether a pending timer keeps a Node process alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// A wait someone is awaiting (a backoff, a request timeout): keeps Node alive, as any
    /// `setTimeout` does.
    Foreground,
    /// Background work (the heartbeat task): `unref()`'d in Node, so an open session never
    /// keeps a process alive by itself. Browsers and Deno have no such notion.
    Background,
}

/// A future that completes after a duration, on a JS timer cleared when dropped. The timer
/// calls the module's shared wake callback with the sleep's number (see [`super::wake`]), so
/// a sleep makes no closure of its own.
pub struct Sleep {
    wait: Wait,
    id: JsValue,
}

impl Sleep {
    /// Schedules the timer now, as a `kind` timer.
    pub fn new(duration: Duration, kind: TimerKind) -> Sleep {
        let wait = Wait::new();
        let id = wake::with_callback(|wake| {
            set_timeout_with_arg(wake, timeout_millis(duration), wait.id())
        });
        if kind == TimerKind::Background {
            unref(&id);
        }
        Sleep { wait, id }
    }
}

/// Node returns a `Timeout` object with `unref()`; browsers and Deno return a number.
fn unref(id: &JsValue) {
    if !id.is_object() {
        return;
    }
    if let Ok(f) = js_sys::Reflect::get(id, &JsValue::from_str("unref")) {
        if let Some(f) = f.dyn_ref::<js_sys::Function>() {
            let _ = f.call0(id);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.wait).poll(cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if !self.wait.fired() {
            clear_timeout(&self.id);
        }
    }
}
