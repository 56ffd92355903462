//! The JSON values stored under the keys of [`super::keys`], and the time arithmetic on them.
//!
//! Expiry has two layers. The etcd lease of the session (whole seconds, rounded up) deletes
//! the session, its locks and its index entries when no heartbeat renews it, even if every
//! replica is gone. The precise millisecond deadlines below are checked by every read, so a
//! lock or session is never reported past its TTL although the lease may outlive it by up to
//! a second. Deadlines are wall-clock milliseconds (`store::lease`) of the replica that wrote
//! them: replicas are assumed to run NTP-synchronised clocks (ASSUMPTION, see docs/etcd.md).

use serde::{Deserialize, Serialize};

use crate::store::lease;

/// The value of `s/<sessionId>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionRecord {
    pub ttl_millis: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The auth-file client that opened the session; only its requests find it. Absent
    /// without an auth file (and in records written before clients existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The etcd lease every key of this session is attached to.
    pub lease: i64,
    /// Wall-clock ms after which the session is dead, whatever the lease says.
    pub deadline_ms: u64,
}

impl SessionRecord {
    /// Milliseconds left, or `None` once expired.
    pub(super) fn remaining(&self, now: u64) -> Option<u64> {
        remaining(self.deadline_ms, now)
    }
}

/// The value of `l/<key>` and of its twin `h/<sessionId>/<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LockRecord {
    /// The lock key, decoded (index keys are read back by prefix).
    pub key: String,
    pub session_id: String,
    pub ttl_millis: u64,
    /// The lock's own deadline, moved forward by each heartbeat of its session and by each
    /// L4 of its holder.
    pub deadline_ms: u64,
    /// The holder's session deadline when this record was written; a lock never outlives its
    /// session, and copying it here spares every reader a second read.
    pub session_deadline_ms: u64,
    /// The holder session's `owner` label, copied for L7 for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl LockRecord {
    /// Milliseconds the lock still lives (both its TTL and its session), or `None`.
    pub(super) fn remaining(&self, now: u64) -> Option<u64> {
        remaining(self.deadline_ms.min(self.session_deadline_ms), now)
    }
}

/// The value of `g/<key>`: the ledger's fencing state for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LedgerHead {
    pub highest: u64,
    /// Entries accepted so far; the next entry's sequence number.
    pub count: u64,
}

/// etcd lease TTLs are whole seconds: round the millisecond TTL up so the lease never ends
/// before the deadline. etcd raises anything below its minimum (1.5 × election timeout) to
/// that minimum, which only makes the backstop later, never the reported expiry.
pub(super) fn lease_seconds(ttl_millis: u64) -> i64 {
    ttl_millis.div_ceil(1000).max(1) as i64
}

/// Milliseconds left, or `None` once the deadline is reached.
fn remaining(deadline_ms: u64, now: u64) -> Option<u64> {
    Some(lease::remaining(deadline_ms, now)).filter(|left| *left > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_round_up_to_whole_seconds() {
        assert_eq!(lease_seconds(100), 1);
        assert_eq!(lease_seconds(1000), 1);
        assert_eq!(lease_seconds(1001), 2);
        assert_eq!(lease_seconds(15_000), 15);
    }

    #[test]
    fn a_lock_dies_with_the_earlier_of_its_deadlines() {
        let lock = LockRecord {
            key: "k".into(),
            session_id: "s".into(),
            ttl_millis: 100,
            deadline_ms: 1_000,
            session_deadline_ms: 800,
            owner: None,
        };
        assert_eq!(lock.remaining(700), Some(100));
        assert_eq!(lock.remaining(800), None);
        assert_eq!(lock.remaining(900), None);
    }
}
