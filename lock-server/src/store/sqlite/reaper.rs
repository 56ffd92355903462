//! The reaper: deletes expired locks and sessions every [`REAP_INTERVAL`] and wakes the
//! waiters of the freed keys. Correctness does not depend on it: every read filters on the
//! deadlines; it only frees rows and wakes waiters sooner than their expiry bound would.

use std::sync::Weak;
use std::time::Duration;

use super::db::{sql, Db};
use super::SqliteStore;
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
            if store.writer.run(reap).await.is_err() {
                return;
            }
        }
    });
}

/// Deletes expired locks (own TTL or session gone) and expired sessions.
fn reap(db: &mut Db) -> Result<(), StoreError> {
    let now = db.now;
    db.delete_locks(
        "DELETE FROM locks WHERE expires_at <= ?1 OR session_id NOT IN
         (SELECT id FROM sessions WHERE expires_at > ?1) RETURNING key",
        [now],
    )?;
    db.conn
        .prepare_cached("DELETE FROM sessions WHERE expires_at <= ?1")
        .map_err(sql)?
        .execute([now])
        .map_err(sql)?;
    Ok(())
}
