//! L2's versions on SQLite: what changed in each session's holds, so that a heartbeat answers
//! only that (contract C3, L2).
//!
//! TEMP triggers on `locks` keep, per `(session, key)`, the key's latest state — granted with
//! its token, or gone — under a number from one counter. Every path that grants, hands off,
//! releases, revokes, expires or reaps a hold writes `locks`, so the triggers see every
//! change whoever made it, and a rolled-back batch rolls its records back with it. A session's
//! version is `<epoch>.<n>.<tag>`: `n` the highest number among its records (or its floor,
//! below), the epoch random per start, the tag a hash of the epoch and the session id (so
//! another session's version is not this one's). The records live in memory only, so a version from before a
//! restart names another epoch and gets the full list, as does any string this store did not
//! mint.
//!
//! A `since` the client sends back acknowledges everything up to it: the session's `gone`
//! records up to it are deleted (a `granted` one stays while its hold lives, at most one per
//! hold) and its floor rises to it; a `since` below the floor gets the full list, since
//! what was deleted is not in the records any more. A full answer raises the floor to the
//! version it carries. So a session keeps at most one record per hold plus the ends since
//! the client's last acknowledged heartbeat; closing or reaping it deletes them all.

use lock_api::{ChangeKind, HoldChange, LockMode};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use crate::store::StoreError;

/// The most changes a delta answer carries (ASSUMPTION: 4,096); more since the client's
/// version get the full list, which is then no larger than the delta would be by much.
pub(super) const WINDOW: usize = 4_096;

/// Creates [`SCHEMA`] on a connection just opened.
pub(super) fn create(conn: &rusqlite::Connection) -> Result<(), StoreError> {
    conn.execute_batch(SCHEMA).map_err(sql)
}

/// The records and their triggers, created on every connection (TEMP: per connection, gone
/// with the process). A record is written only for a session that exists, so the bulk
/// deletes of L3 and the reaper, which delete a session's holds before the session, leave
/// nothing behind once the session's row goes (its own trigger deletes its records).
const SCHEMA: &str = "
CREATE TEMP TABLE IF NOT EXISTS hold_seq (epoch INTEGER NOT NULL, n INTEGER NOT NULL);
INSERT INTO temp.hold_seq SELECT random(), 0 WHERE NOT EXISTS (SELECT 1 FROM temp.hold_seq);
CREATE TEMP TABLE IF NOT EXISTS hold_changes (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    token INTEGER NOT NULL,
    mode TEXT NOT NULL,
    gone INTEGER NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE INDEX IF NOT EXISTS temp.hold_changes_by_seq ON hold_changes(session_id, seq);
CREATE TEMP TABLE IF NOT EXISTS hold_floors (
    session_id TEXT PRIMARY KEY,
    floor INTEGER NOT NULL
);
CREATE TEMP TRIGGER IF NOT EXISTS hold_granted AFTER INSERT ON main.locks
WHEN EXISTS (SELECT 1 FROM main.sessions WHERE id = NEW.session_id)
BEGIN
    UPDATE temp.hold_seq SET n = n + 1;
    INSERT OR REPLACE INTO temp.hold_changes (session_id, key, seq, token, mode, gone)
        VALUES (NEW.session_id, NEW.key, (SELECT n FROM temp.hold_seq), NEW.token, NEW.mode, 0);
END;
CREATE TEMP TRIGGER IF NOT EXISTS hold_regranted AFTER UPDATE OF token, mode ON main.locks
WHEN EXISTS (SELECT 1 FROM main.sessions WHERE id = NEW.session_id)
BEGIN
    UPDATE temp.hold_seq SET n = n + 1;
    INSERT OR REPLACE INTO temp.hold_changes (session_id, key, seq, token, mode, gone)
        VALUES (NEW.session_id, NEW.key, (SELECT n FROM temp.hold_seq), NEW.token, NEW.mode, 0);
END;
CREATE TEMP TRIGGER IF NOT EXISTS hold_ended AFTER DELETE ON main.locks
WHEN EXISTS (SELECT 1 FROM main.sessions WHERE id = OLD.session_id)
BEGIN
    UPDATE temp.hold_seq SET n = n + 1;
    INSERT OR REPLACE INTO temp.hold_changes (session_id, key, seq, token, mode, gone)
        VALUES (OLD.session_id, OLD.key, (SELECT n FROM temp.hold_seq), OLD.token, OLD.mode, 1);
END;
CREATE TEMP TRIGGER IF NOT EXISTS hold_session_ended AFTER DELETE ON main.sessions
BEGIN
    DELETE FROM temp.hold_changes WHERE session_id = OLD.id;
    DELETE FROM temp.hold_floors WHERE session_id = OLD.id;
END;
";

/// What an L2 answers besides the TTL.
pub(super) enum Answer {
    /// `since` is the current version.
    Unchanged,
    /// What changed after `since`, oldest first.
    Changes(Vec<HoldChange>),
    /// Every hold: no usable `since`, or more than [`WINDOW`] changes after it.
    Full,
}

/// The session's version and what its L2 answers to `since`; then forgets what the answer
/// makes needless (see the module docs). Run after the heartbeat's own changes.
pub(super) fn answer(
    db: &Db,
    session_id: &str,
    since: Option<&str>,
) -> Result<(String, Answer), StoreError> {
    let epoch = epoch(db)?;
    let (latest, floor) = marks(db, session_id)?;
    let current = latest.max(floor);
    let tag = tag(epoch, session_id);
    let version = format!("{epoch:016x}.{current}.{tag}");
    let usable = since
        .and_then(|since| parse(since, epoch, &tag))
        .filter(|n| (floor..=current).contains(n));
    let answer = match usable {
        None => Answer::Full,
        Some(n) if n == current => Answer::Unchanged,
        Some(n) => match changes_after(db, session_id, n)? {
            Some(changes) => Answer::Changes(changes),
            None => Answer::Full,
        },
    };
    let acknowledged = match answer {
        Answer::Full => current,
        _ => usable.unwrap_or(floor),
    };
    forget_up_to(db, session_id, acknowledged, floor)?;
    Ok((version, answer))
}

/// `n` of a version `<epoch>.<n>.<tag>` of this start's epoch (16 hex digits) and this
/// session's tag; `None` for anything else.
fn parse(since: &str, epoch: u64, tag: &str) -> Option<u64> {
    let mut parts = since.split('.');
    let (e, n, t) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || t != tag || e.len() != 16 {
        return None;
    }
    (u64::from_str_radix(e, 16).ok()? == epoch).then_some(())?;
    n.parse().ok()
}

/// 32 bits of SHA-256 over the epoch and the session id, hex.
fn tag(epoch: u64, session_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(epoch.to_le_bytes());
    hash.update(session_id.as_bytes());
    hash.finalize()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn epoch(db: &Db) -> Result<u64, StoreError> {
    db.conn
        .prepare_cached("SELECT epoch FROM temp.hold_seq")
        .map_err(sql)?
        .query_row([], |r| r.get::<_, i64>(0))
        .map(|e| e as u64)
        .map_err(sql)
}

/// `(highest record number, floor)` of the session, 0 when it has none.
fn marks(db: &Db, session_id: &str) -> Result<(u64, u64), StoreError> {
    let latest: Option<u64> = db
        .conn
        .prepare_cached("SELECT MAX(seq) FROM temp.hold_changes WHERE session_id = ?1")
        .map_err(sql)?
        .query_row([session_id], |r| r.get(0))
        .map_err(sql)?;
    let floor: Option<u64> = db
        .conn
        .prepare_cached("SELECT floor FROM temp.hold_floors WHERE session_id = ?1")
        .map_err(sql)?
        .query_row([session_id], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    Ok((latest.unwrap_or(0), floor.unwrap_or(0)))
}

/// The session's records after `n`, oldest first; `None` when there are more than
/// [`WINDOW`].
fn changes_after(db: &Db, session_id: &str, n: u64) -> Result<Option<Vec<HoldChange>>, StoreError> {
    let changes: Vec<HoldChange> = db
        .conn
        .prepare_cached(
            "SELECT key, token, mode, gone FROM temp.hold_changes
             WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(sql)?
        .query_map(params![session_id, n, WINDOW as u64 + 1], |r| {
            let mode = match r.get_ref(2)?.as_str()? {
                "shared" => LockMode::Shared,
                _ => LockMode::Exclusive,
            };
            let gone: bool = r.get(3)?;
            Ok(HoldChange {
                key: r.get(0)?,
                fencing_token: r.get(1)?,
                mode,
                change: if gone {
                    ChangeKind::Gone
                } else {
                    ChangeKind::Granted
                },
            })
        })
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    Ok((changes.len() <= WINDOW).then_some(changes))
}

/// Deletes the session's `gone` records up to `n` and raises its floor to `n` (a no-op when
/// `n` is the floor already).
fn forget_up_to(db: &Db, session_id: &str, n: u64, floor: u64) -> Result<(), StoreError> {
    if n <= floor {
        return Ok(());
    }
    db.conn
        .prepare_cached(
            "DELETE FROM temp.hold_changes WHERE session_id = ?1 AND gone = 1 AND seq <= ?2",
        )
        .map_err(sql)?
        .execute(params![session_id, n])
        .map_err(sql)?;
    db.conn
        .prepare_cached(
            "INSERT INTO temp.hold_floors (session_id, floor) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET floor = MAX(floor, excluded.floor)",
        )
        .map_err(sql)?
        .execute(params![session_id, n])
        .map_err(sql)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_epochs_canonical_versions_of_this_session_parse() {
        let epoch = 0x00ab_cdef_0123_4567;
        let t = tag(epoch, "s1");
        assert_ne!(t, tag(epoch, "s2"));
        assert_ne!(t, tag(epoch + 1, "s1"));
        let v = |s: &str| s.replace("TAG", &t);
        assert_eq!(parse(&v("00abcdef01234567.42.TAG"), epoch, &t), Some(42));
        assert_eq!(parse("00abcdef01234567.42.00000000", epoch, &t), None);
        assert_eq!(parse(&v("abcdef01234567.42.TAG"), epoch, &t), None);
        assert_eq!(parse(&v("00abcdef01234568.42.TAG"), epoch, &t), None);
        assert_eq!(parse(&v("00abcdef01234567.x.TAG"), epoch, &t), None);
        assert_eq!(parse(&v("00abcdef01234567.-1.TAG"), epoch, &t), None);
        assert_eq!(parse(&v("00abcdef01234567.42.TAG.1"), epoch, &t), None);
        assert_eq!(parse("garbage", epoch, &t), None);
        assert_eq!(parse("", epoch, &t), None);
    }
}
