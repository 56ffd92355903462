//! Sessions: L1 open, L2 heartbeat, L3 close, L5 status, and the reads the lock operations
//! share with them.

use lock_api::{HeartbeatResponse, HeldLock, LockMode, LockStatus, SessionOpened, SessionStatus};

use super::hold_changes::{self, Answer};
use rusqlite::{params, OptionalExtension};

use super::db::{hold_of_row, sql, Db};
use super::events;
use crate::store::lease::remaining;
use crate::store::StoreError;

/// A session as a request names it: its id, and the client the request authenticated as
/// (`None` without an auth file). Only that client finds it.
pub(super) struct SessionOf {
    pub id: String,
    pub client: Option<String>,
}

impl SessionOf {
    pub(super) fn new(id: &str, client: Option<&str>) -> SessionOf {
        SessionOf {
            id: id.to_string(),
            client: client.map(str::to_string),
        }
    }
}

/// L1, with the id and holder id made by the caller (off the writer thread).
pub(super) fn open(
    db: &mut Db,
    opened: SessionOpened,
    owner: Option<String>,
    client: Option<String>,
) -> Result<SessionOpened, StoreError> {
    let ttl_millis = opened.ttl_millis;
    db.conn
        .prepare_cached(
            "INSERT INTO sessions (id, owner, client, ttl_ms, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?
        .execute(params![
            opened.session_id,
            owner,
            client,
            ttl_millis,
            db.now + ttl_millis
        ])
        .map_err(sql)?;
    Ok(opened)
}

/// L2 after [`reap_dead_holds`]: renews the session and its live holds, and answers `since`
/// (see `hold_changes`).
pub(super) fn heartbeat(
    db: &mut Db,
    session: &SessionOf,
    since: Option<&str>,
) -> Result<HeartbeatResponse, StoreError> {
    let (ttl, _) = live_session(db, session)?;
    let id = session.id.as_str();
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
    let (version, answer) = hold_changes::answer(db, id, since)?;
    Ok(match answer {
        Answer::Unchanged => HeartbeatResponse::unchanged(ttl, version),
        Answer::Changes(changes) => HeartbeatResponse::delta(ttl, version, changes),
        Answer::Full => {
            let locks = session_holds(db, id)?
                .into_iter()
                .map(|hold| HeldLock {
                    key: hold.key,
                    fencing_token: hold.token,
                    mode: hold.mode,
                })
                .collect();
            HeartbeatResponse::full(ttl, Some(version), locks)
        }
    })
}

/// L2's first step: deletes the live session's holds whose own TTL or claim deadline has
/// passed (watchers see them `expired`), so that its version moves past their end before
/// the answer is read, whether or not the reaper got to them; returns their keys, which
/// the caller hands to their queues in the same transaction. Another session's or a dead
/// one's request deletes nothing.
pub(super) fn reap_dead_holds(db: &mut Db, session: &SessionOf) -> Result<Vec<String>, StoreError> {
    if live_session(db, session).is_err() {
        return Ok(Vec::new());
    }
    let id = session.id.clone();
    let ended = events::ends_of(
        db,
        "SELECT l.key, l.session_id, l.token, l.mode, l.shared_limit, s.owner, 0
         FROM locks l JOIN sessions s ON s.id = l.session_id
         WHERE l.session_id = ?1 AND (l.expires_at <= ?2 OR l.claim_by <= ?2)
         ORDER BY l.key, l.token",
        params![id, db.now],
    )?;
    events::record_ends(db, ended)?;
    let now = db.now;
    db.returning_keys(
        "DELETE FROM locks WHERE session_id = ?1 AND (expires_at <= ?2 OR claim_by <= ?2)
         RETURNING key",
        params![id, now],
    )
}

/// L3: deletes the session, its tickets and its holds; returns the keys of those holds, which
/// the caller passes to their queues in the same transaction (each key once, whatever its
/// other holders).
pub(super) fn close(db: &mut Db, session: &SessionOf) -> Result<Vec<String>, StoreError> {
    live_session(db, session)?;
    let id = session.id.as_str();
    // Watchers see each live hold `released` and a dead one not reaped yet `expired`.
    let ended = events::ends_of(
        db,
        "SELECT l.key, l.session_id, l.token, l.mode, l.shared_limit, s.owner,
                l.expires_at > ?2 AND (l.claim_by IS NULL OR l.claim_by > ?2)
         FROM locks l JOIN sessions s ON s.id = l.session_id
         WHERE l.session_id = ?1 ORDER BY l.key, l.token",
        params![id, db.now],
    )?;
    events::record_ends(db, ended)?;
    let freed = db.returning_keys(
        "DELETE FROM locks WHERE session_id = ?1 RETURNING key",
        [id],
    )?;
    let queued = db.returning_keys(
        "DELETE FROM tickets WHERE session_id = ?1 RETURNING key",
        [id],
    )?;
    for key in &queued {
        events::tickets_changed(db, key);
    }
    db.conn
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .map_err(sql)?
        .execute([id])
        .map_err(sql)?;
    Ok(freed)
}

/// L5.
pub(super) fn status(db: &mut Db, session: &SessionOf) -> Result<SessionStatus, StoreError> {
    let (_, session_deadline) = live_session(db, session)?;
    let id = session.id.as_str();
    let locks = session_holds(db, id)?
        .into_iter()
        .map(|hold| LockStatus {
            key: hold.key,
            fencing_token: hold.token,
            remaining_millis: remaining(hold.deadline.min(session_deadline), db.now),
            mode: hold.mode,
        })
        .collect();
    Ok(SessionStatus {
        session_id: id.to_string(),
        remaining_millis: remaining(session_deadline, db.now),
        locks,
    })
}

/// A live session's `(ttl_ms, expires_at)`. One query for an unknown id and for another
/// client's session alike (`IS` also matches NULL, a session without a client), so both
/// answer SESSION_NOT_FOUND the same way.
pub(super) fn live_session(db: &Db, session: &SessionOf) -> Result<(u64, u64), StoreError> {
    db.conn
        .prepare_cached(
            "SELECT ttl_ms, expires_at FROM sessions
             WHERE id = ?1 AND expires_at > ?2 AND client IS ?3",
        )
        .map_err(sql)?
        .query_row(params![session.id, db.now, session.client], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(sql)?
        .ok_or(StoreError::SessionNotFound)
}

/// One live hold of a session, as L2 and L5 list it.
struct SessionHold {
    key: String,
    token: u64,
    /// Its own deadline (or claim deadline), not counting the session's.
    deadline: u64,
    mode: LockMode,
}

/// The session's live holds (at most one per key), by key.
fn session_holds(db: &Db, id: &str) -> Result<Vec<SessionHold>, StoreError> {
    let mut stmt = db
        .conn
        .prepare_cached(
            "SELECT key, token, MIN(expires_at, COALESCE(claim_by, expires_at)), mode,
                    shared_limit
             FROM locks
             WHERE session_id = ?1 AND expires_at > ?2 AND (claim_by IS NULL OR claim_by > ?2)
             ORDER BY key",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![id, db.now], |r| {
            Ok(SessionHold {
                key: r.get(0)?,
                token: r.get(1)?,
                deadline: r.get(2)?,
                mode: hold_of_row(r, 3, 4)?.mode(),
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(rows)
}
