//! How long a grant is valid locally and when it must be renewed: the safety margin, the
//! renewal rule (when the heartbeat task must send the next L2 so that neither the session
//! nor any lock it holds lapses while heartbeats are answered) and the shortest lock TTL that
//! rule can keep alive.
//!
//! One L2 renews the session and every live lock of it, each to now + its own TTL, and a
//! renewal counts from when it was *sent*. A lock of TTL `T` renewed by a request sent at `s`
//! is valid locally until `s + T − margin(T)` (the margin absorbs the server's clock running
//! faster than ours; see [`safety_margin`]). Call `V = T − margin(T)` the lock's local
//! validity. The next heartbeat is due at the earliest of
//! - `s + heartbeatMillis` for the session (the server's own period, TTL/3), and
//! - `s + min(T/3, V/2)` for every held lock (the session's third, of the lock's TTL, but
//!   never later than halfway through its validity),
//!
//! recomputed on every grant, renewal and release. Sent when due, the renewal's answer has
//! [`renewal_slack`]`(T) = V − min(T/3, V/2)` to come back before the local deadline: that
//! slack must hold one round trip plus however late the timer fires. The halfway bound only
//! bites for short locks (under 1.5 s with the default margin, whose margin eats most of
//! the TTL), where a third would leave the renewal only a few tens of milliseconds. A TTL
//! whose slack is below [`RENEWAL_RESERVE`] cannot be kept alive and is refused up front
//! ([`shortest_lock_ttl`]); with the default margin that is every TTL below 400 ms (500 ms
//! locks have 125 ms of slack, 1 s locks 250 ms).

use std::time::Duration;

use lock_api::limits::{TTL_MILLIS_MAX, TTL_MILLIS_MIN};

/// Smallest safety margin (ASSUMPTION: 500 ms or ttl/10, whichever is larger).
pub const MIN_SAFETY_MARGIN: Duration = Duration::from_millis(500);

/// The least slack a lock's renewal must have between its due time and the lock's local
/// deadline (ASSUMPTION: 100 ms, one round trip on a LAN plus a timer that fires late on a
/// busy machine). It also floors the heartbeat period: the shortest lock kept alive (400 ms
/// with the default margin) is renewed every 100 ms.
pub const RENEWAL_RESERVE: Duration = Duration::from_millis(100);

/// The default safety margin for a TTL: `max(500 ms, ttl/10)`, but never more than `ttl/2`
/// (ASSUMPTION: otherwise a TTL ≤ 500 ms would yield handles born lost).
pub fn safety_margin(ttl: Duration) -> Duration {
    MIN_SAFETY_MARGIN.max(ttl / 10).min(ttl / 2)
}

/// How long after its last renewal a lock of `ttl` under `margin` is renewed again.
fn renewal_period(ttl: Duration, margin: Duration) -> Duration {
    (ttl / 3).min(ttl.saturating_sub(margin) / 2)
}

/// When a lock renewed (or granted) by a request sent at `anchor` must be renewed again.
pub fn renew_by(anchor: Duration, ttl: Duration, margin: Duration) -> Duration {
    anchor + renewal_period(ttl, margin)
}

/// The time a renewal sent when due has to be answered before the lock's local deadline.
pub fn renewal_slack(ttl: Duration, margin: Duration) -> Duration {
    ttl.saturating_sub(margin)
        .saturating_sub(renewal_period(ttl, margin))
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

/// The first re-send of a failed heartbeat or release waits up to this long (full jitter);
/// each further one up to twice as long, at most [`RETRY_CAP`]. ASSUMPTION: short enough that
/// a restarting server or a balancer's failover is noticed within a second of its end, long
/// enough that a down server sees a few requests a second per session, not a storm.
pub const RETRY_BASE: Duration = Duration::from_millis(100);

/// The largest delay before a re-send.
pub const RETRY_CAP: Duration = Duration::from_secs(1);

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
    fn with_the_default_margin_400ms_is_the_shortest_ttl_kept_alive() {
        assert_eq!(
            shortest_lock_ttl(safety_margin),
            Some(Duration::from_millis(400))
        );
        let slack = |ms| {
            renewal_slack(
                Duration::from_millis(ms),
                safety_margin(Duration::from_millis(ms)),
            )
        };
        assert!(slack(399) < RENEWAL_RESERVE);
        assert_eq!(slack(500), Duration::from_millis(125));
        assert_eq!(slack(1_000), Duration::from_millis(250));
        // Long locks keep the session's third: 10 s − 1 s margin − 10 s/3.
        assert_eq!(slack(9_000), Duration::from_millis(5_100));
    }

    #[test]
    fn a_fixed_margin_moves_the_shortest_ttl() {
        // Below 3 s the halfway bound applies: (T − 1000)/2 ≥ 100  ⇔  T ≥ 1200.
        let fixed = |_| Duration::from_secs(1);
        assert_eq!(shortest_lock_ttl(fixed), Some(Duration::from_millis(1_200)));
        assert_eq!(shortest_lock_ttl(|_| Duration::from_secs(400)), None);
    }

    #[test]
    fn a_lock_is_renewed_a_third_of_its_ttl_or_halfway_through_its_validity() {
        let renew = |ttl_ms| {
            let ttl = Duration::from_millis(ttl_ms);
            renew_by(Duration::from_secs(2), ttl, safety_margin(ttl))
        };
        // 9 s: a third (3 s) comes before halfway through 8.1 s of validity.
        assert_eq!(renew(9_000), Duration::from_millis(5_000));
        // 900 ms: 450 ms of validity, so halfway (225 ms) comes before a third (300 ms).
        assert_eq!(renew(900), Duration::from_millis(2_225));
    }
}
