//! Waking the requests that wait in a key's queue (`Store::acquire` with a queue).
//!
//! A waiter is woken when the lock is handed to its ticket, and at the latest when the
//! holder's lease runs out: a deadline passing writes nothing, so no hand-off may have
//! happened yet, and the waiter's next attempt is what notices the expiry and hands the lock
//! on ([`until_expiry`]). A single-process store wakes the one waiter a hand-off granted
//! through [`KeyWakeups`] (a `Notify` per waiting `(key, session)`). A shared store watches
//! the backend instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// Extra wait past a holder's deadline before its waiters wake, so their retried acquire
/// finds the lock expired rather than a millisecond short of it.
pub const EXPIRY_SLACK: Duration = Duration::from_millis(5);

/// How long a waiter may sleep without an event: until just after the holder's lease runs out
/// (`holder_remaining_millis`), at most `timeout`.
pub fn until_expiry(timeout: Duration, holder_remaining_millis: u64) -> Duration {
    timeout.min(Duration::from_millis(holder_remaining_millis) + EXPIRY_SLACK)
}

/// Who waits: a session's ticket for a key, as `(key, session id)`.
type Waiter = (String, String);

/// The registry. A std mutex, not a tokio one: nothing awaits while it is held.
#[derive(Debug, Default)]
pub struct KeyWakeups {
    waiting: Mutex<HashMap<Waiter, (Arc<Notify>, usize)>>,
}

/// A registration; dropping it forgets the waiter when no other request of it waits, so the
/// map holds only live waiters.
pub struct Registration<'a> {
    owner: &'a KeyWakeups,
    waiter: Waiter,
    /// The waiter's `Notify`.
    pub notify: Arc<Notify>,
}

impl KeyWakeups {
    /// Registers the session's interest in being granted `key`.
    pub fn register(&self, key: &str, session_id: &str) -> Registration<'_> {
        let waiter = (key.to_string(), session_id.to_string());
        let mut map = self.waiting.lock().unwrap();
        let entry = map
            .entry(waiter.clone())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Registration {
            owner: self,
            waiter,
            notify: entry.0.clone(),
        }
    }

    /// Wakes the request of the session waiting for `key` (a hand-off granted it), or
    /// leaves it a permit if it is between an attempt and its wait. (A session has one L4
    /// per key in flight; a second one would wake at its expiry bound instead.)
    pub fn wake(&self, key: &str, session_id: &str) {
        let waiter = (key.to_string(), session_id.to_string());
        if let Some((notify, _)) = self.waiting.lock().unwrap().get(&waiter) {
            notify.notify_one();
        }
    }

    /// Wakes every waiter of every key (shutdown).
    pub fn wake_all(&self) {
        for (notify, _) in self.waiting.lock().unwrap().values() {
            notify.notify_waiters();
        }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut map = self.owner.waiting.lock().unwrap();
        if let Some(entry) = map.get_mut(&self.waiter) {
            entry.1 -= 1;
            if entry.1 == 0 {
                map.remove(&self.waiter);
            }
        }
    }
}
