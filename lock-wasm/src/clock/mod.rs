//! The time seam: a monotonic `now()` and an async `sleep`. Every wait and every deadline in
//! the SDK goes through it, so the seeded simulation and the unit tests run on simulated
//! time (`ManualClock`, feature `test-util`) and production on tokio or JS timers.
//! [`BackgroundClock`] is the view of a clock the heartbeat task gets (its sleeps must not
//! keep a Node process alive).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::spawn::{BoxFuture, MaybeSend, MaybeSync};

/// Monotonic time and sleeping.
///
/// `now()` is the time since an arbitrary, fixed origin (process start, page load, simulation
/// start); only differences between two readings of the same clock mean anything. It must
/// never go backwards. Wall-clock time is never used: deadlines must not jump with NTP.
pub trait Clock: MaybeSend + MaybeSync {
    /// Monotonic time since this clock's origin.
    fn now(&self) -> Duration;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;

    /// [`Clock::sleep`] for background work (the heartbeat task): a sleep that must not by
    /// itself keep the host process alive, so an open session never stops a Node script
    /// from exiting (the JS clock unrefs its timer). Where nothing keeps a process alive on
    /// a timer's behalf (tokio, the simulation) it is [`Clock::sleep`].
    fn background_sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep(duration)
    }
}

/// A clock whose every sleep is a [`Clock::background_sleep`] of the wrapped one. The
/// session hands one to the heartbeat task it spawns, so every wait of that task (between
/// rounds, and the timeouts of its calls) is background work, explicitly rather than by
/// whichever task happens to be polled.
pub struct BackgroundClock(pub Arc<dyn Clock>);

impl Clock for BackgroundClock {
    fn now(&self) -> Duration {
        self.0.now()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.background_sleep(duration)
    }

    fn background_sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.background_sleep(duration)
    }
}

/// Runs `fut`, giving up after `timeout` on `clock`. `None` means the time ran out (the
/// future is dropped; whatever it started may still happen elsewhere).
pub async fn timeout<T>(
    clock: &dyn Clock,
    timeout: Duration,
    fut: impl Future<Output = T>,
) -> Option<T> {
    let sleep = clock.sleep(timeout);
    futures::pin_mut!(fut);
    match futures::future::select(fut, sleep).await {
        futures::future::Either::Left((value, _)) => Some(value),
        futures::future::Either::Right(((), _)) => None,
    }
}

#[cfg(any(test, feature = "test-util"))]
mod manual;
#[cfg(any(test, feature = "test-util"))]
pub use manual::ManualClock;
