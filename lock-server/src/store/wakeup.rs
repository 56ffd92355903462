//! Waking the requests that wait in a key's queue (`Store::acquire` with a queue).
//!
//! A waiter is woken when the lock is handed to its ticket, and at the latest when the
//! holder's lease runs out: a deadline passing writes nothing, so no hand-off may have
//! happened yet, and the waiter's next attempt is what notices the expiry and hands the lock
//! on ([`until_expiry`]). A single-process store wakes the one waiter a hand-off granted
//! through [`KeyWakeups`] (a mailbox per waiting `(key, session)`, which also carries the
//! grant, so the request answers without another store round). A shared store watches the
//! backend instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::LockGrant;
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

/// A grant handed to a waiting request, with the wall-clock ms its lease runs from.
pub type HandedOff = (LockGrant, u64);

/// One waiter's mailbox: the grant a hand-off left for it, and the wake-up.
#[derive(Debug, Default)]
pub struct Mailbox {
    notify: Notify,
    handed: Mutex<Option<HandedOff>>,
}

/// The registry. A std mutex, not a tokio one: nothing awaits while it is held.
#[derive(Debug, Default)]
pub struct KeyWakeups {
    waiting: Mutex<HashMap<Waiter, (Arc<Mailbox>, usize)>>,
}

/// A registration; dropping it forgets the waiter when no other request of it waits, so the
/// map holds only live waiters.
pub struct Registration<'a> {
    owner: &'a KeyWakeups,
    waiter: Waiter,
    mailbox: Arc<Mailbox>,
}

impl Registration<'_> {
    /// Waits at most `bound` for a hand-off: the grant, if it was left here (the hand-off
    /// found this request open), else `None` (woken to look, or the bound passed). A
    /// hand-off that came before this call left a permit, so none is missed.
    pub async fn handed_off(&self, bound: Duration) -> Option<HandedOff> {
        let _ = tokio::time::timeout(bound, self.mailbox.notify.notified()).await;
        self.mailbox.handed.lock().unwrap().take()
    }
}

impl KeyWakeups {
    /// Registers the session's interest in being granted `key`.
    pub fn register(&self, key: &str, session_id: &str) -> Registration<'_> {
        let waiter = (key.to_string(), session_id.to_string());
        let mut map = self.waiting.lock().unwrap();
        let entry = map.entry(waiter.clone()).or_default();
        entry.1 += 1;
        Registration {
            owner: self,
            waiter,
            mailbox: entry.0.clone(),
        }
    }

    /// A hand-off granted `key` to the session: wakes its waiting request (or leaves it a
    /// permit if it is between an attempt and its wait), with the grant when `handed` is
    /// given. (A session has one L4 per key in flight; a second one would look again at its
    /// expiry bound instead.)
    pub fn wake(&self, key: &str, session_id: &str, handed: Option<HandedOff>) {
        let waiter = (key.to_string(), session_id.to_string());
        if let Some((mailbox, _)) = self.waiting.lock().unwrap().get(&waiter) {
            *mailbox.handed.lock().unwrap() = handed;
            mailbox.notify.notify_one();
        }
    }

    /// Wakes every waiter of every key (shutdown).
    pub fn wake_all(&self) {
        for (mailbox, _) in self.waiting.lock().unwrap().values() {
            mailbox.notify.notify_waiters();
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
