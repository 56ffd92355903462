//! Locks: L4 acquire (with the grant hold-back after an unclean start), L6 release, L7 read,
//! R1 revoke, and the wait queue (`store::queue`): tickets in the TEMP table `tickets`, and
//! the hand-off ([`settle`]) that grants a freed key to its first live ticket inside the
//! transaction that freed it or noticed it expired. A lock row lives while its own deadline,
//! its session's and, for a hand-off nobody claimed yet, its `claim_by` all lie ahead.

use lock_api::Holder;
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use super::sessions::{live_session, SessionOf};
use crate::store::lease::remaining;
use crate::store::queue::{Attempt, Queueing, TicketTimes};
use crate::store::{lock_grant, KeyState, StoreError};

/// A live lock row.
struct LiveLock {
    session_id: String,
    token: u64,
    ttl: u64,
    /// The earliest of its own, its session's and its claim deadline.
    deadline: u64,
    /// Its session's `owner` label.
    owner: Option<String>,
}

/// L4, one attempt. With `queue`, this session's ticket is extended (or taken) so that it
/// keeps its place while this request is open.
pub(super) fn acquire(
    db: &mut Db,
    key: &str,
    session: &SessionOf,
    ttl: u64,
    queue: Option<Queueing>,
) -> Result<Attempt, StoreError> {
    let session_id = session.id.as_str();
    if db.now < db.holdback_until {
        let wait = db.holdback_until - db.now;
        return Err(StoreError::Unavailable {
            reason: format!(
                "holding back grants for {wait} ms after an unclean restart: leases granted \
                 before it may still be live"
            ),
            leader: None,
            retry_after_millis: Some(wait.min(5_000)),
        });
    }
    live_session(db, session)?;
    if let Some(queue) = queue {
        renew_ticket(db, key, session_id, queue)?;
    }
    // A lock that ran out unnoticed passes to the queue first, maybe to this very session.
    match settled_lock(db, key)? {
        Some(lock) if lock.session_id == session_id => {
            // Idempotent L4: the same grant (same token, the lock's own TTL), renewed from
            // now and claimed. The request arrived after it was sent, so the deadline is never
            // earlier than the client's `sentAt + waitedMillis + ttl` for it.
            db.conn
                .prepare_cached("UPDATE locks SET expires_at = ?2, claim_by = NULL WHERE key = ?1")
                .map_err(sql)?
                .execute(params![key, db.now + lock.ttl])
                .map_err(sql)?;
            leave_queue(db, key, session_id)?;
            Ok(granted(db, key, session_id, lock.token, lock.ttl))
        }
        Some(lock) => match queue {
            None => Ok(Attempt::Contended),
            Some(queue) => {
                join_queue(db, key, session_id, ttl, queue)?;
                Ok(Attempt::Queued {
                    holder_remaining: remaining(lock.deadline, db.now),
                    seen: 0,
                })
            }
        },
        // `settle` left the key free, so no live ticket waits: no barging is possible.
        None => {
            let token = grant_lock(db, key, session_id, ttl, None)?;
            Ok(granted(db, key, session_id, token, ttl))
        }
    }
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

/// L6: compare-and-delete on `(key, token)`; the queue's first live ticket gets the lock in
/// the same transaction.
pub(super) fn release(db: &mut Db, key: &str, fencing_token: u64) -> Result<(), StoreError> {
    match live_lock(db, key)? {
        Some(lock) if lock.token == fencing_token => {
            delete_lock(db, key)?;
            hand_off(db, key).map(drop)
        }
        _ => Err(StoreError::LockLost),
    }
}

/// L7, the holder named by its holder id, never its session id. Settles first, so no answer
/// shows the key free while a live ticket waits.
pub(super) fn state(db: &mut Db, key: &str) -> Result<KeyState, StoreError> {
    let holder = settled_lock(db, key)?.map(|lock| Holder {
        holder_id: db.holder_ids.of(&lock.session_id),
        owner: lock.owner,
        fencing_token: lock.token,
        remaining_millis: remaining(lock.deadline, db.now),
    });
    let waiters = if db.queued.may_have(key) {
        live_tickets(db, key)?
    } else {
        0
    };
    Ok(KeyState {
        hold: holder.as_ref().map(|_| lock_api::HoldKind::Exclusive),
        holders: holder.into_iter().collect(),
        waiters,
    })
}

/// R1: deletes whatever lock row is there (the token only if it was live) and hands the key
/// to the queue.
pub(super) fn revoke(db: &mut Db, key: &str, only: Option<u64>) -> Result<Vec<u64>, StoreError> {
    let token = live_lock(db, key)?.map(|lock| lock.token);
    if only.is_some() && only != token {
        return Ok(Vec::new());
    }
    delete_lock(db, key)?;
    hand_off(db, key)?;
    Ok(token.into_iter().collect())
}

/// The hand-off: if `key` has no live lock, grants it to the first live ticket (dropping the
/// dead ones ahead of it). Every transaction that ends a lock, or may find one ended by time,
/// calls it (or [`settled_lock`], or [`hand_off`] right after deleting the lock), so the key
/// is never free while a live ticket waits.
pub(super) fn settle(db: &mut Db, key: &str) -> Result<(), StoreError> {
    settled_lock(db, key).map(drop)
}

/// [`settle`] for every key a transaction freed (a closed session's, the reaper's), in order.
pub(super) fn settle_all(db: &mut Db, keys: &[String]) -> Result<(), StoreError> {
    for key in keys {
        settle(db, key)?;
    }
    Ok(())
}

/// The key's live lock after [`settle`]: one lock read when the key is held or nobody
/// queues, the common case.
fn settled_lock(db: &mut Db, key: &str) -> Result<Option<LiveLock>, StoreError> {
    match live_lock(db, key)? {
        None if hand_off(db, key)? => live_lock(db, key),
        lock => Ok(lock),
    }
}

/// [`settle`] for a key known to have no live lock: grants it to the first live ticket, if
/// any; whether it did. A key without tickets (known in memory) costs no read.
fn hand_off(db: &mut Db, key: &str) -> Result<bool, StoreError> {
    if !db.queued.may_have(key) {
        return Ok(false);
    }
    while let Some(head) = head_ticket(db, key)? {
        db.conn
            .prepare_cached("DELETE FROM tickets WHERE seq = ?1")
            .map_err(sql)?
            .execute([head.seq])
            .map_err(sql)?;
        if head.session_live && head.times.live(db.now) {
            let claim_by = head.times.claim_by(db.now);
            let token = grant_lock(db, key, &head.session_id, head.ttl, claim_by)?;
            // An open request answers this grant as it is; an unclaimed one must be claimed.
            let handed = claim_by.is_none().then(|| {
                (
                    lock_grant(
                        key,
                        &head.session_id,
                        lock_api::HoldKind::Exclusive,
                        token,
                        head.ttl,
                    ),
                    db.now,
                )
            });
            db.granted.push((key.to_string(), head.session_id, handed));
            return Ok(true);
        }
    }
    db.queued.emptied(key);
    Ok(false)
}

fn granted(db: &Db, key: &str, session_id: &str, token: u64, ttl: u64) -> Attempt {
    Attempt::Granted {
        grant: lock_grant(key, session_id, lock_api::HoldKind::Exclusive, token, ttl),
        at: db.now,
    }
}

/// Writes a new lock for `session_id` with a fresh token; returns the token.
fn grant_lock(
    db: &mut Db,
    key: &str,
    session_id: &str,
    ttl: u64,
    claim_by: Option<u64>,
) -> Result<u64, StoreError> {
    let token = db
        .tokens
        .next_token()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO locks (key, session_id, token, ttl_ms, expires_at, claim_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(sql)?
        .execute(params![key, session_id, token, ttl, db.now + ttl, claim_by])
        .map_err(sql)?;
    Ok(token)
}

/// The key's lock row if it is live.
fn live_lock(db: &Db, key: &str) -> Result<Option<LiveLock>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms,
                    MIN(l.expires_at, s.expires_at, COALESCE(l.claim_by, l.expires_at)), s.owner
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND l.expires_at > ?2 AND s.expires_at > ?2
               AND (l.claim_by IS NULL OR l.claim_by > ?2)",
        )
        .map_err(sql)?
        .query_row(params![key, db.now], |r| {
            Ok(LiveLock {
                session_id: r.get(0)?,
                token: r.get(1)?,
                ttl: r.get(2)?,
                deadline: r.get(3)?,
                owner: r.get(4)?,
            })
        })
        .optional()
        .map_err(sql)
}

fn delete_lock(db: &mut Db, key: &str) -> Result<(), StoreError> {
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
    times: TicketTimes,
    session_live: bool,
}

/// The key's first ticket.
fn head_ticket(db: &Db, key: &str) -> Result<Option<Ticket>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT t.seq, t.session_id, t.ttl_ms, t.open_until, t.grace_ms,
                    COALESCE(s.expires_at > ?2, 0)
             FROM tickets t LEFT JOIN sessions s ON s.id = t.session_id
             WHERE t.key = ?1 ORDER BY t.seq LIMIT 1",
        )
        .map_err(sql)?
        .query_row(params![key, db.now], |r| {
            Ok(Ticket {
                seq: r.get(0)?,
                session_id: r.get(1)?,
                ttl: r.get(2)?,
                times: TicketTimes {
                    open_until: r.get(3)?,
                    grace: r.get(4)?,
                },
                session_live: r.get(5)?,
            })
        })
        .optional()
        .map_err(sql)
}

/// Live tickets of `key`: `waiterCount`, and what the cap counts.
fn live_tickets(db: &Db, key: &str) -> Result<u32, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT COUNT(*) FROM tickets t JOIN sessions s ON s.id = t.session_id
             WHERE t.key = ?1 AND t.open_until + t.grace_ms > ?2 AND s.expires_at > ?2",
        )
        .map_err(sql)?
        .query_row(params![key, db.now], |r| r.get(0))
        .map_err(sql)
}

/// Keeps the session's ticket for `key` open until at least the request's end if it is
/// still live; a ticket past its grace period is dropped, so the request queues again at the
/// end.
fn renew_ticket(
    db: &mut Db,
    key: &str,
    session_id: &str,
    queue: Queueing,
) -> Result<(), StoreError> {
    if !db.queued.may_have(key) {
        return Ok(());
    }
    db.conn
        .prepare_cached(
            "DELETE FROM tickets
             WHERE key = ?1 AND session_id = ?2 AND open_until + grace_ms <= ?3",
        )
        .map_err(sql)?
        .execute(params![key, session_id, db.now])
        .map_err(sql)?;
    db.conn
        .prepare_cached(
            "UPDATE tickets SET open_until = MAX(open_until, ?3), grace_ms = ?4
             WHERE key = ?1 AND session_id = ?2",
        )
        .map_err(sql)?
        .execute(params![key, session_id, queue.open_until, queue.grace])
        .map_err(sql)?;
    Ok(())
}

/// Takes a ticket at the end of the key's queue unless the session has one; refuses when the
/// queue is full.
fn join_queue(
    db: &mut Db,
    key: &str,
    session_id: &str,
    ttl: u64,
    queue: Queueing,
) -> Result<(), StoreError> {
    let has_ticket = db
        .conn
        .prepare_cached("SELECT 1 FROM tickets WHERE key = ?1 AND session_id = ?2")
        .map_err(sql)?
        .query_row(params![key, session_id], |_| Ok(()))
        .optional()
        .map_err(sql)?
        .is_some();
    if has_ticket {
        return Ok(());
    }
    if live_tickets(db, key)? >= queue.cap {
        return Err(StoreError::QueueFull);
    }
    db.queued.joined(key);
    db.conn
        .prepare_cached(
            "INSERT INTO tickets (key, session_id, ttl_ms, open_until, grace_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?
        .execute(params![key, session_id, ttl, queue.open_until, queue.grace])
        .map_err(sql)?;
    Ok(())
}

/// Drops the session's ticket for `key` (its request got the lock).
fn leave_queue(db: &mut Db, key: &str, session_id: &str) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM tickets WHERE key = ?1 AND session_id = ?2")
        .map_err(sql)?
        .execute(params![key, session_id])
        .map_err(sql)?;
    Ok(())
}
