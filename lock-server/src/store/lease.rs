//! Lease time, for every backend: deadlines are wall-clock milliseconds since the Unix epoch,
//! because they are stored and must keep counting while the server is down (a lease that ran
//! out during a restart is gone when the server comes back) and, on a shared backend, must
//! mean the same on every replica. ASSUMPTION: the wall clock does not step backwards by more
//! than a small fraction of a TTL, and replicas' clocks are NTP-synchronised (see
//! ARCHITECTURE.md).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in wall-clock milliseconds.
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Milliseconds left until `deadline`, 0 when past.
pub fn remaining(deadline: u64, now: u64) -> u64 {
    deadline.saturating_sub(now)
}
