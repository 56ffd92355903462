//! [`LockHandle`]: one granted lock as the client sees it — key, fencing token, and a
//! conservative local deadline after which it reports itself lost.
//!
//! The deadline is `sent_at + ttl - safety_margin`, where `sent_at` is when the request that
//! granted or last renewed the lock was *sent* (the server's own clock started later, so its
//! expiry is later still), capped by the session's own deadline (a lock lives only while its
//! session does). Lost is sticky: once a handle is lost it never becomes valid again, because
//! a caller may already have abandoned its side effect on that verdict.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::LockGrant;

use crate::clock::Clock;

/// A held (or once held) lock. Cheap to clone; clones share state, and nested acquires of
/// the same key in the same session return clones of the same handle.
///
/// The fencing token travels explicitly: pass [`LockHandle::fencing_token`] to the protected
/// resource with every side effect. The SDK keeps it in no thread-local or global state.
#[derive(Clone)]
pub struct LockHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    key: String,
    session_id: String,
    fencing_token: u64,
    ttl: Duration,
    /// Registration order within the session: the heartbeat judges only handles registered
    /// before it was sent (a newer grant may be missing from an older answer).
    seq: u64,
    clock: Arc<dyn Clock>,
    state: Mutex<HandleState>,
}

struct HandleState {
    /// Send time of the request that granted or last renewed the lock (the deadline's base).
    anchor: Duration,
    deadline: Duration,
    lost: bool,
}

/// Where a new handle's deadline comes from.
pub(crate) struct Lease {
    /// Registration order in the session.
    pub seq: u64,
    /// Send time the deadline counts from.
    pub anchor: Duration,
    /// The conservative deadline.
    pub deadline: Duration,
}

impl LockHandle {
    pub(crate) fn new(grant: &LockGrant, lease: Lease, clock: Arc<dyn Clock>) -> Self {
        LockHandle {
            inner: Arc::new(HandleInner {
                key: grant.key.clone(),
                session_id: grant.session_id.clone(),
                fencing_token: grant.fencing_token,
                ttl: Duration::from_millis(grant.ttl_millis),
                seq: lease.seq,
                clock,
                state: Mutex::new(HandleState {
                    anchor: lease.anchor,
                    deadline: lease.deadline,
                    lost: false,
                }),
            }),
        }
    }

    /// The locked key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// The session holding it.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The grant's fencing token: pass it to the protected resource with every side effect.
    pub fn fencing_token(&self) -> u64 {
        self.inner.fencing_token
    }

    /// The lock TTL the server granted.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The conservative local deadline, on the client's [`Clock`].
    pub fn deadline(&self) -> Duration {
        self.inner.state.lock().unwrap().deadline
    }

    /// Time left before the deadline (zero once lost).
    pub fn remaining(&self) -> Duration {
        if self.is_lost() {
            return Duration::ZERO;
        }
        self.deadline().saturating_sub(self.inner.clock.now())
    }

    /// True once the lock may no longer be held: its deadline passed without renewal, a
    /// heartbeat no longer listed it, its session was lost or closed, or it was released.
    pub fn is_lost(&self) -> bool {
        let now = self.inner.clock.now();
        let mut state = self.inner.state.lock().unwrap();
        if !state.lost && now >= state.deadline {
            state.lost = true;
        }
        state.lost
    }

    /// Marks the handle lost; true if it was not lost before (to emit one event).
    pub(crate) fn mark_lost(&self) -> bool {
        let mut state = self.inner.state.lock().unwrap();
        let was_valid = !state.lost;
        state.lost = true;
        was_valid
    }

    /// Moves the deadline forward after a successful renewal, unless the handle is already
    /// lost (sticky) or its old deadline passed meanwhile. Returns whether it is still valid.
    pub(crate) fn renew(&self, anchor: Duration, deadline: Duration) -> bool {
        let now = self.inner.clock.now();
        let mut state = self.inner.state.lock().unwrap();
        if state.lost || now >= state.deadline {
            state.lost = true;
            return false;
        }
        state.anchor = state.anchor.max(anchor);
        state.deadline = state.deadline.max(deadline);
        true
    }

    /// Send time of the request that granted or last renewed the lock.
    pub(crate) fn anchor(&self) -> Duration {
        self.inner.state.lock().unwrap().anchor
    }

    pub(crate) fn seq(&self) -> u64 {
        self.inner.seq
    }

    /// Whether two handles are clones of one grant.
    pub fn same_grant(&self, other: &LockHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl std::fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.inner.state.lock().unwrap();
        f.debug_struct("LockHandle")
            .field("key", &self.inner.key)
            .field("session_id", &self.inner.session_id)
            .field("fencing_token", &self.inner.fencing_token)
            .field("deadline", &state.deadline)
            .field("lost", &state.lost)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn handle(clock: &ManualClock, deadline_ms: u64) -> LockHandle {
        let grant = LockGrant {
            key: "k".into(),
            session_id: "s".into(),
            fencing_token: 7,
            ttl_millis: 1_000,
        };
        let lease = Lease {
            seq: 0,
            anchor: Duration::ZERO,
            deadline: Duration::from_millis(deadline_ms),
        };
        LockHandle::new(&grant, lease, Arc::new(clock.clone()))
    }

    #[test]
    fn a_handle_is_lost_at_its_deadline_and_stays_lost() {
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        assert!(!h.is_lost());
        clock.advance(Duration::from_millis(100));
        assert!(h.is_lost());
        assert!(
            !h.renew(Duration::ZERO, Duration::from_millis(1_000)),
            "lost is sticky"
        );
        assert!(h.is_lost());
    }

    #[test]
    fn renewal_moves_the_deadline_forward_only() {
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        assert!(h.renew(Duration::ZERO, Duration::from_millis(500)));
        assert!(h.renew(Duration::ZERO, Duration::from_millis(300)));
        assert_eq!(h.deadline(), Duration::from_millis(500));
        assert!(h.clone().mark_lost());
        assert!(h.is_lost(), "clones share state");
    }
}
