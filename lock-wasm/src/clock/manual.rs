//! [`ManualClock`]: simulated time for the unit tests and the seeded simulation (feature
//! `test-util`).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::Clock;
use crate::spawn::BoxFuture;

/// A simulated clock: time moves only when [`ManualClock::advance`] (or
/// [`ManualClock::advance_to_next_timer`]) is called, and sleepers wake in deadline order
/// (ties in registration order), so a run is a pure function of its inputs.
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualInner>>,
}

#[derive(Default)]
struct ManualInner {
    now: Duration,
    next_seq: u64,
    /// Pending sleeps keyed by (wake time, registration order).
    timers: BTreeMap<(Duration, u64), Arc<Mutex<TimerState>>>,
}

#[derive(Default)]
struct TimerState {
    fired: bool,
    waker: Option<Waker>,
}

impl ManualClock {
    /// A clock at time zero with no sleepers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `by`, waking every sleeper whose deadline is reached.
    pub fn advance(&self, by: Duration) {
        let target = self.now() + by;
        self.advance_to(target);
    }

    /// Moves time forward to `target` (never backwards), waking the sleepers that are due.
    pub fn advance_to(&self, target: Duration) {
        let due = {
            let mut inner = self.inner.lock().unwrap();
            if target > inner.now {
                inner.now = target;
            }
            let now = inner.now;
            let mut due = Vec::new();
            while let Some(entry) = inner.timers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            due
        };
        // Wake outside the clock's lock: a waker may poll code that reads the clock.
        for timer in due {
            let waker = {
                let mut state = timer.lock().unwrap();
                state.fired = true;
                state.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    /// The earliest pending sleep deadline, if any.
    pub fn next_timer(&self) -> Option<Duration> {
        let inner = self.inner.lock().unwrap();
        inner.timers.keys().next().map(|(at, _)| *at)
    }

    /// The earliest deadline of a sleep whose future still exists. Sleeps whose future was
    /// dropped (a `select` another branch won, a released handle's deadline watch) are
    /// forgotten on the way: waking them would do nothing, and the npm test kit, which lets
    /// promises settle after every timer it fires, would otherwise pay a turn for each.
    pub fn next_awaited_timer(&self) -> Option<Duration> {
        let mut inner = self.inner.lock().unwrap();
        while let Some(entry) = inner.timers.first_entry() {
            // The map holds one reference; a live ManualSleep holds the other.
            if Arc::strong_count(entry.get()) > 1 {
                return Some(entry.key().0);
            }
            entry.remove();
        }
        None
    }

    /// Jumps to the earliest pending sleep deadline and wakes it. Returns false when nobody
    /// sleeps (the simulation is then idle or deadlocked).
    pub fn advance_to_next_timer(&self) -> bool {
        match self.next_timer() {
            Some(at) => {
                self.advance_to(at);
                true
            }
            None => false,
        }
    }

    fn register(&self, wake_at: Duration) -> ManualSleep {
        let mut inner = self.inner.lock().unwrap();
        let state = Arc::new(Mutex::new(TimerState {
            fired: wake_at <= inner.now,
            waker: None,
        }));
        let mut key = None;
        if wake_at > inner.now {
            let seq = inner.next_seq;
            inner.next_seq += 1;
            inner.timers.insert((wake_at, seq), state.clone());
            key = Some((wake_at, seq));
        }
        ManualSleep {
            clock: self.inner.clone(),
            key,
            state,
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.inner.lock().unwrap().now
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let wake_at = self.now() + duration;
        Box::pin(self.register(wake_at))
    }
}

/// The future behind [`ManualClock::sleep`].
struct ManualSleep {
    clock: Arc<Mutex<ManualInner>>,
    /// Its place among the pending timers, while it has one.
    key: Option<(Duration, u64)>,
    state: Arc<Mutex<TimerState>>,
}

/// A sleep dropped before it fired leaves the timers, as a real clock's does: a simulation
/// that races a timeout against every request would otherwise keep one timer per request
/// until simulated time reached it.
impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.clock.lock().unwrap().timers.remove(&key);
        }
    }
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.state.lock().unwrap();
        if state.fired {
            Poll::Ready(())
        } else {
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn sleepers_wake_only_when_time_reaches_them() {
        let clock = ManualClock::new();
        let mut short = clock.sleep(Duration::from_millis(10));
        let mut long = clock.sleep(Duration::from_millis(20));
        assert!((&mut short).now_or_never().is_none());
        clock.advance(Duration::from_millis(10));
        assert!((&mut short).now_or_never().is_some());
        assert!((&mut long).now_or_never().is_none());
        assert!(clock.advance_to_next_timer());
        assert_eq!(clock.now(), Duration::from_millis(20));
        assert!(long.now_or_never().is_some());
        assert!(!clock.advance_to_next_timer());
    }

    #[test]
    fn a_dropped_sleep_leaves_the_timers() {
        let clock = ManualClock::new();
        let kept = clock.sleep(Duration::from_millis(20));
        drop(clock.sleep(Duration::from_millis(10)));
        assert_eq!(clock.next_timer(), Some(Duration::from_millis(20)));
        drop(kept);
        assert_eq!(clock.next_timer(), None);
    }

    #[test]
    fn zero_sleep_is_ready_at_once() {
        let clock = ManualClock::new();
        assert!(clock.sleep(Duration::ZERO).now_or_never().is_some());
    }
}
