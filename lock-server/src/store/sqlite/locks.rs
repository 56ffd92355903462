//! Locks: L4 acquire (with the grant hold-back after an unclean start), L6 release, L7 read,
//! R1 revoke. A lock row lives while its own deadline and its session's both lie ahead.

use lock_api::{Holder, LockGrant};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use super::sessions::{live_session, SessionOf};
use crate::store::lease::remaining;
use crate::store::{Acquired, StoreError};

/// L4, one attempt.
pub(super) fn acquire(
    db: &mut Db,
    key: &str,
    session: &SessionOf,
    ttl: u64,
) -> Result<Acquired, StoreError> {
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
    if let Some(LiveLock {
        session_id: holder,
        token,
        ttl: held_ttl,
        ..
    }) = live_lock(db, key)?
    {
        if holder != session_id {
            return Ok(Acquired::Contended);
        }
        // Idempotent L4: the same grant (same token, the lock's own TTL), renewed from now.
        // The request arrived after it was sent, so the deadline is never earlier than the
        // client's `sentAt + ttl` for it.
        db.conn
            .prepare_cached("UPDATE locks SET expires_at = ?2 WHERE key = ?1")
            .map_err(sql)?
            .execute(params![key, db.now + held_ttl])
            .map_err(sql)?;
        return Ok(Acquired::Granted(LockGrant {
            key: key.to_string(),
            session_id: session_id.to_string(),
            fencing_token: token,
            ttl_millis: held_ttl,
        }));
    }
    let token = db
        .tokens
        .next_token()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO locks (key, session_id, token, ttl_ms, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?
        .execute(params![key, session_id, token, ttl, db.now + ttl])
        .map_err(sql)?;
    Ok(Acquired::Granted(LockGrant {
        key: key.to_string(),
        session_id: session_id.to_string(),
        fencing_token: token,
        ttl_millis: ttl,
    }))
}

/// L6: compare-and-delete on `(key, token)`.
pub(super) fn release(db: &mut Db, key: &str, fencing_token: u64) -> Result<(), StoreError> {
    match live_lock(db, key)? {
        Some(lock) if lock.token == fencing_token => delete_lock(db, key),
        _ => Err(StoreError::LockLost),
    }
}

/// L7: the holder named by its holder id, never its session id.
pub(super) fn holder(db: &mut Db, key: &str) -> Result<Option<Holder>, StoreError> {
    Ok(live_lock(db, key)?.map(|lock| Holder {
        holder_id: db.holder_ids.of(&lock.session_id),
        owner: lock.owner,
        fencing_token: lock.token,
        remaining_millis: remaining(lock.deadline, db.now),
    }))
}

/// R1: deletes whatever lock row is there; the token only if it was live.
pub(super) fn revoke(db: &mut Db, key: &str) -> Result<Option<u64>, StoreError> {
    let token = live_lock(db, key)?.map(|lock| lock.token);
    delete_lock(db, key)?;
    Ok(token)
}

/// A live lock row, with its session's `owner` label.
struct LiveLock {
    session_id: String,
    token: u64,
    ttl: u64,
    /// The earlier of the lock's and its session's deadlines.
    deadline: u64,
    owner: Option<String>,
}

/// The key's lock row if it is live.
fn live_lock(db: &Db, key: &str) -> Result<Option<LiveLock>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms, MIN(l.expires_at, s.expires_at), s.owner
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND l.expires_at > ?2 AND s.expires_at > ?2",
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
    db.changed.push(key.to_string());
    Ok(())
}
