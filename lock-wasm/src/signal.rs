//! Runtime-agnostic notifications between the SDK's tasks (no tokio `Notify`, so they work
//! in wasm and the simulation alike): [`Signal`], set once ("this session ended", "this
//! handle is lost"), and [`Notify`], re-armable ("the schedule changed").
//!
//! A waiter that goes away takes its waker with it. Every L4 attempt races the session's
//! "ended" signal and most attempts end without it being set: if each left its waker behind,
//! a long-lived session would grow by one waker per acquire until it closed.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The wakers of the current waiters, each under the id of its wait future.
#[derive(Default)]
struct Wakers {
    next_id: u64,
    by_id: BTreeMap<u64, Waker>,
}

impl Wakers {
    /// Stores `cx`'s waker under `id` (a fresh id on the first poll).
    fn register(&mut self, id: &mut Option<u64>, cx: &Context<'_>) {
        let id = *id.get_or_insert_with(|| {
            self.next_id += 1;
            self.next_id
        });
        match self.by_id.get_mut(&id) {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            Some(waker) => waker.clone_from(cx.waker()),
            None => {
                self.by_id.insert(id, cx.waker().clone());
            }
        }
    }

    fn take_all(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.by_id).into_values().collect()
    }
}

/// A one-way, set-once notification any number of tasks can await ("this session ended",
/// "this handle is lost").
#[derive(Clone, Default)]
pub struct Signal {
    inner: Arc<Mutex<SignalState>>,
}

#[derive(Default)]
struct SignalState {
    set: bool,
    wakers: Wakers,
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
            state.wakers.take_all()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether [`Signal::set`] was called.
    pub fn is_set(&self) -> bool {
        self.inner.lock().unwrap().set
    }

    /// Completes once the signal is set (at once if it already is). Dropped before that, it
    /// leaves nothing behind.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        SignalWait {
            signal: self.clone(),
            id: None,
        }
    }

    /// How many wait futures are registered now (for the tests of flat memory).
    #[cfg(test)]
    fn waiters(&self) -> usize {
        self.inner.lock().unwrap().wakers.by_id.len()
    }
}

struct SignalWait {
    signal: Signal,
    id: Option<u64>,
}

impl Future for SignalWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut state = this.signal.inner.lock().unwrap();
        if state.set {
            return Poll::Ready(());
        }
        state.wakers.register(&mut this.id, cx);
        Poll::Pending
    }
}

impl Drop for SignalWait {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.signal.inner.lock().unwrap().wakers.by_id.remove(&id);
        }
    }
}

/// A re-armable "something changed" notification: [`Notify::notify`] wakes every task that
/// started listening before it. The heartbeat task and the deadline watchdog listen on one
/// (see `crate::heartbeat`) so that a grant, a renewal or a release reschedules them at once
/// instead of at their next timer.
#[derive(Clone, Default)]
pub struct Notify {
    inner: Arc<Mutex<NotifyState>>,
}

#[derive(Default)]
struct NotifyState {
    generation: u64,
    wakers: Wakers,
}

impl Notify {
    /// Wakes every current listener.
    pub fn notify(&self) {
        let wakers = {
            let mut state = self.inner.lock().unwrap();
            state.generation += 1;
            state.wakers.take_all()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A future that completes at the first [`Notify::notify`] after this call. Take it
    /// *before* reading the state it guards, so a change made in between is not missed.
    pub fn listen(&self) -> impl Future<Output = ()> + Send + 'static {
        let since = self.inner.lock().unwrap().generation;
        NotifyListen {
            notify: self.clone(),
            since,
            id: None,
        }
    }
}

struct NotifyListen {
    notify: Notify,
    since: u64,
    id: Option<u64>,
}

impl Future for NotifyListen {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut state = this.notify.inner.lock().unwrap();
        if state.generation != this.since {
            return Poll::Ready(());
        }
        state.wakers.register(&mut this.id, cx);
        Poll::Pending
    }
}

impl Drop for NotifyListen {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.notify.inner.lock().unwrap().wakers.by_id.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// Polls `future` once with a no-op waker: registers it without completing it.
    fn poll_once(future: &mut (impl Future<Output = ()> + Unpin)) -> bool {
        future
            .poll_unpin(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    }

    #[test]
    fn a_dropped_wait_leaves_no_waker_behind() {
        let signal = Signal::new();
        for _ in 0..1_000 {
            let mut wait = Box::pin(signal.wait());
            assert!(!poll_once(&mut wait));
            assert!(!poll_once(&mut wait), "a second poll reuses its place");
            assert_eq!(signal.waiters(), 1);
        }
        assert_eq!(signal.waiters(), 0);
    }

    #[test]
    fn set_completes_every_registered_wait() {
        let signal = Signal::new();
        let mut waits: Vec<_> = (0..3).map(|_| Box::pin(signal.wait())).collect();
        assert!(waits.iter_mut().all(|w| !poll_once(w)));
        signal.set();
        assert!(waits.iter_mut().all(poll_once));
        assert!(poll_once(&mut Box::pin(signal.wait())), "set is sticky");
    }

    #[test]
    fn a_dropped_listener_leaves_no_waker_behind() {
        let notify = Notify::default();
        for _ in 0..1_000 {
            let mut listen = Box::pin(notify.listen());
            assert!(!poll_once(&mut listen));
        }
        assert!(notify.inner.lock().unwrap().wakers.by_id.is_empty());
        let mut listen = Box::pin(notify.listen());
        assert!(!poll_once(&mut listen));
        notify.notify();
        assert!(poll_once(&mut listen));
    }
}
