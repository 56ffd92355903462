//! A JS `AbortSignal` as a Rust future, so an acquire can race its own cancellation.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::AbortSignal;

#[derive(Default)]
struct Shared {
    aborted: bool,
    waker: Option<Waker>,
}

/// Completes with the signal's `reason` once it aborts. Removes its listener when dropped,
/// so a long-lived signal shared by many acquires does not accumulate listeners.
pub struct Aborted {
    signal: AbortSignal,
    shared: Rc<RefCell<Shared>>,
    listener: Closure<dyn FnMut()>,
}

impl Aborted {
    /// Starts listening on `signal`.
    pub fn new(signal: AbortSignal) -> Aborted {
        let shared = Rc::new(RefCell::new(Shared {
            aborted: signal.aborted(),
            waker: None,
        }));
        let weak = Rc::downgrade(&shared);
        let listener = Closure::<dyn FnMut()>::new(move || {
            if let Some(shared) = weak.upgrade() {
                let mut shared = shared.borrow_mut();
                shared.aborted = true;
                if let Some(waker) = shared.waker.take() {
                    waker.wake();
                }
            }
        });
        let _ = signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        Aborted {
            signal,
            shared,
            listener,
        }
    }
}

impl Future for Aborted {
    type Output = JsValue;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<JsValue> {
        let mut shared = self.shared.borrow_mut();
        if shared.aborted {
            Poll::Ready(self.signal.reason())
        } else {
            shared.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Drop for Aborted {
    fn drop(&mut self) {
        let _ = self
            .signal
            .remove_event_listener_with_callback("abort", self.listener.as_ref().unchecked_ref());
    }
}
