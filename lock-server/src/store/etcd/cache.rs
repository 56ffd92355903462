//! Per-replica hints that save round trips: the last session record this replica saw, and
//! the holder session of the grants it saw. They are guesses only. Every transaction built
//! from a hint compares the revisions it relies on, so a stale hint (another replica renewed
//! the session, released the lock, ...) costs one extra round trip and never correctness.
//! Replicas stay stateless in the sense that matters: losing a replica loses nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use super::records::{SessionRecord, TicketRecord};

/// Entries per map before it is simply cleared (ASSUMPTION: a bound on memory; a cleared
/// hint only means one extra read).
const MAX_ENTRIES: usize = 100_000;

/// A session record as read at `mod_revision`.
#[derive(Debug, Clone)]
pub(super) struct SessionHint {
    pub record: SessionRecord,
    pub mod_revision: i64,
}

/// A wait-queue ticket kept open by a request waiting on this replica, as last written or read.
#[derive(Debug, Clone)]
pub(super) struct OpenTicket {
    pub session_id: String,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub record: TicketRecord,
}

/// A grant this replica saw, by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HolderHint {
    pub token: u64,
    /// The holder session.
    pub session_id: String,
    /// `create_revision` of the holder's index entry, which names the grant.
    pub index_revision: i64,
    /// `mod_revision` of the key's stamp right after the grant: unchanged, the grant is still
    /// the key's only hold when it is exclusive.
    pub stamp_revision: i64,
    /// Whether the hold is exclusive (only those are released in one transaction).
    pub exclusive: bool,
    /// The holder session's lease (the release's cause marker goes on it).
    pub lease: i64,
}

/// The hints. std mutexes: held for one map operation, never across an await.
#[derive(Debug, Default)]
pub(super) struct Hints {
    sessions: Mutex<HashMap<String, SessionHint>>,
    /// key → the tickets of requests waiting on this replica, so a release here can hand the
    /// key on in one transaction (its compares check that the oldest of them is the queue's
    /// head, and unchanged).
    tickets: Mutex<HashMap<String, Vec<OpenTicket>>>,
    /// key → the last grant of it this replica saw.
    holders: Mutex<HashMap<String, HolderHint>>,
}

impl Hints {
    pub(super) fn session(&self, session_id: &str) -> Option<SessionHint> {
        lock(&self.sessions).get(session_id).cloned()
    }

    pub(super) fn remember_session(&self, session_id: &str, hint: SessionHint) {
        insert_bounded(&mut lock(&self.sessions), session_id.to_owned(), hint);
    }

    pub(super) fn forget_session(&self, session_id: &str) {
        lock(&self.sessions).remove(session_id);
    }

    /// The grant of `key` this replica saw, if it is this very token's.
    pub(super) fn holder(&self, key: &str, token: u64) -> Option<HolderHint> {
        lock(&self.holders)
            .get(key)
            .filter(|hint| hint.token == token)
            .cloned()
    }

    pub(super) fn remember_holder(&self, key: &str, hint: HolderHint) {
        insert_bounded(&mut lock(&self.holders), key.to_owned(), hint);
    }

    pub(super) fn forget_holder(&self, key: &str) {
        lock(&self.holders).remove(key);
    }

    /// Whether this replica saw `key` granted (and not released here since) or has requests
    /// waiting for it.
    pub(super) fn contended(&self, key: &str) -> bool {
        lock(&self.holders).contains_key(key) || lock(&self.tickets).contains_key(key)
    }

    /// The oldest ticket of `key` that a request on this replica keeps open.
    pub(super) fn first_ticket(&self, key: &str) -> Option<OpenTicket> {
        let tickets = lock(&self.tickets);
        tickets
            .get(key)?
            .iter()
            .min_by_key(|t| t.create_revision)
            .cloned()
    }

    pub(super) fn remember_ticket(&self, key: &str, ticket: OpenTicket) {
        let mut tickets = lock(&self.tickets);
        if tickets.len() >= MAX_ENTRIES && !tickets.contains_key(key) {
            tickets.clear();
        }
        let open = tickets.entry(key.to_owned()).or_default();
        open.retain(|t| t.session_id != ticket.session_id);
        open.push(ticket);
    }

    /// The request of `session_id` waiting for `key` ended.
    pub(super) fn forget_ticket(&self, key: &str, session_id: &str) {
        let mut tickets = lock(&self.tickets);
        if let Some(open) = tickets.get_mut(key) {
            open.retain(|t| t.session_id != session_id);
            if open.is_empty() {
                tickets.remove(key);
            }
        }
    }
}

fn insert_bounded<V>(map: &mut HashMap<String, V>, key: String, value: V) {
    if map.len() >= MAX_ENTRIES && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
}

/// A poisoned hint map is still a valid hint map: every entry is a guess anyway.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
