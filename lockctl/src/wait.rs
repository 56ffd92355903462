//! How long `exec` waits for the lock, as the SDK's [`AcquirePolicy`].
//!
//! Waiting happens in the server's FIFO queue (`waitMillis` > 0), so jobs started one after
//! another on one key run in the order they were started; the SDK re-sends a queued request
//! at once when its wait runs out, so its place is kept. Without `--wait-ms` lockctl waits
//! for as long as it takes, like `flock(1)`: in rounds of [`ROUND`], each a fresh SDK
//! acquire that takes over the place of the one before (the server keeps a ticket's place
//! for a grace period after its last request).

use std::time::Duration;

use lock_api::limits::WAIT_MILLIS_MAX;
use lock_wasm::{AcquirePolicy, PolicySettings};

/// One round of an unbounded wait.
pub const ROUND: Duration = Duration::from_secs(600);

/// The longest wait of one request in the server's queue: long enough that a queued job
/// sends a request every few seconds at most, short enough that a request never comes near
/// the server's cap on `waitMillis`.
const QUEUE_WAIT_PER_REQUEST: Duration = Duration::from_secs(10);

/// How long to wait for the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// One attempt: held by someone else is not granted at once.
    No,
    /// In the queue, for at most this long.
    UpTo(Duration),
    /// In the queue, until granted.
    Forever,
}

impl Wait {
    /// From `--no-wait` and `--wait-ms` (clap keeps them apart); `--wait-ms 0` is `--no-wait`.
    pub fn from_flags(no_wait: bool, wait_ms: Option<u64>) -> Wait {
        match (no_wait, wait_ms) {
            (true, _) | (false, Some(0)) => Wait::No,
            (false, Some(ms)) => Wait::UpTo(Duration::from_millis(ms)),
            (false, None) => Wait::Forever,
        }
    }

    /// The policy of one SDK acquire (of one round, for [`Wait::Forever`]).
    pub fn policy(self, request_timeout: Duration) -> AcquirePolicy {
        let settings = match self {
            Wait::No => PolicySettings {
                // One attempt, with room for its answer.
                total_budget: request_timeout,
                max_attempts: 1,
                wait_millis: 0,
                ..PolicySettings::default()
            },
            Wait::UpTo(budget) => queued(budget),
            Wait::Forever => queued(ROUND),
        };
        AcquirePolicy::new(settings).expect("the wait's settings are valid by construction")
    }

    /// Whether a round that ended not granted is followed by another.
    pub fn goes_on(self) -> bool {
        self == Wait::Forever
    }
}

/// Waiting in the queue within `budget`. The SDK sends a request only while more than its
/// `waitMillis` is left, so a request waits at most a quarter of the budget: the wait uses
/// at least three quarters of it even when the budget is short.
fn queued(budget: Duration) -> PolicySettings {
    let per_request = (budget / 4)
        .min(QUEUE_WAIT_PER_REQUEST)
        .min(Duration::from_millis(WAIT_MILLIS_MAX));
    PolicySettings {
        total_budget: budget,
        // The budget is the bound; every request of a queued wait is one more turn in line.
        max_attempts: u32::MAX,
        wait_millis: per_request.as_millis() as u64,
        ..PolicySettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(2);

    #[test]
    fn flags_choose_the_wait() {
        assert_eq!(Wait::from_flags(true, None), Wait::No);
        assert_eq!(Wait::from_flags(false, Some(0)), Wait::No);
        assert_eq!(
            Wait::from_flags(false, Some(1500)),
            Wait::UpTo(Duration::from_millis(1500))
        );
        assert_eq!(Wait::from_flags(false, None), Wait::Forever);
    }

    #[test]
    fn no_wait_is_one_attempt_outside_the_queue() {
        let policy = Wait::No.policy(TIMEOUT);
        assert_eq!(policy.max_attempts(), 1);
        assert_eq!(policy.wait_millis(), 0);
    }

    #[test]
    fn a_bounded_wait_queues_within_its_budget() {
        let short = Wait::UpTo(Duration::from_millis(1000)).policy(TIMEOUT);
        assert_eq!(short.total_budget(), Duration::from_millis(1000));
        assert_eq!(short.wait_millis(), 250);
        let long = Wait::UpTo(Duration::from_secs(3600)).policy(TIMEOUT);
        assert_eq!(long.wait_millis(), 10_000);
        // A budget too short to queue in still makes a valid policy: backoff instead.
        let tiny = Wait::UpTo(Duration::from_millis(3)).policy(TIMEOUT);
        assert_eq!(tiny.wait_millis(), 0);
    }

    #[test]
    fn only_an_unbounded_wait_goes_on() {
        assert!(Wait::Forever.goes_on());
        assert_eq!(Wait::Forever.policy(TIMEOUT).total_budget(), ROUND);
        assert!(!Wait::UpTo(ROUND).goes_on());
        assert!(!Wait::No.goes_on());
    }
}
