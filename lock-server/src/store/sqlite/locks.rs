//! Locks: L4 acquire (with the grant hold-back after an unclean start), L6 release, L7 read,
//! R1 revoke. A lock row lives while its own deadline and its session's both lie ahead.

use lock_api::{Holder, LockGrant};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use super::sessions::live_session;
use crate::store::lease::remaining;
use crate::store::{Acquired, StoreError};

/// L4, one attempt.
pub(super) fn acquire(
    db: &mut Db,
    key: &str,
    session_id: &str,
    ttl: u64,
) -> Result<Acquired, StoreError> {
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
    live_session(db, session_id)?;
    if let Some((holder, token, held_ttl, _)) = live_lock(db, key)? {
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
        Some((_, token, _, _)) if token == fencing_token => delete_lock(db, key),
        _ => Err(StoreError::LockLost),
    }
}

/// L7.
pub(super) fn holder(db: &mut Db, key: &str) -> Result<Option<Holder>, StoreError> {
    Ok(
        live_lock(db, key)?.map(|(session_id, fencing_token, _, deadline)| Holder {
            session_id,
            fencing_token,
            remaining_millis: remaining(deadline, db.now),
        }),
    )
}

/// R1: deletes whatever lock row is there; the token only if it was live.
pub(super) fn revoke(db: &mut Db, key: &str) -> Result<Option<u64>, StoreError> {
    let token = live_lock(db, key)?.map(|(_, token, _, _)| token);
    delete_lock(db, key)?;
    Ok(token)
}

/// The key's lock row if it is live: `(session_id, token, ttl_ms, effective deadline)`.
fn live_lock(db: &Db, key: &str) -> Result<Option<(String, u64, u64, u64)>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT l.session_id, l.token, l.ttl_ms, MIN(l.expires_at, s.expires_at)
             FROM locks l JOIN sessions s ON s.id = l.session_id
             WHERE l.key = ?1 AND l.expires_at > ?2 AND s.expires_at > ?2",
        )
        .map_err(sql)?
        .query_row(params![key, db.now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
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
