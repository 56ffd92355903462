//! Server-side waiters per key: the `waiterCount` of L7 and the CONTENTION_EXCEEDED cap.
//!
//! Rule (C3): a *waiter* is an L4 request with `waitMillis` > 0 that found the key held and
//! is now waiting in this replica for it to change. `waiterCount` is the number of such
//! requests on the key at the instant of the read, in this replica only (replicas do not
//! share it). When a request would become waiter number `cap + 1`, it is answered 429
//! CONTENTION_EXCEEDED at once instead. Requests with `waitMillis` = 0 never wait, never
//! count and are never refused by the cap. Default cap: 64 (`--max-waiters-per-key`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Counts waiters per key. A std mutex: held for a map operation only.
#[derive(Debug)]
pub struct Waiters {
    cap: u32,
    counts: Mutex<HashMap<String, u32>>,
}

/// One waiting request; dropping it stops counting it.
#[derive(Debug)]
pub struct WaiterGuard {
    owner: Arc<Waiters>,
    key: String,
}

impl Waiters {
    /// A registry with the given per-key cap.
    pub fn new(cap: u32) -> Arc<Waiters> {
        Arc::new(Waiters {
            cap,
            counts: Mutex::new(HashMap::new()),
        })
    }

    /// Enters the key's wait queue, or `None` when it is full (→ 429).
    pub fn enter(self: &Arc<Self>, key: &str) -> Option<WaiterGuard> {
        let mut counts = self.counts.lock().unwrap();
        let count = counts.entry(key.to_string()).or_insert(0);
        if *count >= self.cap {
            if *count == 0 {
                counts.remove(key);
            }
            return None;
        }
        *count += 1;
        Some(WaiterGuard {
            owner: self.clone(),
            key: key.to_string(),
        })
    }

    /// Waiters on `key` right now.
    pub fn count(&self, key: &str) -> u32 {
        self.counts.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap();
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_refuses_one_more_and_guards_release() {
        let w = Waiters::new(2);
        let a = w.enter("k").unwrap();
        let _b = w.enter("k").unwrap();
        assert!(w.enter("k").is_none());
        assert_eq!(w.count("k"), 2);
        assert!(w.enter("other").is_some());
        drop(a);
        assert_eq!(w.count("k"), 1);
        assert!(w.enter("k").is_some());
    }

    #[test]
    fn zero_cap_refuses_everyone_and_leaves_no_entry() {
        let w = Waiters::new(0);
        assert!(w.enter("k").is_none());
        assert_eq!(w.count("k"), 0);
        assert!(w.counts.lock().unwrap().is_empty());
    }
}
