//! Waking the requests that wait server-side for a key (`Store::wait_change`).
//!
//! Every backend wakes a waiter when the key's holder may have changed, and at the latest when
//! the holder's lease runs out: a deadline passing writes nothing, so no event would come
//! ([`until_expiry`]). A single-process store learns of changes itself and wakes waiters
//! through [`KeyWakeups`]: they park on a `Notify` for their key; release, revoke, session
//! close and expiry wake them. A shared store watches the backend instead.

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

/// The registry. A std mutex, not a tokio one: nothing awaits while it is held.
#[derive(Debug, Default)]
pub struct KeyWakeups {
    waiting: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// A registration; dropping it forgets the key when nobody else waits on it, so the map
/// holds only keys with live waiters.
pub struct Registration<'a> {
    owner: &'a KeyWakeups,
    key: String,
    /// The key's `Notify`.
    pub notify: Arc<Notify>,
}

impl KeyWakeups {
    /// Registers interest in `key`.
    pub fn register(&self, key: &str) -> Registration<'_> {
        let mut map = self.waiting.lock().unwrap();
        let entry = map
            .entry(key.to_string())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Registration {
            owner: self,
            key: key.to_string(),
            notify: entry.0.clone(),
        }
    }

    /// Wakes every waiter of `key`.
    pub fn wake(&self, key: &str) {
        if let Some((notify, _)) = self.waiting.lock().unwrap().get(key) {
            notify.notify_waiters();
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
        if let Some(entry) = map.get_mut(&self.key) {
            entry.1 -= 1;
            if entry.1 == 0 {
                map.remove(&self.key);
            }
        }
    }
}
