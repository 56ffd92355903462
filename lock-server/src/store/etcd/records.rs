//! The JSON values stored under the keys of [`super::keys`], the time arithmetic on them, and
//! how they are held once read: a key's holds and queue at one revision ([`KeyView`]), a live
//! session with its revision ([`LiveSession`]), the grant a hold's record answers.
//!
//! Expiry has two layers. The etcd lease of the session (whole seconds, rounded up) deletes
//! the session, its locks and its index entries when no heartbeat renews it, even if every
//! replica is gone. The precise millisecond deadlines below are checked by every read, so a
//! lock or session is never reported past its TTL although the lease may outlive it by up to
//! a second. Deadlines are wall-clock milliseconds (`store::lease`) of the replica that wrote
//! them: replicas are assumed to run NTP-synchronised clocks (ASSUMPTION, see docs/etcd.md).

use etcd_client::{Compare, CompareOp, KeyValue};
use lock_api::limits::MAX_FENCING_TOKEN;
use lock_api::{HoldKind, LockGrant, LockMode};
use serde::{Deserialize, Serialize};

use super::decode;
use crate::store::holds::Held;
use crate::store::queue::TicketTimes;
use crate::store::{self, lease, StoreError};

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

/// The value of `l/<key>/<sessionId>` (one hold) and of its twin `h/<sessionId>/<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LockRecord {
    /// The lock key, decoded (index keys are read back by prefix).
    pub key: String,
    pub session_id: String,
    pub ttl_millis: u64,
    /// Exclusive (absent, as in records written before shared holds) or shared.
    #[serde(default, skip_serializing_if = "LockMode::is_exclusive")]
    pub mode: LockMode,
    /// A shared hold's limit, when the key has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The lock's own deadline, moved forward by each heartbeat of its session and by each
    /// L4 of its holder.
    pub deadline_ms: u64,
    /// The holder's session deadline when this record was written; a lock never outlives its
    /// session, and copying it here spares every reader a second read.
    pub session_deadline_ms: u64,
    /// The holder session's `owner` label, copied for L7 for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The fencing token when the hold was handed to a queued ticket: that ticket's
    /// `create_revision`. Absent when the transaction that granted it created the hold's key:
    /// then the token is that key's `create_revision`. See [`LockRecord::token`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// For a hand-off to a ticket whose request had ended: the lock lives only until then
    /// unless an L4 of its holder claims it first (which clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_by_ms: Option<u64>,
    /// The hold's value (L4 `value`, replaced by L9 and by a renewal that names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The token epoch the hold was granted in (absent: 0, as in every record written
    /// before epochs and by a deployment never restored), see `epoch`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LockRecord {
    /// Milliseconds the lock still lives (its TTL, its session and its claim deadline), or
    /// `None`.
    pub(super) fn remaining(&self, now: u64) -> Option<u64> {
        let claim_by = self.claim_by_ms.unwrap_or(u64::MAX);
        remaining(
            self.deadline_ms.min(self.session_deadline_ms).min(claim_by),
            now,
        )
    }

    /// The fencing token of this record read at `kv` (the hold's key or its index twin,
    /// which are created together and share it).
    pub(super) fn token(&self, kv: &KeyValue) -> u64 {
        self.token
            .unwrap_or_else(|| revision_token(self.epoch, kv.create_revision()))
    }

    /// Exclusive, or shared under its limit.
    pub(super) fn hold(&self) -> HoldKind {
        hold_kind(self.mode, self.limit)
    }

    /// The L4 answer for this hold with its fencing token `token`; refuses a token a
    /// JavaScript number cannot hold exactly.
    pub(super) fn grant(&self, token: u64) -> Result<LockGrant, StoreError> {
        checked(store::lock_grant(
            &self.key,
            &self.session_id,
            self.hold(),
            token,
            self.ttl_millis,
        ))
    }
}

/// The fencing token of a hold created at etcd `revision` in `epoch`: the one place a
/// revision becomes a token. A revision past its epoch's room gives a token no grant may
/// carry ([`LockRecord::grant`] refuses it).
pub(super) fn revision_token(epoch: u64, revision: i64) -> u64 {
    u64::try_from(revision)
        .ok()
        .and_then(|revision| crate::store::epoch::token(epoch, revision))
        .unwrap_or(u64::MAX)
}

/// The value of `q/<key>/<sessionId>`: a ticket in the key's wait queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TicketRecord {
    pub session_id: String,
    /// The TTL the hold gets when handed to this ticket.
    pub ttl_millis: u64,
    /// The mode the ticket waits for (exclusive when absent).
    #[serde(default, skip_serializing_if = "LockMode::is_exclusive")]
    pub mode: LockMode,
    /// A shared ticket's limit, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Wall-clock ms until which a request of the ticket is open (`store::queue`).
    pub open_until_ms: u64,
    /// The ticket's grace period after `open_until_ms`.
    pub grace_millis: u64,
    /// The value the hold gets when handed to this ticket (L4 `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl TicketRecord {
    /// Its times, for the queue's rules.
    pub(super) fn times(&self) -> TicketTimes {
        TicketTimes {
            open_until: self.open_until_ms,
            grace: self.grace_millis,
        }
    }

    /// Whether the ticket still holds its place.
    pub(super) fn live(&self, now: u64) -> bool {
        self.times().live(now)
    }

    /// The hold it waits for.
    pub(super) fn hold(&self) -> HoldKind {
        hold_kind(self.mode, self.limit)
    }
}

/// The value of `v/<key>`: how many holds the key had right after the last transaction of
/// ours that changed them (a hold whose lease ran out since is not subtracted). Only its
/// `mod_revision` is ever compared; the count is for a reader of `etcdctl get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StampRecord {
    pub holders: usize,
}

/// The value of `m/<key>/<sessionId>` (why the transaction that wrote it ended that hold) and
/// of `n/<sessionId>` (the session is closing: `Released`). A watcher reads it at the revision
/// the hold's key was deleted; a hold deleted without one expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CauseRecord {
    pub cause: EndCause,
    /// Wall-clock ms of the writer when it decided.
    pub at_ms: u64,
}

/// Why a transaction of ours ended a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum EndCause {
    /// L6, or L3 closing the session.
    Released,
    /// R1.
    Revoked,
}

/// A stored mode and limit as the hold they describe (a limit stored beside "exclusive"
/// cannot be written; it would be ignored).
fn hold_kind(mode: LockMode, limit: Option<u32>) -> HoldKind {
    match mode {
        LockMode::Exclusive => HoldKind::Exclusive,
        LockMode::Shared => HoldKind::Shared { limit },
    }
}

/// A session record that was live when read.
pub(super) struct LiveSession {
    pub record: SessionRecord,
    /// `mod_revision` of `s/<id>`, for compare-and-swap.
    pub mod_revision: i64,
}

/// Whose sessions a read may find.
#[derive(Debug, Clone, Copy)]
pub(super) enum Whose<'a> {
    /// A request's: only those of the client it authenticated as (`None`: no auth file).
    Client(Option<&'a str>),
    /// The store's own, handing a lock to a queued ticket: any session.
    Any,
}

impl Whose<'_> {
    pub(super) fn admits(self, record: &SessionRecord) -> bool {
        match self {
            Whose::Client(client) => record.client.as_deref() == client,
            Whose::Any => true,
        }
    }
}

/// A key's holds and wait queue, read at one revision.
pub(super) struct KeyView {
    /// `v/<key>`, if present.
    pub stamp: Option<KeyValue>,
    /// The holds `l/<key>/*`, live or not, in token order.
    pub holds: Vec<(KeyValue, LockRecord)>,
    /// The tickets, oldest first, live or not.
    pub tickets: Vec<(KeyValue, TicketRecord)>,
    /// The revision the view was read at.
    pub revision: i64,
}

impl KeyView {
    /// Builds the view from the reads of `EtcdStore::key_reads`, in order (stamp, holds,
    /// queue); missing reads are empty.
    pub(super) fn decode(
        mut reads: impl Iterator<Item = Vec<KeyValue>>,
        revision: i64,
    ) -> Result<KeyView, StoreError> {
        let stamp = reads.next().unwrap_or_default().into_iter().next();
        let mut holds = reads
            .next()
            .unwrap_or_default()
            .into_iter()
            .map(|kv| decode(&kv).map(|hold| (kv, hold)))
            .collect::<Result<Vec<(KeyValue, LockRecord)>, _>>()?;
        holds.sort_by_key(|(kv, hold)| hold.token(kv));
        let tickets = reads
            .next()
            .unwrap_or_default()
            .into_iter()
            .map(|kv| decode(&kv).map(|ticket| (kv, ticket)))
            .collect::<Result<_, _>>()?;
        Ok(KeyView {
            stamp,
            holds,
            tickets,
            revision,
        })
    }

    /// The holds live at `now`, in token order.
    pub(super) fn live_holds(&self, now: u64) -> impl Iterator<Item = &(KeyValue, LockRecord)> {
        self.holds
            .iter()
            .filter(move |(_, hold)| hold.remaining(now).is_some())
    }

    /// The live hold of `session_id`, if any.
    pub(super) fn live_hold_of(
        &self,
        session_id: &str,
        now: u64,
    ) -> Option<&(KeyValue, LockRecord)> {
        self.live_holds(now)
            .find(|(_, hold)| hold.session_id == session_id)
    }

    /// Whether a hold record past its deadline is still there (its key not yet deleted).
    pub(super) fn has_expired_holds(&self, now: u64) -> bool {
        self.holds
            .iter()
            .any(|(_, hold)| hold.remaining(now).is_none())
    }

    /// How the live holds hold the key.
    pub(super) fn held(&self, now: u64) -> Held {
        held_by(self.live_holds(now).map(|(_, hold)| hold.hold()))
    }

    /// The live tickets' holds, in queue order.
    pub(super) fn queued(&self, now: u64) -> Vec<HoldKind> {
        self.tickets
            .iter()
            .filter(|(_, t)| t.live(now))
            .map(|(_, t)| t.hold())
            .collect()
    }

    /// The least time any live hold still has: the first moment the holders may change
    /// without a transaction of ours (0 when none is live).
    pub(super) fn holder_remaining(&self, now: u64) -> u64 {
        self.live_holds(now)
            .filter_map(|(_, hold)| hold.remaining(now))
            .min()
            .unwrap_or(0)
    }

    /// Live tickets: L7's `waiterCount`, and what the cap counts.
    pub(super) fn waiters(&self, now: u64) -> u32 {
        self.tickets.iter().filter(|(_, t)| t.live(now)).count() as u32
    }

    pub(super) fn ticket_of(&self, session_id: &str) -> Option<&(KeyValue, TicketRecord)> {
        self.tickets
            .iter()
            .find(|(_, t)| t.session_id == session_id)
    }
}

/// The key as its holds hold it. An exclusive hold beside others cannot be written (every
/// grant compares the key's stamp); should one be read all the same, the key counts as held
/// exclusive, so nothing more is granted beside it.
pub(super) fn held_by(holds: impl IntoIterator<Item = HoldKind>) -> Held {
    let holds: Vec<HoldKind> = holds.into_iter().collect();
    if holds.contains(&HoldKind::Exclusive) {
        return Held::Exclusive;
    }
    Held::of(holds)
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

/// Holds while the key in `kv` is still the version read.
pub(super) fn unchanged(kv: &KeyValue) -> Compare {
    Compare::mod_revision(kv.key(), CompareOp::Equal, kv.mod_revision())
}

/// Refuses a grant whose token is 0 or past what a JavaScript number holds exactly.
fn checked(grant: LockGrant) -> Result<LockGrant, StoreError> {
    let token = grant.fencing_token;
    if token == 0 || token > MAX_FENCING_TOKEN {
        return Err(StoreError::Internal(format!(
            "etcd revision {token} is not a valid fencing token"
        )));
    }
    Ok(grant)
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
            mode: LockMode::Exclusive,
            limit: None,
            owner: None,
            token: None,
            claim_by_ms: None,
            value: None,
            epoch: 0,
        };
        assert_eq!(lock.remaining(700), Some(100));
        assert_eq!(lock.remaining(800), None);
        assert_eq!(lock.remaining(900), None);
        let unclaimed = LockRecord {
            claim_by_ms: Some(750),
            ..lock
        };
        assert_eq!(unclaimed.remaining(700), Some(50));
        assert_eq!(unclaimed.remaining(750), None);
    }

    #[test]
    fn records_written_before_the_queue_still_read() {
        let old =
            r#"{"key":"k","sessionId":"s","ttlMillis":1,"deadlineMs":2,"sessionDeadlineMs":3}"#;
        let lock: LockRecord = serde_json::from_str(old).unwrap();
        assert_eq!((lock.token, lock.claim_by_ms), (None, None));
        assert_eq!(lock.hold(), HoldKind::Exclusive);
        let ticket = r#"{"sessionId":"s","ttlMillis":1,"openUntilMs":2,"graceMillis":3}"#;
        let ticket: TicketRecord = serde_json::from_str(ticket).unwrap();
        assert_eq!(ticket.hold(), HoldKind::Exclusive);
    }

    #[test]
    fn a_shared_hold_keeps_its_limit_and_an_exclusive_one_writes_no_mode() {
        let shared = r#"{"key":"k","sessionId":"s","ttlMillis":1,"mode":"shared","limit":3,"deadlineMs":2,"sessionDeadlineMs":3}"#;
        let shared: LockRecord = serde_json::from_str(shared).unwrap();
        assert_eq!(shared.hold(), HoldKind::Shared { limit: Some(3) });
        let grant = shared.grant(7).unwrap();
        assert_eq!((grant.mode, grant.limit), (LockMode::Shared, Some(3)));
        let exclusive = LockRecord {
            mode: LockMode::Exclusive,
            limit: None,
            ..shared
        };
        let written = serde_json::to_string(&exclusive).unwrap();
        assert!(
            !written.contains("mode") && !written.contains("limit"),
            "{written}"
        );
    }

    #[test]
    fn an_exclusive_hold_read_beside_shared_ones_blocks_everything() {
        const R: HoldKind = HoldKind::Shared { limit: None };
        assert_eq!(held_by([R, HoldKind::Exclusive, R]), Held::Exclusive);
        assert_eq!(
            held_by([R, R]),
            Held::Shared {
                count: 2,
                limit: None
            }
        );
        assert_eq!(held_by([]), Held::Free);
    }
}
