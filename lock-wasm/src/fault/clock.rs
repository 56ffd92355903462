//! [`FaultClock`]: the contender's clock under its faults. A paused process's timers do not
//! fire: a sleep whose end falls inside a pause ends when the pause ends. Time itself goes
//! on (a process wakes from a pause to a later `now()`, which is how it can tell its
//! deadlines passed).

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::clock::Clock;
use crate::spawn::BoxFuture;

/// The clock [`super::FaultSwitch::clock`] hands out.
pub(super) struct FaultClock(pub(super) Arc<Shared>);

impl FaultClock {
    /// Sleeps `duration` on the real clock, then waits out any pause in force at its end.
    fn sleep_through(&self, duration: Duration, background: bool) -> BoxFuture<'static, ()> {
        let shared = self.0.clone();
        let sleep = if background {
            shared.clock.background_sleep(duration)
        } else {
            shared.clock.sleep(duration)
        };
        Box::pin(async move {
            sleep.await;
            shared.wait_out_pauses(background).await;
        })
    }
}

impl Clock for FaultClock {
    fn now(&self) -> Duration {
        self.0.clock.now()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep_through(duration, false)
    }

    fn background_sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep_through(duration, true)
    }
}
