//! Per-session reentrancy: key → handle + hold depth, and the set of keys with an acquire in
//! flight.
//!
//! Reentrancy is per session, never per thread or task (ASSUMPTION, C2 ct2-records): a nested
//! acquire of a held, valid key returns the same handle and token without a request; a second
//! acquire of a key whose first acquire is still in flight is rejected as contended (it
//! cannot be a nested hold: nothing is held yet). A lost handle is not reentrant: re-acquiring
//! it fails with `LockLost` until it is released, because the caller's in-flight side effect
//! still carries the old token.
//!
//! Ordered maps, not hash maps: iteration order must be a function of the inputs so a seeded
//! simulation replays exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::handle::LockHandle;

/// The registry, shared by a session's acquires, releases and heartbeat task.
#[derive(Default)]
pub(crate) struct Holds {
    inner: Mutex<HoldsInner>,
}

#[derive(Default)]
struct HoldsInner {
    held: BTreeMap<String, Hold>,
    in_flight: BTreeSet<String>,
}

struct Hold {
    handle: LockHandle,
    depth: u32,
}

/// What an acquire finds for its key.
pub(crate) enum Entry {
    /// Held and valid: depth was incremented; return this handle.
    Reentered(LockHandle),
    /// Held but lost: fail with `LockLost`, send nothing.
    Lost,
    /// Another acquire (or an orphan release) of this key is in flight: contended.
    InFlight,
    /// Not held: the caller owns the key's in-flight slot until the guard drops.
    Fresh(InFlightGuard),
}

/// What a release does.
pub(crate) enum ReleaseStep {
    /// The handle is not (or no longer) registered: nothing to do.
    NotHeld,
    /// Depth decremented, still held by an outer acquire.
    Nested,
    /// Depth reached zero and the entry is gone: send L6, holding the key's in-flight slot
    /// until it is answered. Without the slot, a heartbeat answer taken before the L6 applied
    /// lists the key as held by the server but by no handle, the heartbeat claims it as an
    /// orphan, and the caller's next acquire of the key, right after its release returned,
    /// finds the orphan release in flight (found by the dashboard's end-to-end run).
    Last(InFlightGuard),
}

impl Holds {
    /// Looks `key` up for an acquire (see [`Entry`]).
    pub(crate) fn enter(self: &Arc<Self>, key: &str) -> Entry {
        let mut inner = self.inner.lock().unwrap();
        if let Some(hold) = inner.held.get_mut(key) {
            if hold.handle.is_lost() {
                return Entry::Lost;
            }
            hold.depth += 1;
            return Entry::Reentered(hold.handle.clone());
        }
        if !inner.in_flight.insert(key.to_owned()) {
            return Entry::InFlight;
        }
        Entry::Fresh(InFlightGuard {
            holds: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Registers a fresh grant with depth 1, consuming the in-flight slot.
    pub(crate) fn register(&self, guard: InFlightGuard, handle: LockHandle) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .held
            .insert(guard.key.clone(), Hold { handle, depth: 1 });
        // The guard's drop clears the in-flight mark; it must not run under our lock.
        drop(inner);
        drop(guard);
    }

    /// Decrements the depth of `handle`'s key if this exact grant is registered.
    pub(crate) fn release(self: &Arc<Self>, handle: &LockHandle) -> ReleaseStep {
        let mut inner = self.inner.lock().unwrap();
        let Some(hold) = inner.held.get_mut(handle.key()) else {
            return ReleaseStep::NotHeld;
        };
        if !hold.handle.same_grant(handle) {
            return ReleaseStep::NotHeld;
        }
        hold.depth -= 1;
        if hold.depth > 0 {
            return ReleaseStep::Nested;
        }
        inner.held.remove(handle.key());
        // Free: acquires and orphan claims only take the slot of a key that is not held.
        inner.in_flight.insert(handle.key().to_owned());
        ReleaseStep::Last(InFlightGuard {
            holds: self.clone(),
            key: handle.key().to_owned(),
        })
    }

    /// Every registered handle (for heartbeat renewal and session loss).
    pub(crate) fn handles(&self) -> Vec<LockHandle> {
        let inner = self.inner.lock().unwrap();
        inner.held.values().map(|h| h.handle.clone()).collect()
    }

    /// Drops every entry (session closed or lost), returning the handles.
    pub(crate) fn clear(&self) -> Vec<LockHandle> {
        let mut inner = self.inner.lock().unwrap();
        std::mem::take(&mut inner.held)
            .into_values()
            .map(|h| h.handle)
            .collect()
    }

    /// Claims `key` for an orphan release if nobody holds it or acquires it: the heartbeat
    /// listed a grant this session has no handle for (an acquire that timed out or was
    /// dropped after the server granted). `None` when the key is tracked.
    pub(crate) fn claim_orphan(self: &Arc<Self>, key: &str) -> Option<InFlightGuard> {
        let mut inner = self.inner.lock().unwrap();
        if inner.held.contains_key(key) || !inner.in_flight.insert(key.to_owned()) {
            return None;
        }
        Some(InFlightGuard {
            holds: self.clone(),
            key: key.to_owned(),
        })
    }
}

/// Owns a key's in-flight slot. Dropping it (the acquire finished, failed, or its future was
/// dropped mid-flight) frees the slot, so a cancelled acquire never leaves the key stuck.
pub(crate) struct InFlightGuard {
    holds: Arc<Holds>,
    key: String,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.holds.inner.lock().unwrap().in_flight.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    fn handle(key: &str) -> LockHandle {
        let grant = lock_api::LockGrant {
            key: key.into(),
            session_id: "s".into(),
            fencing_token: 1,
            ttl_millis: 1_000,
            waited_millis: 0,
        };
        let lease = crate::handle::Lease {
            seq: 0,
            anchor: Duration::ZERO,
            deadline: Duration::from_secs(1),
        };
        LockHandle::new(&grant, lease, Arc::new(ManualClock::new()))
    }

    #[test]
    fn a_dropped_guard_frees_the_key() {
        let holds = Arc::new(Holds::default());
        let guard = match holds.enter("k") {
            Entry::Fresh(g) => g,
            _ => panic!("fresh expected"),
        };
        assert!(matches!(holds.enter("k"), Entry::InFlight));
        drop(guard);
        assert!(matches!(holds.enter("k"), Entry::Fresh(_)));
    }

    #[test]
    fn depth_counts_nested_holds() {
        let holds = Arc::new(Holds::default());
        let Entry::Fresh(guard) = holds.enter("k") else {
            panic!("fresh expected")
        };
        let h = handle("k");
        holds.register(guard, h.clone());
        assert!(matches!(holds.enter("k"), Entry::Reentered(_)));
        assert!(matches!(holds.release(&h), ReleaseStep::Nested));
        let last = holds.release(&h);
        assert!(matches!(last, ReleaseStep::Last(_)));
        assert!(
            matches!(holds.enter("k"), Entry::InFlight),
            "the key stays in flight until the release's L6 is answered"
        );
        drop(last);
        assert!(matches!(holds.release(&h), ReleaseStep::NotHeld));
        assert!(holds.claim_orphan("k").is_some());
    }
}
