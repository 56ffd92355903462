//! Sessions: L1 open, L2 heartbeat, L3 close, L5 status, and the reads the lock operations
//! share with them.

use lock_api::{HeartbeatResponse, HeldLock, LockStatus, SessionOpened, SessionStatus};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use super::locks;
use crate::store::lease::remaining;
use crate::store::{session, StoreError};

/// L1, with an id minted by the caller (off the writer thread).
pub(super) fn open(
    db: &mut Db,
    id: String,
    owner: Option<String>,
    ttl_millis: u64,
) -> Result<SessionOpened, StoreError> {
    db.conn
        .prepare_cached(
            "INSERT INTO sessions (id, owner, ttl_ms, expires_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(sql)?
        .execute(params![id, owner, ttl_millis, db.now + ttl_millis])
        .map_err(sql)?;
    Ok(session::opened(id, ttl_millis))
}

/// L2.
pub(super) fn heartbeat(db: &mut Db, id: &str) -> Result<HeartbeatResponse, StoreError> {
    let (ttl, _) = live_session(db, id)?;
    db.conn
        .prepare_cached("UPDATE sessions SET expires_at = ?2 WHERE id = ?1")
        .map_err(sql)?
        .execute(params![id, db.now + ttl])
        .map_err(sql)?;
    // Only live locks are renewed: one whose own TTL (or claim deadline) ran out stays dead.
    // An unclaimed hand-off stays unclaimed: only an L4 claims it.
    db.conn
        .prepare_cached(
            "UPDATE locks SET expires_at = ?2 + ttl_ms
             WHERE session_id = ?1 AND expires_at > ?2 AND (claim_by IS NULL OR claim_by > ?2)",
        )
        .map_err(sql)?
        .execute(params![id, db.now])
        .map_err(sql)?;
    let locks = session_locks(db, id)?
        .into_iter()
        .map(|(key, fencing_token, _)| HeldLock { key, fencing_token })
        .collect();
    Ok(HeartbeatResponse {
        ttl_millis: ttl,
        locks,
    })
}

/// L3: deletes the session, its tickets and its locks; each lock passes to its queue.
pub(super) fn close(db: &mut Db, id: &str) -> Result<(), StoreError> {
    live_session(db, id)?;
    let freed = db.returning_keys(
        "DELETE FROM locks WHERE session_id = ?1 RETURNING key",
        [id],
    )?;
    db.conn
        .prepare_cached("DELETE FROM tickets WHERE session_id = ?1")
        .map_err(sql)?
        .execute([id])
        .map_err(sql)?;
    db.conn
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .map_err(sql)?
        .execute([id])
        .map_err(sql)?;
    for key in freed {
        locks::settle(db, &key)?;
    }
    Ok(())
}

/// L5.
pub(super) fn status(db: &mut Db, id: &str) -> Result<SessionStatus, StoreError> {
    let (_, session_deadline) = live_session(db, id)?;
    let locks = session_locks(db, id)?
        .into_iter()
        .map(|(key, fencing_token, deadline)| LockStatus {
            key,
            fencing_token,
            remaining_millis: remaining(deadline.min(session_deadline), db.now),
        })
        .collect();
    Ok(SessionStatus {
        session_id: id.to_string(),
        remaining_millis: remaining(session_deadline, db.now),
        locks,
    })
}

/// A live session's `(ttl_ms, expires_at)`.
pub(super) fn live_session(db: &Db, id: &str) -> Result<(u64, u64), StoreError> {
    db.conn
        .prepare_cached("SELECT ttl_ms, expires_at FROM sessions WHERE id = ?1 AND expires_at > ?2")
        .map_err(sql)?
        .query_row(params![id, db.now], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(sql)?
        .ok_or(StoreError::SessionNotFound)
}

/// The session's live locks: `(key, token, own deadline)`, by key.
fn session_locks(db: &Db, id: &str) -> Result<Vec<(String, u64, u64)>, StoreError> {
    let mut stmt = db
        .conn
        .prepare_cached(
            "SELECT key, token, MIN(expires_at, COALESCE(claim_by, expires_at)) FROM locks
             WHERE session_id = ?1 AND expires_at > ?2 AND (claim_by IS NULL OR claim_by > ?2)
             ORDER BY key",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![id, db.now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(rows)
}
