//! [`JsClock`]: the [`Clock`] seam over `performance.now()` and JS timers.

use std::time::Duration;

use crate::clock::Clock;
use crate::spawn::BoxFuture;

use super::timer::{monotonic_millis, Sleep, TimerKind};

/// Monotonic time from `performance.now()` (page load / process start origin, never jumps
/// with the wall clock) and sleeps on `setTimeout`. Background sleeps (the heartbeat task's,
/// see [`Clock::background_sleep`]) are unref'd in Node, see [`super::timer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JsClock;

impl Clock for JsClock {
    fn now(&self) -> Duration {
        // performance.now() is a non-negative fraction of milliseconds; keep microseconds.
        Duration::from_micros((monotonic_millis().max(0.0) * 1000.0) as u64)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(Sleep::new(duration, TimerKind::Foreground))
    }

    fn background_sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(Sleep::new(duration, TimerKind::Background))
    }
}
