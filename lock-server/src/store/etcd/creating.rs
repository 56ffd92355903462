//! One free-key create per key in flight from this replica: L4s that arrive for a key while
//! this replica's create of it is in flight wait for that create to be answered, then read
//! the key like any L4 of a contended key.
//! Readers without a limit beside others on a key held shared take no turn
//! (`lock::create_beside`): their grants do not race each other.
//!
//! Why: when a crowd asks for a free key at once, all but one create must fail, and the
//! group commit sends at most one transaction per lock key per round trip (etcd refuses a
//! transaction that writes one key twice). N doomed creates took N round trips, one after
//! another, during which the crowd had not yet joined the key's queue: a release in that
//! time found the queue empty and left the key free until the next create's turn, and a
//! holder asking again joined ahead of the crowd. Waiting one create instead lets the whole
//! crowd read the key, see it held and join its queue together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The keys whose create is in flight from this replica.
#[derive(Debug, Default)]
pub(super) struct Creating {
    keys: Mutex<HashMap<String, Arc<Notify>>>,
}

/// What a create of a key may do now.
pub(super) enum Turn {
    /// Nobody else here is creating the key: create it; the guard ends the turn.
    Create(CreateGuard),
    /// Another request here is creating it: wait with [`Creating::wait`], then read the key.
    Wait(Arc<Notify>),
}

impl Creating {
    /// Takes the turn to create `key`, or says whose create to wait for.
    pub(super) fn turn(self: &Arc<Self>, key: &str) -> Turn {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(notify) = keys.get(key) {
            return Turn::Wait(notify.clone());
        }
        keys.insert(key.to_owned(), Arc::new(Notify::new()));
        Turn::Create(CreateGuard {
            creating: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Waits until the create that `notify` belongs to was answered (or its request gone).
    pub(super) async fn wait(&self, key: &str, notify: Arc<Notify>) {
        let notified = notify.notified();
        tokio::pin!(notified);
        // Registered before the check, so an end between the check and the await still
        // wakes this waiter.
        notified.as_mut().enable();
        let current = self
            .keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .is_some_and(|n| Arc::ptr_eq(n, &notify));
        if current {
            notified.await;
        }
    }
}

/// The turn to create a key; dropping it (answered, failed or cancelled) wakes the waiters.
pub(super) struct CreateGuard {
    creating: Arc<Creating>,
    key: String,
}

impl Drop for CreateGuard {
    fn drop(&mut self) {
        let removed = (self.creating.keys.lock())
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
        if let Some(notify) = removed {
            notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_second_create_of_a_key_waits_for_the_first_and_other_keys_do_not() {
        let creating = Arc::new(Creating::default());
        let Turn::Create(first) = creating.turn("k") else {
            panic!("the first create goes ahead");
        };
        assert!(matches!(creating.turn("other"), Turn::Create(_)));
        let Turn::Wait(notify) = creating.turn("k") else {
            panic!("a second create of the same key waits");
        };
        let waiter = tokio::spawn({
            let creating = creating.clone();
            async move { creating.wait("k", notify).await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiter.is_finished(),
            "still waiting while the first is in flight"
        );
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken when the first create ends")
            .unwrap();
        assert!(
            matches!(creating.turn("k"), Turn::Create(_)),
            "the key is free again"
        );
    }

    #[tokio::test]
    async fn a_wait_that_starts_after_the_create_ended_returns_at_once() {
        let creating = Arc::new(Creating::default());
        let Turn::Create(first) = creating.turn("k") else {
            panic!("the first create goes ahead");
        };
        let Turn::Wait(notify) = creating.turn("k") else {
            panic!("a second create of the same key waits");
        };
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), creating.wait("k", notify))
            .await
            .expect("no wait for a create already answered");
    }
}
