//! One JS callback, made once per module instance, that wakes Rust futures by number.
//!
//! Why: a wasm-bindgen `Closure` per wait (a timer, a request) costs a JS function, its
//! registration with the glue's `FinalizationRegistry` and the matching drop, and a
//! `JsFuture` over a promise costs two of them plus a `then`. The SDK makes several such
//! waits per acquire+release, so each one instead takes a number ([`Wait`]) and hands JS the
//! shared callback with it (`setTimeout(wake, ms, id)`, or a JS helper that calls
//! `wake(id)` when its promise settles). A call for a number whose wait is gone (a request
//! aborted because its future was dropped still settles) finds nothing and does nothing;
//! numbers are never reused within 2³² waits.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

struct Slot {
    id: u32,
    fired: bool,
    waker: Option<Waker>,
}

/// The waits alive, in a short list: a session has a handful at a time (its heartbeat and
/// watchdog timers, an acquire's race timer and request), so a scan beats a map here.
#[derive(Default)]
struct Waits {
    next: u32,
    slots: Vec<Slot>,
}

impl Waits {
    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|slot| slot.id == id)
    }
}

thread_local! {
    static WAITS: RefCell<Waits> = RefCell::default();
    // Never dropped: it lives as long as the module instance.
    static WAKE: Closure<dyn FnMut(u32)> = Closure::new(wake);
}

/// The shared callback's body. JS calls it only from its event loop, never while Rust code
/// runs, so the borrow never collides; the waker is woken after the borrow ends.
fn wake(id: u32) {
    let waker = WAITS.with(|waits| {
        let mut waits = waits.borrow_mut();
        let slot = waits.slot(id)?;
        slot.fired = true;
        slot.waker.take()
    });
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// Runs `f` with the shared callback (`(id: number) => void`).
pub(super) fn with_callback<R>(f: impl FnOnce(&js_sys::Function) -> R) -> R {
    WAKE.with(|wake| f(wake.as_ref().unchecked_ref()))
}

/// A future that completes once the shared callback is called with [`Wait::id`].
pub(super) struct Wait {
    id: u32,
}

impl Wait {
    /// A new wait, not yet fired.
    pub(super) fn new() -> Wait {
        WAITS.with(|waits| {
            let mut waits = waits.borrow_mut();
            let id = waits.next;
            waits.next = id.wrapping_add(1);
            waits.slots.push(Slot {
                id,
                fired: false,
                waker: None,
            });
            Wait { id }
        })
    }

    /// The number JS passes to the shared callback.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Whether the callback was called for this wait.
    pub(super) fn fired(&self) -> bool {
        WAITS.with(|waits| waits.borrow_mut().slot(self.id).is_some_and(|s| s.fired))
    }
}

impl Future for Wait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        WAITS.with(|waits| {
            let mut waits = waits.borrow_mut();
            match waits.slot(self.id) {
                Some(slot) if !slot.fired => {
                    slot.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
                _ => Poll::Ready(()),
            }
        })
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        WAITS.with(|waits| {
            let mut waits = waits.borrow_mut();
            if let Some(at) = waits.slots.iter().position(|slot| slot.id == self.id) {
                waits.slots.swap_remove(at);
            }
        });
    }
}
