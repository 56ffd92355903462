//! Live counters of a run, shown while it runs and exported with it.

use lock_api::ErrorCode;
use serde::{Deserialize, Serialize};

/// What the run has seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// Acquisitions granted.
    pub grants: u32,
    /// L4 calls sent (granted or not).
    pub l4_calls: u32,
    /// 409 LOCK_CONTENDED answers.
    pub contended_409: u32,
    /// 429 CONTENTION_EXCEEDED answers.
    pub exceeded_429: u32,
    /// 503 NOT_LEADER answers.
    pub not_leader_503: u32,
    /// 503 STORE_UNAVAILABLE answers (the server's store could not write: a full disk, etcd
    /// without quorum). Absent from exports made before it existed.
    #[serde(default)]
    pub store_unavailable_503: u32,
    /// Locks the client found lost (heartbeat, deadline or release answered LOCK_LOST).
    pub lost_locks: u32,
    /// Ledger writes refused with FENCED_OUT.
    pub fenced_out: u32,
    /// Acquisitions that ran out of budget or attempts.
    pub gave_up: u32,
    /// Acquisitions that failed with anything else (network, validation, session lost).
    pub errors: u32,
    /// Holds the L8 stream saw that no L7 sample listed: what a timeline from polling alone
    /// would have lost (`model::coverage`). `None` without a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_by_sampling: Option<u32>,
}

impl Counters {
    /// Counts one refused L4 call by its error code (the call itself is counted separately
    /// by [`Counters::l4_calls`]). Codes that are not contention are ignored here.
    pub fn count_refusal(&mut self, code: ErrorCode) {
        match code {
            ErrorCode::LockContended => self.contended_409 += 1,
            ErrorCode::ContentionExceeded => self.exceeded_429 += 1,
            ErrorCode::NotLeader => self.not_leader_503 += 1,
            ErrorCode::StoreUnavailable => self.store_unavailable_503 += 1,
            _ => {}
        }
    }

    /// L4 calls per grant, the y axis of the sweep's first plot; `None` with no grant.
    pub fn calls_per_grant(&self) -> Option<f64> {
        (self.grants > 0).then(|| f64::from(self.l4_calls) / f64::from(self.grants))
    }

    /// Label of [`Counters::missed_by_sampling`] on the page and in the CSV.
    pub const MISSED_BY_SAMPLING: &'static str = "missed by sampling";

    /// `(label, value)` pairs in display order, shared by the live panel and the CSV; the
    /// stream's [`Counters::missed_by_sampling`] comes last, when there is a stream.
    pub fn entries(&self) -> Vec<(&'static str, u32)> {
        let mut entries = self.client_entries().to_vec();
        if let Some(missed) = self.missed_by_sampling {
            entries.push((Self::MISSED_BY_SAMPLING, missed));
        }
        entries
    }

    /// What the client counted itself.
    fn client_entries(&self) -> [(&'static str, u32); 10] {
        [
            ("grants", self.grants),
            ("L4 calls", self.l4_calls),
            ("409 contended", self.contended_409),
            ("429 exceeded", self.exceeded_429),
            ("503 not leader", self.not_leader_503),
            ("503 store unavailable", self.store_unavailable_503),
            ("lost locks", self.lost_locks),
            ("fenced-out writes", self.fenced_out),
            ("gave up", self.gave_up),
            ("errors", self.errors),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_land_in_their_bucket() {
        let mut c = Counters::default();
        c.count_refusal(ErrorCode::LockContended);
        c.count_refusal(ErrorCode::LockContended);
        c.count_refusal(ErrorCode::ContentionExceeded);
        c.count_refusal(ErrorCode::NotLeader);
        c.count_refusal(ErrorCode::StoreUnavailable);
        c.count_refusal(ErrorCode::StoreUnavailable);
        c.count_refusal(ErrorCode::ValidationFailed);
        assert_eq!(
            (
                c.contended_409,
                c.exceeded_429,
                c.not_leader_503,
                c.store_unavailable_503
            ),
            (2, 1, 1, 2)
        );
    }

    #[test]
    fn calls_per_grant_needs_a_grant() {
        let mut c = Counters {
            l4_calls: 9,
            ..Default::default()
        };
        assert_eq!(c.calls_per_grant(), None);
        c.grants = 3;
        assert_eq!(c.calls_per_grant(), Some(3.0));
        assert_eq!(c.entries()[1], ("L4 calls", 9));
    }

    #[test]
    fn missed_by_sampling_is_listed_only_with_a_stream() {
        let mut c = Counters::default();
        assert_eq!(c.entries().len(), 10);
        c.missed_by_sampling = Some(4);
        assert_eq!(c.entries().last(), Some(&(Counters::MISSED_BY_SAMPLING, 4)));
    }
}
