//! Per-key wake-ups for `Store::wait_change` in a single-process store: waiters park on a
//! `Notify` for their key; release, revoke, session close and expiry wake them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

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
