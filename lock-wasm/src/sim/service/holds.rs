//! The rules of one key's holds, exclusive and shared: what a hold and a ticket are, which
//! hold fits beside the key's holds, and the shared limit in force. Both the fresh grant of
//! an L4 and the queue's hand-off ask these, so the two can never disagree.

use std::collections::BTreeMap;
use std::time::Duration;

use lock_api::{HoldKind, LockGrant};

use super::{Faults, SimSession, GRACE};

/// One hold of a key: a session's exclusive or shared grant.
#[derive(Clone)]
pub(super) struct SimLock {
    pub(super) session: String,
    pub(super) token: u64,
    pub(super) kind: HoldKind,
    pub(super) ttl: Duration,
    pub(super) expires: Duration,
    /// A hand-off to a ticket whose request had ended: the hold lives only until then unless
    /// an L4 of its session claims it.
    pub(super) claim_by: Option<Duration>,
    /// The hold's value (L4 `value`, replaced by L9).
    pub(super) value: Option<String>,
}

impl SimLock {
    /// When it ends unless renewed or claimed.
    pub(super) fn end(&self) -> Duration {
        self.claim_by.map_or(self.expires, |c| c.min(self.expires))
    }

    /// The L4 answer for this hold (`waitedMillis` 0: the request's wait fills it in).
    pub(super) fn grant(&self, key: &str) -> LockGrant {
        LockGrant {
            key: key.to_owned(),
            session_id: self.session.clone(),
            fencing_token: self.token,
            ttl_millis: self.ttl.as_millis() as u64,
            waited_millis: 0,
            mode: self.kind.mode(),
            limit: self.kind.limit(),
        }
    }
}

/// A ticket in a key's wait queue: one per (session, key), for the hold its first request
/// asked for.
#[derive(Clone)]
pub(super) struct SimTicket {
    pub(super) session: String,
    pub(super) kind: HoldKind,
    pub(super) ttl: Duration,
    /// Until when a request of it is open.
    pub(super) open_until: Duration,
    /// Arrival order.
    pub(super) seq: u64,
    /// The value its hold will have (its first request's L4 `value`).
    pub(super) value: Option<String>,
}

impl SimTicket {
    /// Live while a request of it is open or within the grace period after, and its session
    /// lives.
    pub(super) fn live(&self, now: Duration, sessions: &BTreeMap<String, SimSession>) -> bool {
        now < self.open_until + GRACE && sessions.contains_key(&self.session)
    }
}

/// Whether a hold of `kind` may be granted beside `holds`, the key's live holds: exclusive
/// only on a free key, shared only beside shared holds and below the limit. The planted
/// faults break exactly one clause each.
pub(super) fn fits(holds: &[SimLock], kind: HoldKind, faults: &Faults) -> bool {
    match kind {
        HoldKind::Exclusive => holds.is_empty() || faults.double_grant,
        HoldKind::Shared { limit } => {
            let beside_exclusive = holds.iter().any(|h| h.kind == HoldKind::Exclusive);
            let below_limit = limit.is_none_or(|limit| holds.len() < limit as usize);
            (!beside_exclusive || faults.shared_beside_exclusive)
                && (below_limit || faults.ignore_limit)
        }
    }
}

/// The limit every shared request of the key must name: the shared holders', else the first
/// live queued shared ticket's (`queue` holds live tickets only). `None` when neither
/// exists: then any limit goes, and the first to hold or queue sets it.
pub(super) fn limit_in_force(holds: &[SimLock], queue: &[SimTicket]) -> Option<Option<u32>> {
    let shared = |kind: HoldKind| matches!(kind, HoldKind::Shared { .. });
    holds
        .iter()
        .map(|h| h.kind)
        .find(|k| shared(*k))
        .or_else(|| queue.iter().map(|t| t.kind).find(|k| shared(*k)))
        .map(HoldKind::limit)
}

/// Whether a live ticket of another session is ahead of `session` in `queue`: before its
/// own ticket, or anywhere when it has none (a newcomer never barges past a waiter).
pub(super) fn ticket_ahead(queue: &[SimTicket], session: &str) -> bool {
    queue
        .iter()
        .take_while(|t| t.session != session)
        .next()
        .is_some()
}

/// Whether the tickets ahead of `session` hold back a shared request, by the rule: any
/// ticket ahead does. The planted `readers_barge` fault lets a reader past queued writers
/// while the key is held shared (a reader-preferring lock, which starves writers).
pub(super) fn held_back(
    queue: &[SimTicket],
    holds: &[SimLock],
    session: &str,
    kind: HoldKind,
    faults: &Faults,
) -> bool {
    let joins_readers = faults.readers_barge
        && matches!(kind, HoldKind::Shared { .. })
        && holds.first().is_some_and(|h| h.kind != HoldKind::Exclusive);
    ticket_ahead(queue, session) && !joins_readers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(kind: HoldKind) -> SimLock {
        SimLock {
            session: "s".into(),
            token: 1,
            kind,
            ttl: Duration::from_secs(1),
            expires: Duration::from_secs(1),
            claim_by: None,
            value: None,
        }
    }

    fn ticket(session: &str, kind: HoldKind) -> SimTicket {
        SimTicket {
            session: session.into(),
            kind,
            ttl: Duration::from_secs(1),
            open_until: Duration::from_secs(1),
            seq: 1,
            value: None,
        }
    }

    const EXCLUSIVE: HoldKind = HoldKind::Exclusive;
    const READ: HoldKind = HoldKind::Shared { limit: None };
    const TWO: HoldKind = HoldKind::Shared { limit: Some(2) };

    #[test]
    fn exclusive_fits_a_free_key_only_and_shared_beside_shared_below_the_limit() {
        let ok = Faults::default();
        assert!(fits(&[], EXCLUSIVE, &ok));
        assert!(!fits(&[hold(READ)], EXCLUSIVE, &ok));
        assert!(!fits(&[hold(EXCLUSIVE)], EXCLUSIVE, &ok));
        assert!(fits(&[], TWO, &ok));
        assert!(fits(&[hold(TWO)], TWO, &ok));
        assert!(!fits(&[hold(TWO), hold(TWO)], TWO, &ok));
        assert!(!fits(&[hold(EXCLUSIVE)], READ, &ok));
        assert!(fits(&vec![hold(READ); 100], READ, &ok));
    }

    #[test]
    fn each_planted_fault_breaks_its_own_clause() {
        let beside = Faults {
            shared_beside_exclusive: true,
            ..Faults::default()
        };
        assert!(fits(&[hold(EXCLUSIVE)], READ, &beside));
        assert!(!fits(&[hold(TWO), hold(TWO)], TWO, &beside));
        let over = Faults {
            ignore_limit: true,
            ..Faults::default()
        };
        assert!(fits(&[hold(TWO), hold(TWO)], TWO, &over));
        assert!(!fits(&[hold(EXCLUSIVE)], TWO, &over));
    }

    #[test]
    fn the_limit_in_force_is_the_holders_else_the_first_queued_readers() {
        assert_eq!(limit_in_force(&[], &[]), None);
        assert_eq!(
            limit_in_force(&[hold(TWO)], &[ticket("a", READ)]),
            Some(Some(2))
        );
        let queue = [ticket("a", EXCLUSIVE), ticket("b", READ), ticket("c", TWO)];
        assert_eq!(limit_in_force(&[hold(EXCLUSIVE)], &queue), Some(None));
        assert_eq!(limit_in_force(&[hold(EXCLUSIVE)], &queue[..1]), None);
    }

    #[test]
    fn a_ticket_is_ahead_unless_the_session_is_first() {
        let queue = [ticket("a", EXCLUSIVE), ticket("b", READ)];
        assert!(!ticket_ahead(&queue, "a"));
        assert!(ticket_ahead(&queue, "b"));
        assert!(ticket_ahead(&queue, "newcomer"));
        assert!(!ticket_ahead(&[], "newcomer"));
    }

    #[test]
    fn only_the_barging_fault_lets_a_reader_past_a_queued_writer() {
        let queue = [ticket("w", EXCLUSIVE)];
        let held = [hold(READ)];
        assert!(held_back(&queue, &held, "r", READ, &Faults::default()));
        let barge = Faults {
            readers_barge: true,
            ..Faults::default()
        };
        assert!(!held_back(&queue, &held, "r", READ, &barge));
        assert!(held_back(&queue, &held, "w2", EXCLUSIVE, &barge));
        assert!(held_back(&queue, &[hold(EXCLUSIVE)], "r", READ, &barge));
    }
}
