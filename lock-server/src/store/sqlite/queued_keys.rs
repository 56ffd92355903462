//! Which keys may have tickets, kept in memory by the writer thread so that the hot path of
//! a key nobody queues for (every uncontended L4 and L6) reads no ticket.
//!
//! The set is a superset of the keys in the `tickets` table: a key enters before its first
//! ticket is inserted and leaves only when a read inside the transaction found its queue
//! empty. A rolled-back batch may restore tickets of a key that left meanwhile, so after a
//! rollback the set is unknown (every key may have tickets) until it is read again from the
//! table.

use std::collections::HashSet;

use rusqlite::Connection;

/// See the module documentation. Starts empty: tickets do not outlive a restart.
#[derive(Debug, Default)]
pub(super) struct QueuedKeys {
    keys: HashSet<String>,
    /// After a rollback, until the next successful [`QueuedKeys::reload_if_unknown`].
    unknown: bool,
}

impl QueuedKeys {
    /// Whether `key` may have tickets; `false` means it has none.
    pub(super) fn may_have(&self, key: &str) -> bool {
        self.unknown || self.keys.contains(key)
    }

    /// A ticket for `key` is about to be inserted.
    pub(super) fn joined(&mut self, key: &str) {
        if !self.unknown && !self.keys.contains(key) {
            self.keys.insert(key.to_string());
        }
    }

    /// A read in the current transaction found no ticket for `key`.
    pub(super) fn emptied(&mut self, key: &str) {
        self.keys.remove(key);
    }

    /// The current batch was rolled back: its removals may be undone.
    pub(super) fn rolled_back(&mut self) {
        self.keys.clear();
        self.unknown = true;
    }

    /// After a rollback, reads the set from the table again (on failure it stays unknown,
    /// which is only slower).
    pub(super) fn reload_if_unknown(&mut self, conn: &Connection) {
        if !self.unknown {
            return;
        }
        let read = conn
            .prepare("SELECT DISTINCT key FROM tickets")
            .and_then(|mut stmt| {
                stmt.query_map([], |r| r.get(0))?
                    .collect::<Result<HashSet<String>, _>>()
            });
        if let Ok(keys) = read {
            self.keys = keys;
            self.unknown = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_may_have_tickets_from_its_first_join_until_found_empty() {
        let mut queued = QueuedKeys::default();
        assert!(!queued.may_have("k"));
        queued.joined("k");
        queued.joined("k");
        assert!(queued.may_have("k"));
        assert!(!queued.may_have("other"));
        queued.emptied("k");
        assert!(!queued.may_have("k"));
    }

    #[test]
    fn after_a_rollback_every_key_may_have_tickets_until_the_table_is_read() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE tickets (key TEXT NOT NULL);
             INSERT INTO tickets VALUES ('a'), ('a'), ('b');",
        )
        .unwrap();
        let mut queued = QueuedKeys::default();
        queued.joined("c");
        queued.rolled_back();
        assert!(queued.may_have("c") && queued.may_have("z"));
        queued.reload_if_unknown(&conn);
        assert!(queued.may_have("a") && queued.may_have("b"));
        assert!(!queued.may_have("c") && !queued.may_have("z"));
    }
}
