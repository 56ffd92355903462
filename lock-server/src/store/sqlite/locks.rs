//! Locks: L4 acquire (with the grant hold-back after an unclean start), L6 release, L7 read,
//! R1 revoke, and the wait queue (`store::queue`): tickets in the TEMP table `tickets`, and
//! the hand-off ([`settle`]) that grants a key's head tickets inside the transaction that
//! ended a hold of it or noticed one expired.
//!
//! A key has any number of hold rows, one per holding session: one exclusive, or shared ones
//! under their limit (the rules are `store::holds`', applied here and nowhere else in this
//! backend). A hold row lives while its own deadline, its session's and, for a hand-off
//! nobody claimed yet, its `claim_by` all lie ahead; a dead row is ignored by every read
//! until the reaper deletes it (on a watched key the next transaction that reads the holds
//! deletes it, so its `expired` event comes before whatever follows).
//!
//! Every change of a watched key is recorded as an L8 event where it is made (`events`).

use lock_api::{EventKind, HoldKind, Holder};
use rusqlite::params;

use super::db::{hold_columns, hold_of_row, sql, Db};
use super::events::{self, record, record_grant, HoldFacts};
use super::sessions::{live_session, SessionOf};
use crate::store::holds::{check_limit, grantable_heads, limit_in_force, Held};
use crate::store::lease::remaining;
use crate::store::queue::{Attempt, Queueing, TicketTimes};
use crate::store::{lock_grant, KeyState, StoreError};

/// A live hold of a key.
struct LiveHold {
    session_id: String,
    token: u64,
    ttl: u64,
    hold: HoldKind,
    /// The earliest of its own, its session's and its claim deadline.
    deadline: u64,
    /// Its session's `owner` label.
    owner: Option<String>,
    /// Its value (L4 `value`, L9).
    value: Option<String>,
}

impl LiveHold {
    /// The hold as an event names it.
    fn facts(&self) -> HoldFacts<'_> {
        HoldFacts {
            session_id: &self.session_id,
            token: self.token,
            hold: self.hold,
            owner: self.owner.clone(),
            value: self.value.clone(),
        }
    }
}

/// How the key is held, for the grant rules.
fn held_by(holds: &[LiveHold]) -> Held {
    Held::of(holds.iter().map(|h| h.hold))
}

/// Whether a key held like this could take any further holder: only then can a hand-off
/// grant anything, so only then are its tickets read.
fn takes_another(held: Held) -> bool {
    held.admits(HoldKind::Shared { limit: None })
}

/// L4, one attempt. With `queue`, this session's ticket is extended (or taken) so that it
/// keeps its place while this request is open. `value` goes with a new hold, replaces a
/// renewed one's (when given) and waits with the ticket.
#[allow(clippy::too_many_arguments)]
pub(super) fn acquire(
    db: &mut Db,
    key: &str,
    session: &SessionOf,
    ttl: u64,
    hold: HoldKind,
    value: Option<String>,
    queue: Option<Queueing>,
) -> Result<Attempt, StoreError> {
    refuse_during_holdback(db)?;
    live_session(db, session)?;
    let session_id = session.id.as_str();
    // A hold that ran out unnoticed passes to the queue first, maybe to this very session.
    let holds = settled_holds(db, key)?;
    if let Some(own) = holds.iter().find(|h| h.session_id == session_id) {
        return renewed(db, key, own, hold, value);
    }
    let tickets = live_tickets_of(db, key)?;
    let own_ticket = tickets.iter().position(|t| t.session_id == session_id);
    let held = held_by(&holds);
    // The limit every other holder and waiter agreed on; the session's own ticket is not
    // asked (a re-send may change what the ticket asks for, see `renew_ticket`).
    let others = tickets.iter().filter(|t| t.session_id != session_id);
    check_limit(hold, limit_in_force(held, others.map(|t| t.hold)))
        .map_err(|in_force| StoreError::LimitMismatch { in_force })?;
    // No barging: only tickets behind this session's own (all of them without one) may be
    // overtaken, and those it does not overtake (it takes its own place).
    let ahead = &tickets[..own_ticket.unwrap_or(tickets.len())];
    if held.admits(hold) && ahead.is_empty() {
        let token = grant_hold(db, key, session_id, hold, ttl, None, value.as_deref())?;
        if own_ticket.is_some() {
            leave_queue(db, key, session_id)?;
        }
        record_grant(db, key, EventKind::Granted, session_id, token, hold, value)?;
        if own_ticket.is_some() {
            // Its ticket may have asked for another mode and kept readers behind it waiting:
            // they may now be granted beside this hold.
            settle(db, key)?;
        }
        return Ok(granted(db, key, session_id, hold, token, ttl));
    }
    let Some(queue) = queue else {
        return Ok(Attempt::Contended);
    };
    match own_ticket {
        Some(at) => renew_ticket(db, tickets[at].seq, hold, value, queue)?,
        None => {
            let ticket = NewTicket {
                session_id,
                ttl,
                hold,
                value,
            };
            join_queue(db, key, ticket, queue, tickets.len())?
        }
    }
    Ok(Attempt::Queued {
        holder_remaining: remaining(next_change(&holds, ahead, queue), db.now),
        seen: 0,
    })
}

/// 503 during the hold-back after an unclean start (see `recovery`): holds granted before it
/// may still be live, whatever rows the crash lost.
fn refuse_during_holdback(db: &Db) -> Result<(), StoreError> {
    if db.now >= db.holdback_until {
        return Ok(());
    }
    let wait = db.holdback_until - db.now;
    Err(StoreError::Unavailable {
        reason: format!(
            "holding back grants for {wait} ms after an unclean restart: leases granted \
             before it may still be live"
        ),
        leader: None,
        retry_after_millis: Some(wait.min(5_000)),
    })
}

/// Idempotent L4 of a holding session: the same grant (same token and mode, the hold's own
/// TTL), renewed from now and claimed. The request arrived after it was sent, so the deadline
/// is never earlier than the client's `sentAt + waitedMillis + ttl` for it. A shared L4 of
/// the exclusive holder gets the exclusive grant (it holds more than it asked for); an
/// exclusive L4 of a shared holder is refused: two readers upgrading would wait for each
/// other forever. A `value` replaces the hold's (watchers see a changed one as `proclaimed`).
fn renewed(
    db: &mut Db,
    key: &str,
    own: &LiveHold,
    asked: HoldKind,
    value: Option<String>,
) -> Result<Attempt, StoreError> {
    if matches!(
        (own.hold, asked),
        (HoldKind::Shared { .. }, HoldKind::Exclusive)
    ) {
        return Err(StoreError::UpgradeNotAllowed);
    }
    db.conn
        .prepare_cached(
            "UPDATE locks SET expires_at = ?3, claim_by = NULL WHERE key = ?1 AND session_id = ?2",
        )
        .map_err(sql)?
        .execute(params![key, own.session_id, db.now + own.ttl])
        .map_err(sql)?;
    leave_queue(db, key, &own.session_id)?;
    if let Some(value) = value.filter(|v| own.value.as_ref() != Some(v)) {
        set_value(db, key, &own.session_id, &value)?;
        let facts = HoldFacts {
            value: Some(value),
            ..own.facts()
        };
        record(db, key, EventKind::Proclaimed, Some(facts))?;
    }
    Ok(granted(
        db,
        key,
        &own.session_id,
        own.hold,
        own.token,
        own.ttl,
    ))
}

/// The wall-clock ms by which a queued request looks again if nothing woke it: the earliest
/// deadline of a holder, or the end of a ticket ahead of it (either may let it in, and
/// neither writes anything when it passes); at most its own wait's end.
fn next_change(holds: &[LiveHold], ahead: &[Ticket], queue: Queueing) -> u64 {
    let holders = holds.iter().map(|h| h.deadline);
    let tickets = ahead.iter().map(|t| live_until(t.times));
    holders
        .chain(tickets)
        .min()
        .unwrap_or(queue.open_until)
        .min(queue.open_until)
}

/// A request of `session_id` for `key` that was open until `open_until` ended early (its
/// client went away): the ticket's grace period starts now, unless a later request of the
/// session has extended it since.
pub(super) fn end_wait(
    db: &mut Db,
    key: &str,
    session_id: &str,
    open_until: u64,
) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "UPDATE tickets SET open_until = ?4
             WHERE key = ?1 AND session_id = ?2 AND open_until = ?3 AND open_until > ?4",
        )
        .map_err(sql)?
        .execute(params![key, session_id, open_until, db.now])
        .map_err(sql)?;
    Ok(())
}

/// L6: compare-and-delete of the one hold `(key, token)` (a shared holder releases its own
/// hold, nobody else's); the queue's grantable head tickets get the key in the same
/// transaction.
pub(super) fn release(db: &mut Db, key: &str, fencing_token: u64) -> Result<(), StoreError> {
    let mut holds = live_holds(db, key)?;
    let Some(at) = holds.iter().position(|h| h.token == fencing_token) else {
        return Err(StoreError::LockLost);
    };
    let released = holds.remove(at);
    delete_hold(db, key, &released.session_id)?;
    record(db, key, EventKind::Released, Some(released.facts()))?;
    hand_off(db, key, held_by(&holds)).map(drop)
}

/// L9: replaces the value of the hold `(key, token)` of `session` (a live session of the
/// caller, else SESSION_NOT_FOUND; a live hold of that session, else LOCK_LOST).
pub(super) fn proclaim(
    db: &mut Db,
    key: &str,
    session: &SessionOf,
    token: u64,
    value: String,
) -> Result<(), StoreError> {
    live_session(db, session)?;
    let holds = live_holds(db, key)?;
    let Some(own) = holds
        .iter()
        .find(|h| h.token == token && h.session_id == session.id)
    else {
        return Err(StoreError::LockLost);
    };
    set_value(db, key, &own.session_id, &value)?;
    let facts = HoldFacts {
        value: Some(value),
        ..own.facts()
    };
    record(db, key, EventKind::Proclaimed, Some(facts))
}

fn set_value(db: &mut Db, key: &str, session_id: &str, value: &str) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("UPDATE locks SET value = ?3 WHERE key = ?1 AND session_id = ?2")
        .map_err(sql)?
        .execute(params![key, session_id, value])
        .map_err(sql)?;
    Ok(())
}

/// L7: the holders in token order, named by their holder ids, never their session ids.
/// Settles first, so no answer shows a key that could take a live ticket's hold beside its
/// holders while that ticket waits.
pub(super) fn state(db: &mut Db, key: &str) -> Result<KeyState, StoreError> {
    let holds = settled_holds(db, key)?;
    let waiters = db.live_ticket_count(key)?;
    let holders = holds
        .iter()
        .map(|h| Holder {
            value: h.value.clone(),
            holder_id: db.holder_ids.of(&h.session_id),
            owner: h.owner.clone(),
            fencing_token: h.token,
            remaining_millis: remaining(h.deadline, db.now),
        })
        .collect();
    Ok(KeyState {
        // Every holder holds the key the same way (one exclusive, or shared under one limit).
        hold: holds.first().map(|h| h.hold),
        holders,
        waiters,
    })
}

/// R1: without `only`, deletes every hold row of the key (live or not); with it, the one
/// live hold with that token. Then hands the key to its queue. The revoked live tokens, in
/// order.
pub(super) fn revoke(db: &mut Db, key: &str, only: Option<u64>) -> Result<Vec<u64>, StoreError> {
    let holds = live_holds(db, key)?;
    let (revoked, kept): (Vec<LiveHold>, Vec<LiveHold>) = holds
        .into_iter()
        .partition(|h| only.is_none_or(|token| h.token == token));
    match only {
        None => delete_holds(db, key)?,
        Some(_) if revoked.is_empty() => return Ok(Vec::new()),
        Some(_) => delete_hold(db, key, &revoked[0].session_id)?,
    }
    for hold in &revoked {
        record(db, key, EventKind::Revoked, Some(hold.facts()))?;
    }
    hand_off(db, key, held_by(&kept))?;
    Ok(revoked.iter().map(|h| h.token).collect())
}

/// The hand-off: grants the key's head tickets that its live holders admit (dropping the
/// dead tickets). Every transaction that ends a hold, or may find one ended by time, calls
/// it (or [`settled_holds`], or [`hand_off`] right after deleting the hold), so a live
/// ticket never waits at the head of the queue while the holders would admit it.
pub(super) fn settle(db: &mut Db, key: &str) -> Result<(), StoreError> {
    settled_holds(db, key).map(drop)
}

/// [`settle`] for every key a transaction freed (a closed session's, the reaper's), in order.
pub(super) fn settle_all(db: &mut Db, keys: &[String]) -> Result<(), StoreError> {
    for key in keys {
        settle(db, key)?;
    }
    Ok(())
}

/// The key's live holds after [`settle`]: one read of the holds when the key is held
/// exclusive or nobody queues, the common case.
fn settled_holds(db: &mut Db, key: &str) -> Result<Vec<LiveHold>, StoreError> {
    let holds = live_holds(db, key)?;
    if hand_off(db, key, held_by(&holds))? {
        live_holds(db, key)
    } else {
        Ok(holds)
    }
}

/// [`settle`] for a key whose live holds are `held`: grants its head tickets in order while
/// each is compatible with the holders then (`store::holds::grantable_heads`), each with its
/// own token; whether it granted any. A key without tickets (known in memory) or that takes
/// nobody more costs no ticket read.
fn hand_off(db: &mut Db, key: &str, held: Held) -> Result<bool, StoreError> {
    if !db.queued.may_have(key) || !takes_another(held) {
        return Ok(false);
    }
    let tickets = live_tickets_of(db, key)?;
    let heads = grantable_heads(held, tickets.iter().map(|t| t.hold));
    if heads == tickets.len() {
        db.queued.emptied(key);
    }
    for head in &tickets[..heads] {
        grant_ticket(db, key, head)?;
    }
    Ok(heads > 0)
}

/// Grants `key` to a head ticket: the ticket goes, the hold is written with a fresh token,
/// and its waiter is woken after the commit, with the grant if its request is still open
/// (that request answers it as it is); else the hold must be claimed by the ticket's grace
/// period's end.
fn grant_ticket(db: &mut Db, key: &str, head: &Ticket) -> Result<(), StoreError> {
    delete_ticket(db, key, head.seq)?;
    let claim_by = head.times.claim_by(db.now);
    let value = head.value.as_deref();
    let token = grant_hold(
        db,
        key,
        &head.session_id,
        head.hold,
        head.ttl,
        claim_by,
        value,
    )?;
    let value = head.value.clone();
    record_grant(
        db,
        key,
        EventKind::HandedOff,
        &head.session_id,
        token,
        head.hold,
        value,
    )?;
    let handed = claim_by.is_none().then(|| {
        let grant = lock_grant(key, &head.session_id, head.hold, token, head.ttl);
        (grant, db.now)
    });
    db.granted
        .push((key.to_string(), head.session_id.clone(), handed));
    Ok(())
}

fn granted(db: &Db, key: &str, session_id: &str, hold: HoldKind, token: u64, ttl: u64) -> Attempt {
    Attempt::Granted {
        grant: lock_grant(key, session_id, hold, token, ttl),
        at: db.now,
    }
}

/// Writes a new hold for `session_id` with a fresh token and `value`; returns the token. It
/// replaces only a dead row of the same session (a live one is renewed, never granted again).
#[allow(clippy::too_many_arguments)]
fn grant_hold(
    db: &mut Db,
    key: &str,
    session_id: &str,
    hold: HoldKind,
    ttl: u64,
    claim_by: Option<u64>,
    value: Option<&str>,
) -> Result<u64, StoreError> {
    let token = db
        .tokens
        .next_token()
        .map_err(super::fencing::into_store_error)?;
    let (mode, limit) = hold_columns(hold);
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO locks
                 (key, session_id, token, ttl_ms, expires_at, claim_by, mode, shared_limit,
                  value)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(sql)?
        .execute(params![
            key,
            session_id,
            token,
            ttl,
            db.now + ttl,
            claim_by,
            mode,
            limit,
            value
        ])
        .map_err(sql)?;
    Ok(token)
}

/// The key's live holds, in token order. On a watched key the dead ones are reported
/// `expired` and deleted first (see [`expire_dead`]).
fn live_holds(db: &mut Db, key: &str) -> Result<Vec<LiveHold>, StoreError> {
    if db.feeds.is_watched(key) {
        expire_dead(db, key)?;
    }
    db.conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms,
                    MIN(l.expires_at, s.expires_at, COALESCE(l.claim_by, l.expires_at)), s.owner,
                    l.mode, l.shared_limit, l.value
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND l.expires_at > ?2 AND s.expires_at > ?2
               AND (l.claim_by IS NULL OR l.claim_by > ?2)
             ORDER BY l.token",
        )
        .map_err(sql)?
        .query_map(params![key, db.now], hold_row)
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)
}

/// A hold from a row of `session_id, token, ttl_ms, deadline, owner, mode, shared_limit,
/// value`.
fn hold_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LiveHold> {
    Ok(LiveHold {
        session_id: r.get(0)?,
        token: r.get(1)?,
        ttl: r.get(2)?,
        deadline: r.get(3)?,
        owner: r.get(4)?,
        hold: hold_of_row(r, 5, 6)?,
        value: r.get(7)?,
    })
}

/// A watched key's dead hold rows (own TTL, claim deadline or session over) are reported
/// `expired`, in token order, and deleted, so each is reported once and before anything a
/// transaction does with the key after noticing it (a dead row is dead for ever: nothing
/// renews it, so deleting it early changes no answer).
fn expire_dead(db: &mut Db, key: &str) -> Result<(), StoreError> {
    let dead: Vec<LiveHold> = db
        .conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms, l.expires_at, s.owner, l.mode,
                    l.shared_limit, l.value
             FROM locks l LEFT JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND NOT (l.expires_at > ?2 AND COALESCE(s.expires_at > ?2, 0)
                                       AND (l.claim_by IS NULL OR l.claim_by > ?2))
             ORDER BY l.token",
        )
        .map_err(sql)?
        .query_map(params![key, db.now], hold_row)
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    for hold in &dead {
        delete_hold(db, key, &hold.session_id)?;
        record(db, key, EventKind::Expired, Some(hold.facts()))?;
    }
    Ok(())
}

fn delete_hold(db: &mut Db, key: &str, session_id: &str) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM locks WHERE key = ?1 AND session_id = ?2")
        .map_err(sql)?
        .execute(params![key, session_id])
        .map_err(sql)?;
    Ok(())
}

fn delete_holds(db: &mut Db, key: &str) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM locks WHERE key = ?1")
        .map_err(sql)?
        .execute([key])
        .map_err(sql)?;
    Ok(())
}

/// A ticket row.
struct Ticket {
    seq: i64,
    session_id: String,
    ttl: u64,
    /// What it asks for: its latest request's mode and limit.
    hold: HoldKind,
    /// The value its latest request carried.
    value: Option<String>,
    times: TicketTimes,
}

/// A ticket about to be taken.
struct NewTicket<'a> {
    session_id: &'a str,
    ttl: u64,
    hold: HoldKind,
    value: Option<String>,
}

/// When a ticket stops holding its place unless a request of it comes.
fn live_until(times: TicketTimes) -> u64 {
    times.open_until.saturating_add(times.grace)
}

/// The key's live tickets in queue order; the dead ones (grace period over, session gone)
/// are deleted on the way. A key without tickets (known in memory) costs no read.
fn live_tickets_of(db: &mut Db, key: &str) -> Result<Vec<Ticket>, StoreError> {
    if !db.queued.may_have(key) {
        return Ok(Vec::new());
    }
    let rows: Vec<(Ticket, bool)> = db
        .conn
        .prepare_cached(
            "SELECT t.seq, t.session_id, t.ttl_ms, t.open_until, t.grace_ms, t.mode,
                    t.shared_limit, COALESCE(s.expires_at > ?2, 0), t.value
             FROM tickets t LEFT JOIN sessions s ON s.id = t.session_id
             WHERE t.key = ?1 ORDER BY t.seq",
        )
        .map_err(sql)?
        .query_map(params![key, db.now], |r| {
            let ticket = Ticket {
                seq: r.get(0)?,
                session_id: r.get(1)?,
                ttl: r.get(2)?,
                times: TicketTimes {
                    open_until: r.get(3)?,
                    grace: r.get(4)?,
                },
                hold: hold_of_row(r, 5, 6)?,
                value: r.get(8)?,
            };
            Ok((ticket, r.get(7)?))
        })
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let mut live = Vec::with_capacity(rows.len());
    for (ticket, session_live) in rows {
        if session_live && ticket.times.live(db.now) {
            live.push(ticket);
        } else {
            delete_ticket(db, key, ticket.seq)?;
        }
    }
    if live.is_empty() {
        db.queued.emptied(key);
    }
    Ok(live)
}

/// Keeps the session's live ticket (`seq`) open until at least the request's end. The ticket
/// keeps its place and asks for what the latest request asks for (ASSUMPTION: a re-send that
/// changes its mode or limit means the caller changed its mind, not a second request); a
/// value replaces the ticket's.
fn renew_ticket(
    db: &mut Db,
    seq: i64,
    hold: HoldKind,
    value: Option<String>,
    queue: Queueing,
) -> Result<(), StoreError> {
    let (mode, limit) = hold_columns(hold);
    db.conn
        .prepare_cached(
            "UPDATE tickets SET open_until = MAX(open_until, ?2), grace_ms = ?3,
                                mode = ?4, shared_limit = ?5, value = COALESCE(?6, value)
             WHERE seq = ?1",
        )
        .map_err(sql)?
        .execute(params![
            seq,
            queue.open_until,
            queue.grace,
            mode,
            limit,
            value
        ])
        .map_err(sql)?;
    Ok(())
}

/// Takes a ticket at the end of the key's queue, which holds `live` live tickets and none of
/// this session (a dead one of it is replaced); refuses when the queue is full.
fn join_queue(
    db: &mut Db,
    key: &str,
    ticket: NewTicket<'_>,
    queue: Queueing,
    live: usize,
) -> Result<(), StoreError> {
    if live >= queue.cap as usize {
        return Err(StoreError::QueueFull);
    }
    db.queued.joined(key);
    let (mode, limit) = hold_columns(ticket.hold);
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO tickets
                 (key, session_id, ttl_ms, open_until, grace_ms, mode, shared_limit, value)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(sql)?
        .execute(params![
            key,
            ticket.session_id,
            ticket.ttl,
            queue.open_until,
            queue.grace,
            mode,
            limit,
            ticket.value
        ])
        .map_err(sql)?;
    events::tickets_changed(db, key);
    Ok(())
}

fn delete_ticket(db: &mut Db, key: &str, seq: i64) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM tickets WHERE seq = ?1")
        .map_err(sql)?
        .execute([seq])
        .map_err(sql)?;
    events::tickets_changed(db, key);
    Ok(())
}

/// Drops the session's ticket for `key` (its request got the key).
fn leave_queue(db: &mut Db, key: &str, session_id: &str) -> Result<(), StoreError> {
    if !db.queued.may_have(key) {
        return Ok(());
    }
    db.conn
        .prepare_cached("DELETE FROM tickets WHERE key = ?1 AND session_id = ?2")
        .map_err(sql)?
        .execute(params![key, session_id])
        .map_err(sql)?;
    events::tickets_changed(db, key);
    Ok(())
}
