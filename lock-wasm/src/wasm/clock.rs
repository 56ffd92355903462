//! [`JsClock`]: the [`Clock`] seam over `performance.now()` and JS timers.

use std::time::Duration;

use crate::clock::Clock;
use crate::spawn::BoxFuture;

use super::timer::{monotonic_millis, Sleep};

/// Monotonic time from `performance.now()` (page load / process start origin, never jumps
/// with the wall clock) and sleeps on `setTimeout` (unref'd in Node for background tasks,
/// see [`super::timer`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct JsClock;

impl Clock for JsClock {
    fn now(&self) -> Duration {
        // performance.now() is a non-negative fraction of milliseconds; keep microseconds.
        Duration::from_micros((monotonic_millis().max(0.0) * 1000.0) as u64)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(Sleep::new(duration))
    }
}
