//! The reaper: every [`REAP_INTERVAL`] deletes expired holds, sessions and tickets and hands
//! the keys they touched to their queues (a key is settled once however many of its holds
//! or tickets went). Correctness does not depend on it: every read filters on
//! the deadlines and every attempt hands an expired lock on; it only frees rows and serves
//! queues sooner than a waiter's expiry bound would.

use std::sync::Weak;
use std::time::Duration;

use super::db::{sql, Db};
use super::{events, locks, SqliteStore};
use crate::store::StoreError;

/// How often expired rows are deleted (ASSUMPTION: 200 ms).
const REAP_INTERVAL: Duration = Duration::from_millis(200);

/// Runs until the store is dropped or closed.
pub(super) fn spawn(store: Weak<SqliteStore>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REAP_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(store) = store.upgrade() else { return };
            // A failed reap (a full disk) is tried again next tick; only a closed writer
            // ends the task.
            if let Err(e) = store.writer.run(reap).await {
                if super::writer::is_closed(&e) {
                    return;
                }
            }
        }
    });
}

/// Deletes expired holds (own TTL, claim deadline or session gone), dead tickets (session
/// gone or grace period over: one ahead of a hold the holders would admit is what let it
/// wait) and expired sessions; settles every key it touched.
fn reap(db: &mut Db) -> Result<(), StoreError> {
    let now = db.now;
    // Watchers of a key see each of its expired holds once, in token order.
    let expired = events::ends_of(
        db,
        "SELECT l.key, l.session_id, l.token, l.mode, l.shared_limit, s.owner, 0
         FROM locks l LEFT JOIN sessions s ON s.id = l.session_id
         WHERE l.expires_at <= ?1 OR l.claim_by <= ?1 OR l.session_id NOT IN
               (SELECT id FROM sessions WHERE expires_at > ?1)
         ORDER BY l.key, l.token",
        [now],
    )?;
    events::record_ends(db, expired)?;
    let mut keys = db.returning_keys(
        "DELETE FROM locks WHERE expires_at <= ?1 OR claim_by <= ?1 OR session_id NOT IN
         (SELECT id FROM sessions WHERE expires_at > ?1) RETURNING key",
        [now],
    )?;
    let queued = db.returning_keys(
        "DELETE FROM tickets WHERE open_until + grace_ms <= ?1 OR session_id NOT IN
         (SELECT id FROM sessions WHERE expires_at > ?1) RETURNING key",
        [now],
    )?;
    for key in &queued {
        events::tickets_changed(db, key);
    }
    keys.extend(queued);
    db.feeds.sweep_idle();
    events::forget_unwatched(db);
    db.conn
        .prepare_cached("DELETE FROM sessions WHERE expires_at <= ?1")
        .map_err(sql)?
        .execute([now])
        .map_err(sql)?;
    keys.sort_unstable();
    keys.dedup();
    locks::settle_all(db, &keys)
}
