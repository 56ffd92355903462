//! How long a grant is valid locally and when it must be renewed: the safety margin, the
//! renewal rule (when the heartbeat task must send the next L2 so that neither the session
//! nor any lock it holds lapses while heartbeats are answered) and the shortest lock TTL that
//! rule can keep alive.
//!
//! One L2 renews the session and every live lock of it, each to now + its own TTL, and a
//! renewal counts from when it was *sent*. A lock of TTL `T` renewed by a request sent at `s`
//! is valid locally until `s + T − margin(T)` (the margin absorbs the server's clock running
//! faster than ours; see [`safety_margin`]). The next heartbeat is due at the earliest of
//! - `s + heartbeatMillis` for the session (the server's own period, TTL/3), and
//! - `s + T/3` for every held lock (the same third, of the lock's TTL),
//!
//! recomputed on every grant, renewal and release. Sent at `s + T/3`, the renewal's answer
//! has [`renewal_slack`]`(T) = T − margin(T) − T/3` to come back before the local deadline:
//! that slack must hold one round trip plus however late the timer fires. A TTL whose slack
//! is below [`RENEWAL_RESERVE`] cannot be kept alive and is refused up front
//! ([`shortest_lock_ttl`]); with the default margin that is every TTL below 300 ms (500 ms
//! locks have 83 ms of slack).

use std::time::Duration;

use lock_api::limits::{TTL_MILLIS_MAX, TTL_MILLIS_MIN};

/// Smallest safety margin (ASSUMPTION: 500 ms or ttl/10, whichever is larger).
pub const MIN_SAFETY_MARGIN: Duration = Duration::from_millis(500);

/// The least slack a lock's renewal must have between its due time and the lock's local
/// deadline (ASSUMPTION: 50 ms, one round trip on a LAN plus a late timer). It also floors
/// the heartbeat period: the shortest lock kept alive (300 ms with the default margin) is
/// renewed every 100 ms.
pub const RENEWAL_RESERVE: Duration = Duration::from_millis(50);

/// The default safety margin for a TTL: `max(500 ms, ttl/10)`, but never more than `ttl/2`
/// (ASSUMPTION: otherwise a TTL ≤ 500 ms would yield handles born lost).
pub fn safety_margin(ttl: Duration) -> Duration {
    MIN_SAFETY_MARGIN.max(ttl / 10).min(ttl / 2)
}

/// When a lock renewed (or granted) by a request sent at `anchor` must be renewed again.
pub fn renew_by(anchor: Duration, ttl: Duration) -> Duration {
    anchor + ttl / 3
}

/// The time a renewal sent when due has to be answered before the lock's local deadline.
pub fn renewal_slack(ttl: Duration, margin: Duration) -> Duration {
    ttl.saturating_sub(margin).saturating_sub(ttl / 3)
}

/// The shortest lock TTL (whole milliseconds, within the contract's range) whose renewal has
/// at least [`RENEWAL_RESERVE`] of slack under `margin`; `None` if no TTL in range has.
/// The slack grows with the TTL under any sane margin rule, so a binary search finds it.
pub fn shortest_lock_ttl(margin: impl Fn(Duration) -> Duration) -> Option<Duration> {
    let works = |ms: u64| {
        let ttl = Duration::from_millis(ms);
        renewal_slack(ttl, margin(ttl)) >= RENEWAL_RESERVE
    };
    if !works(TTL_MILLIS_MAX) {
        return None;
    }
    let (mut bad, mut good) = (TTL_MILLIS_MIN - 1, TTL_MILLIS_MAX);
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if works(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(Duration::from_millis(good))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_the_larger_of_500ms_and_a_tenth_but_at_most_half() {
        assert_eq!(
            safety_margin(Duration::from_secs(10)),
            Duration::from_secs(1)
        );
        assert_eq!(
            safety_margin(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(
            safety_margin(Duration::from_millis(400)),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn with_the_default_margin_300ms_is_the_shortest_ttl_kept_alive() {
        assert_eq!(
            shortest_lock_ttl(safety_margin),
            Some(Duration::from_millis(300))
        );
        let slack = |ms| {
            renewal_slack(
                Duration::from_millis(ms),
                safety_margin(Duration::from_millis(ms)),
            )
        };
        assert!(slack(299) < RENEWAL_RESERVE);
        assert!(slack(500) >= Duration::from_millis(83), "{:?}", slack(500));
    }

    #[test]
    fn a_fixed_margin_moves_the_shortest_ttl() {
        // T − 1000 − T/3 ≥ 50  ⇔  T ≥ 1575.
        let fixed = |_| Duration::from_secs(1);
        assert_eq!(shortest_lock_ttl(fixed), Some(Duration::from_millis(1_575)));
        assert_eq!(shortest_lock_ttl(|_| Duration::from_secs(400)), None);
    }

    #[test]
    fn a_lock_is_renewed_a_third_of_its_ttl_after_its_last_renewal() {
        let at = renew_by(Duration::from_secs(2), Duration::from_millis(900));
        assert_eq!(at, Duration::from_millis(2_300));
    }
}
