//! Running background work (the heartbeat task) without naming a runtime, and the
//! `Send`-or-not future types every seam shares.
//!
//! Natively the heartbeat runs on tokio's multi-threaded runtime, so futures must be `Send`;
//! in wasm they hold JS values, which are `!Send`. Rather than two copies of every trait, the
//! seams use [`MaybeSend`]/[`MaybeSync`] (`Send`/`Sync` natively, nothing on wasm32) and
//! [`BoxFuture`] (a boxed future that is `Send` natively only). Async trait methods use
//! `async_trait` with the same switch:
//!
//! ```ignore
//! #[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
//! #[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
//! impl Transport for MyTransport { /* ... */ }
//! ```

use std::future::Future;
use std::pin::Pin;

/// `Send` on native targets, no bound on wasm32 (JS values are `!Send`).
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSend: Send {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + ?Sized> MaybeSend for T {}

/// `Send` on native targets, no bound on wasm32 (JS values are `!Send`).
#[cfg(target_arch = "wasm32")]
pub trait MaybeSend {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSend for T {}

/// `Sync` on native targets, no bound on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSync: Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Sync + ?Sized> MaybeSync for T {}

/// `Sync` on native targets, no bound on wasm32.
#[cfg(target_arch = "wasm32")]
pub trait MaybeSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSync for T {}

/// A boxed future: `Send` natively, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed future: `Send` natively, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Starts a detached background task (the session's heartbeat loop). Implementations:
/// tokio's `spawn` ([`crate::native::TokioSpawner`]), `wasm_bindgen_futures::spawn_local`
/// in wasm, and the deterministic executor of [`crate::sim`].
///
/// The task ends on its own when its session is closed or lost; the spawner never needs to
/// cancel it, so no join handle is returned.
pub trait Spawner: MaybeSend + MaybeSync {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);
}

/// A one-way, set-once notification any number of tasks can await: "this session ended".
/// Runtime-agnostic (no tokio `Notify`), so it works in wasm and the simulation alike.
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
/// (see `crate::session`) so that a grant, a renewal or a release reschedules them at once
/// instead of at their next timer. Runtime-agnostic, like [`Signal`].
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
