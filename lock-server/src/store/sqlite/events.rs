//! L8 on SQLite: the events of watched keys, recorded on the writer thread inside the
//! transaction that makes them, each with its position taken at that instant
//! ([`Feeds::next_pos`]), so a `watch_state` read later in the same batch is exact at its own
//! position. They are published to the feeds after the batch commits, in the order they were
//! recorded, and dropped with a batch that rolls back. A key without a feed costs one lookup
//! in the feeds' map and nothing else: no owner, no waiter count is read for it.

use lock_api::{EventKind, HoldKind, WatchEvent};
use rusqlite::OptionalExtension;

use super::db::{sql, Db, Pending};
use crate::store::feeds::Feeds;
use crate::store::StoreError;

/// The hold an event is about.
pub(super) struct HoldFacts<'a> {
    pub session_id: &'a str,
    pub token: u64,
    pub hold: HoldKind,
    /// The session's `owner` label.
    pub owner: Option<String>,
    /// The hold's value (sent with grants and `proclaimed` only).
    pub value: Option<String>,
}

/// Records `kind` of `key` (about `hold`, if any) when the key is watched.
pub(super) fn record(
    db: &mut Db,
    key: &str,
    kind: EventKind,
    hold: Option<HoldFacts<'_>>,
) -> Result<(), StoreError> {
    if !db.feeds.is_watched(key) {
        return Ok(());
    }
    let waiter_count = db.live_ticket_count(key)?;
    let pos = db.feeds.next_pos();
    let with_value = kind.is_grant() || kind == EventKind::Proclaimed;
    let event = WatchEvent {
        id: String::new(),
        kind,
        key: key.to_string(),
        at_millis: db.now,
        fencing_token: hold.as_ref().map(|h| h.token),
        holder_id: hold.as_ref().map(|h| db.holder_ids.of(h.session_id)),
        owner: hold.as_ref().and_then(|h| h.owner.clone()),
        mode: hold.as_ref().map(|h| h.hold.mode()),
        limit: hold.as_ref().and_then(|h| h.hold.limit()),
        value: hold.and_then(|h| h.value).filter(|_| with_value),
        waiter_count,
        state: None,
    };
    db.events.last_waiters.insert(key.to_string(), waiter_count);
    db.events.events.push((key.to_string(), pos, event));
    Ok(())
}

/// A grant (`granted` or `handedOff`) of `key` to `session_id`; its owner is read here, only
/// for a watched key.
pub(super) fn record_grant(
    db: &mut Db,
    key: &str,
    kind: EventKind,
    session_id: &str,
    token: u64,
    hold: HoldKind,
    value: Option<String>,
) -> Result<(), StoreError> {
    if !db.feeds.is_watched(key) {
        return Ok(());
    }
    let owner = owner_of(db, session_id)?;
    let facts = HoldFacts {
        session_id,
        token,
        hold,
        owner,
        value,
    };
    record(db, key, kind, Some(facts))
}

/// The holds that ended in a bulk delete of the reaper or of L3, each `(key, session_id,
/// token, hold, owner, kind)`, for the watched keys among them: recorded in order.
pub(super) fn record_ends(db: &mut Db, ends: Vec<Ended>) -> Result<(), StoreError> {
    for end in ends {
        let facts = HoldFacts {
            session_id: &end.session_id,
            token: end.token,
            hold: end.hold,
            owner: end.owner.clone(),
            value: None,
        };
        record(db, &end.key, end.kind, Some(facts))?;
    }
    Ok(())
}

/// A hold a bulk delete ends (see [`record_ends`]).
pub(super) struct Ended {
    pub key: String,
    pub session_id: String,
    pub token: u64,
    pub hold: HoldKind,
    pub owner: Option<String>,
    pub kind: EventKind,
}

/// Reads [`Ended`] rows of `statement` (columns: key, session_id, token, mode, shared_limit,
/// owner, whether it was live) when any key is watched; nothing otherwise.
pub(super) fn ends_of(
    db: &Db,
    statement: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Ended>, StoreError> {
    if !db.feeds.any() {
        return Ok(Vec::new());
    }
    let rows: Vec<Ended> = db
        .conn
        .prepare_cached(statement)
        .map_err(sql)?
        .query_map(params, |r| {
            let live: bool = r.get(6)?;
            Ok(Ended {
                key: r.get(0)?,
                session_id: r.get(1)?,
                token: r.get(2)?,
                hold: super::db::hold_of_row(r, 3, 4)?,
                owner: r.get(5)?,
                kind: if live {
                    EventKind::Released
                } else {
                    EventKind::Expired
                },
            })
        })
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    Ok(rows
        .into_iter()
        .filter(|e| db.feeds.is_watched(&e.key))
        .collect())
}

/// The `owner` label of a session (`None` without one or when it is gone).
pub(super) fn owner_of(db: &Db, session_id: &str) -> Result<Option<String>, StoreError> {
    db.conn
        .prepare_cached("SELECT owner FROM sessions WHERE id = ?1")
        .map_err(sql)?
        .query_row([session_id], |r| r.get(0))
        .optional()
        .map(Option::flatten)
        .map_err(sql)
}

/// The key's tickets changed in the current job: [`finish_job`] compares its waiter count.
pub(super) fn tickets_changed(db: &mut Db, key: &str) {
    if db.feeds.is_watched(key) && !db.events.touched.iter().any(|k| k == key) {
        db.events.touched.push(key.to_string());
    }
}

/// The end of a job: a watched key whose waiter count now differs from what its watchers
/// last saw gets a `waiters` event.
pub(super) fn finish_job(db: &mut Db) -> Result<(), StoreError> {
    for key in std::mem::take(&mut db.events.touched) {
        if !db.feeds.is_watched(&key) {
            continue;
        }
        let now = db.live_ticket_count(&key)?;
        if db.events.last_waiters.get(&key) != Some(&now) {
            record(db, &key, EventKind::Waiters, None)?;
        }
    }
    Ok(())
}

/// A state read of `key` (snapshot or reset) showed `waiters`.
pub(super) fn state_read(db: &mut Db, key: &str, waiters: u32) {
    db.events.last_waiters.insert(key.to_string(), waiters);
}

/// The batch committed: its events go to the feeds, in order.
pub(super) fn publish(pending: &mut Pending, feeds: &Feeds) {
    for (key, pos, event) in pending.events.drain(..) {
        feeds.publish(&key, pos, event);
    }
}

/// The batch rolled back: its events never happened, and what watchers last saw is unknown
/// (a `waiters` event may repeat a count, never miss one).
pub(super) fn rolled_back(pending: &mut Pending) {
    pending.events.clear();
    pending.touched.clear();
    pending.last_waiters.clear();
}

/// Forgets the keys that lost their feed (the reaper calls this).
pub(super) fn forget_unwatched(db: &mut Db) {
    let feeds = db.feeds.clone();
    db.events
        .last_waiters
        .retain(|key, _| feeds.is_watched(key));
}

#[cfg(test)]
mod tests {
    use lock_api::{EventKind, HoldKind};

    use crate::store::feeds::{FeedItem, Start};
    use crate::store::sqlite::test_store::open;
    use crate::store::{AcquireCall, Acquired, NewSession, SessionRef, Store};

    fn call<'a>(key: &'a str, session_id: &'a str, value: Option<&'a str>) -> AcquireCall<'a> {
        AcquireCall {
            key,
            session_id,
            client: None,
            ttl_millis: 10_000,
            hold: HoldKind::Exclusive,
            value,
            queue: None,
        }
    }

    /// A watched key's changes arrive in commit order at positions after the state read that
    /// preceded them; an unwatched key's change is published nowhere and costs no event.
    #[tokio::test]
    async fn watched_changes_come_in_order_after_the_state_they_follow() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let session = store
            .open_session(NewSession::with_ttl(60_000))
            .await
            .unwrap()
            .session_id;
        let mut sub = store.watch("k", None).await.unwrap();
        assert!(matches!(sub.start, Start::Snapshot));
        let (state, at) = store.watch_state("k").await.unwrap();
        assert!(state.holders.is_empty());
        store.acquire(call("other", &session, None)).await.unwrap();
        let Acquired::Granted(grant) = store.acquire(call("k", &session, Some("v"))).await.unwrap()
        else {
            panic!("a free key is granted");
        };
        let token = grant.grant.fencing_token;
        let who = SessionRef::new(&session, None);
        store.proclaim("k", who, token, "w").await.unwrap();
        store.release("k", token).await.unwrap();
        let mut seen = Vec::new();
        while let Ok(FeedItem::Event(pos, event)) = sub.live.try_recv() {
            assert!(pos > at, "after the state read");
            seen.push((pos, event.kind, event.value.clone()));
        }
        let kinds: Vec<_> = seen.iter().map(|(_, k, v)| (*k, v.clone())).collect();
        assert_eq!(
            kinds,
            [
                (EventKind::Granted, Some("v".to_string())),
                (EventKind::Proclaimed, Some("w".to_string())),
                (EventKind::Released, None),
            ]
        );
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "positions grow");
        assert!(!store.feeds().is_watched("other"));
        // A resume from the first event gets the two after it, complete.
        let first = store.feeds().id(seen[0].0);
        let resumed = store.watch("k", Some(&first)).await.unwrap();
        let Start::Backlog(backlog) = resumed.start else {
            panic!("a resume within the window is a backlog");
        };
        assert_eq!(backlog.len(), 2);
        // A refused L9 (another token) publishes nothing.
        assert!(store.proclaim("k", who, token, "x").await.is_err());
        assert!(sub.live.try_recv().is_err());
        store.close().await.unwrap();
    }
}
