//! Runtime-agnostic notifications between the SDK's tasks (no tokio `Notify`, so they work
//! in wasm and the simulation alike): [`Signal`], set once ("this session ended", "this
//! handle is lost"), and [`Notify`], re-armable ("the schedule changed").

use std::future::Future;

/// A one-way, set-once notification any number of tasks can await ("this session ended",
/// "this handle is lost").
#[derive(Clone, Default)]
pub struct Signal {
    inner: std::sync::Arc<std::sync::Mutex<SignalState>>,
}

#[derive(Default)]
struct SignalState {
    set: bool,
    wakers: Vec<std::task::Waker>,
}

impl Signal {
    /// An unset signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the signal and wakes every waiter. Idempotent.
    pub fn set(&self) {
        let wakers = {
            let mut state = self.inner.lock().unwrap();
            state.set = true;
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Whether [`Signal::set`] was called.
    pub fn is_set(&self) -> bool {
        self.inner.lock().unwrap().set
    }

    /// Completes once the signal is set (at once if it already is).
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let signal = self.clone();
        std::future::poll_fn(move |cx| {
            let mut state = signal.inner.lock().unwrap();
            if state.set {
                std::task::Poll::Ready(())
            } else {
                if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.wakers.push(cx.waker().clone());
                }
                std::task::Poll::Pending
            }
        })
    }
}

/// A re-armable "something changed" notification: [`Notify::notify`] wakes every task that
/// started listening before it. The heartbeat task and the deadline watchdog listen on one
/// (see `crate::heartbeat`) so that a grant, a renewal or a release reschedules them at once
/// instead of at their next timer.
#[derive(Clone, Default)]
pub struct Notify {
    inner: std::sync::Arc<std::sync::Mutex<NotifyState>>,
}

#[derive(Default)]
struct NotifyState {
    generation: u64,
    wakers: Vec<std::task::Waker>,
}

impl Notify {
    /// Wakes every current listener.
    pub fn notify(&self) {
        let wakers = {
            let mut state = self.inner.lock().unwrap();
            state.generation += 1;
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// A future that completes at the first [`Notify::notify`] after this call. Take it
    /// *before* reading the state it guards, so a change made in between is not missed.
    pub fn listen(&self) -> impl Future<Output = ()> + Send + 'static {
        let notify = self.clone();
        let since = self.inner.lock().unwrap().generation;
        std::future::poll_fn(move |cx| {
            let mut state = notify.inner.lock().unwrap();
            if state.generation != since {
                std::task::Poll::Ready(())
            } else {
                if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.wakers.push(cx.waker().clone());
                }
                std::task::Poll::Pending
            }
        })
    }
}
