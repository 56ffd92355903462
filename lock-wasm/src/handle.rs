//! [`LockHandle`]: one granted lock as the client sees it — key, fencing token, a
//! conservative local deadline, and the moment it is lost.
//!
//! The deadline is `sent_at + ttl - safety_margin`, where `sent_at` is when the request that
//! granted or last renewed the lock was *sent* (the server's own clock started later, so its
//! expiry is later still), capped by the session's own deadline (a lock lives only while its
//! session does). Lost is sticky: once a handle is lost it never becomes valid again, because
//! a caller may already have abandoned its side effect on that verdict.
//!
//! Two views of "lost", kept consistent: [`LockHandle::is_lost`] is true from the deadline
//! on, even before anything reported it (a paused process reads it right); the *report*
//! ([`LockHandle::lost`], [`LockHandle::lost_reason`], the `lock_lost` event) is made once,
//! by the session, at the instant it learns the lock is gone — for a passed deadline, by a
//! timer on the client's clock at the deadline itself.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{LockGrant, LockMode};

use crate::clock::Clock;
use crate::error::LockError;
use crate::signal::Signal;
use crate::spans::HoldSpan;
use crate::spawn::MaybeSend;

/// Why a handle is lost. The first three are losses the owner did not ask for (each is one
/// `lock_lost` event and, in JS, aborts the handle's `AbortSignal`); the last two end the
/// handle by the owner's own call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The local deadline passed without a renewal (heartbeats failed or came too late).
    DeadlinePassed,
    /// A heartbeat answer no longer listed the lock: the server dropped it. It expired, an
    /// admin revoked it, or someone released it with its token; the answer does not say which.
    NotInHeartbeat,
    /// The session was lost (the server answered 404, or its deadline passed), and every
    /// lock with it.
    SessionLost,
    /// The owner closed the session.
    SessionClosed,
    /// The owner released the lock.
    Released,
}

impl LostReason {
    /// The name in events, logs and the JS API (`deadlinePassed`, `notInHeartbeat`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::DeadlinePassed => "deadlinePassed",
            LostReason::NotInHeartbeat => "notInHeartbeat",
            LostReason::SessionLost => "sessionLost",
            LostReason::SessionClosed => "sessionClosed",
            LostReason::Released => "released",
        }
    }

    /// Whether the owner ended the handle (release, close): those are not `lock_lost` events.
    pub fn by_owner(self) -> bool {
        matches!(self, LostReason::SessionClosed | LostReason::Released)
    }
}

/// A held (or once held) lock. Cheap to clone; clones share state, and [`LockHandle::nest`]
/// returns a clone of the same handle.
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
    /// The grant's mode, as the server answered it: a shared acquire by the key's exclusive
    /// holder is answered with the exclusive grant.
    mode: LockMode,
    /// A shared grant's limit, when the key has one.
    limit: Option<u32>,
    /// Registration order within the session: the heartbeat judges only handles registered
    /// before it was sent (a newer grant may be missing from an older answer).
    seq: u64,
    clock: Arc<dyn Clock>,
    state: Mutex<HandleState>,
    /// Set once, when the loss is reported.
    reported: Signal,
    /// The grant's `lock.hold` span, ended with the report.
    hold: HoldSpan,
}

struct HandleState {
    /// Send time of the request that granted or last renewed the lock (the deadline's base).
    anchor: Duration,
    deadline: Duration,
    /// The reported loss, if any.
    lost: Option<LostReason>,
    /// Holds of this grant: 1 for the acquire, +1 per [`LockHandle::nest`], −1 per release.
    depth: u32,
}

/// What one release of a handle gives back (see [`LockHandle::leave`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    /// An inner hold: the outer one still holds the lock.
    Nested,
    /// The outermost hold: the lock itself is to be released.
    Last,
    /// Every hold was given back already: nothing to do.
    Done,
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
                mode: grant.mode,
                limit: grant.limit,
                seq: lease.seq,
                clock,
                state: Mutex::new(HandleState {
                    anchor: lease.anchor,
                    deadline: lease.deadline,
                    lost: None,
                    depth: 1,
                }),
                reported: Signal::new(),
                hold: HoldSpan::start(&grant.key, grant.fencing_token),
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

    /// How the key is held: [`LockMode::Exclusive`] or [`LockMode::Shared`], as granted (a
    /// shared acquire by the key's exclusive holder is answered with the exclusive grant).
    pub fn mode(&self) -> LockMode {
        self.inner.mode
    }

    /// A shared grant's limit (the semaphore's permits); `None` for an exclusive grant or
    /// shared holds without a limit.
    pub fn limit(&self) -> Option<u32> {
        self.inner.limit
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
    /// True from the deadline on even before the loss is reported (see the module docs).
    pub fn is_lost(&self) -> bool {
        let now = self.inner.clock.now();
        let state = self.inner.state.lock().unwrap();
        state.lost.is_some() || now >= state.deadline
    }

    /// Why the handle was reported lost; `None` until then.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.inner.state.lock().unwrap().lost
    }

    /// Completes when the handle is reported lost, with the reason: at the deadline if no
    /// renewal came, at once when a heartbeat or the session says the lock is gone, or when
    /// the owner releases it or closes its session. Race a side effect against it to stop
    /// the moment the lock may belong to someone else.
    pub fn lost(&self) -> impl std::future::Future<Output = LostReason> + MaybeSend + 'static {
        let inner = self.inner.clone();
        async move {
            inner.reported.wait().await;
            let reason = inner.state.lock().unwrap().lost;
            reason.expect("the signal is set after the reason")
        }
    }

    /// Reports the handle lost for `reason`, unless it was reported before: records the
    /// reason, runs `announce` (the session emits the one `lock_lost` event there), then
    /// completes every `lost()` future, so whoever wakes on the loss finds it announced.
    /// Returns whether it was reported now.
    pub(crate) fn report_lost(&self, reason: LostReason, announce: impl FnOnce()) -> bool {
        {
            let mut state = self.inner.state.lock().unwrap();
            if state.lost.is_some() {
                return false;
            }
            state.lost = Some(reason);
        }
        self.inner.hold.end(reason.as_str(), reason.by_owner());
        announce();
        self.inner.reported.set();
        true
    }

    /// Moves the deadline forward after a successful renewal, unless the handle is already
    /// lost (sticky) or its old deadline passed meanwhile. Returns whether it is still valid;
    /// when not, the caller reports the loss.
    pub(crate) fn renew(&self, anchor: Duration, deadline: Duration) -> bool {
        let now = self.inner.clock.now();
        let mut state = self.inner.state.lock().unwrap();
        if state.lost.is_some() || now >= state.deadline {
            return false;
        }
        state.anchor = state.anchor.max(anchor);
        state.deadline = state.deadline.max(deadline);
        true
    }

    /// A nested hold of this grant in its own mode, for the holder's own inner section: the
    /// same handle and token, no request; the lock is released when the outermost hold is.
    /// Only the holder can nest (it needs the handle), so a stranger is never let into a held
    /// lock. Fails with `LockLost` once the handle is lost or released: the section that
    /// would run under it must not start.
    pub fn nest(&self) -> Result<LockHandle, LockError> {
        self.nest_as(self.inner.mode)
    }

    /// A nested shared hold: allowed under a shared hold and under an exclusive one (the
    /// exclusive hold already keeps every other holder out, so the inner reader runs under
    /// the same handle and token). Fails as [`LockHandle::nest`] does.
    pub fn nest_shared(&self) -> Result<LockHandle, LockError> {
        self.nest_as(LockMode::Shared)
    }

    /// A nested exclusive hold: under an exclusive hold it is [`LockHandle::nest`]; under a
    /// shared one it is refused with `UpgradeNotAllowed`, sending nothing. An upgrade would
    /// have to wait for the other shared holders to leave, and two holders upgrading at once
    /// would wait for each other forever; release the shared hold, then acquire exclusive.
    pub fn nest_exclusive(&self) -> Result<LockHandle, LockError> {
        self.nest_as(LockMode::Exclusive)
    }

    /// A nested hold in `mode` (see [`LockHandle::nest_shared`],
    /// [`LockHandle::nest_exclusive`]). The upgrade is refused before the handle's state is
    /// read: it is never allowed, whatever became of the lock.
    pub fn nest_as(&self, mode: LockMode) -> Result<LockHandle, LockError> {
        if mode == LockMode::Exclusive && self.inner.mode == LockMode::Shared {
            return Err(LockError::UpgradeNotAllowed {
                key: self.inner.key.clone(),
            });
        }
        let now = self.inner.clock.now();
        let mut state = self.inner.state.lock().unwrap();
        if state.lost.is_some() || now >= state.deadline || state.depth == 0 {
            return Err(LockError::LockLost {
                key: self.inner.key.clone(),
            });
        }
        state.depth += 1;
        Ok(self.clone())
    }

    /// Gives back one hold (see [`Leave`]).
    pub(crate) fn leave(&self) -> Leave {
        let mut state = self.inner.state.lock().unwrap();
        match state.depth {
            0 => Leave::Done,
            1 => {
                state.depth = 0;
                Leave::Last
            }
            _ => {
                state.depth -= 1;
                Leave::Nested
            }
        }
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
            .field("mode", &self.inner.mode)
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
        held_in(clock, deadline_ms, LockMode::Exclusive)
    }

    fn held_in(clock: &ManualClock, deadline_ms: u64, mode: LockMode) -> LockHandle {
        let grant = LockGrant {
            key: "k".into(),
            session_id: "s".into(),
            fencing_token: 7,
            ttl_millis: 1_000,
            waited_millis: 0,
            mode,
            limit: None,
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
        assert_eq!(
            h.lost_reason(),
            None,
            "read from the clock, not yet reported"
        );
        assert!(
            !h.renew(Duration::ZERO, Duration::from_millis(1_000)),
            "lost is sticky"
        );
        assert!(h.is_lost());
    }

    #[test]
    fn a_loss_is_reported_once_and_wakes_the_lost_future() {
        use futures::FutureExt;
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        let mut lost = Box::pin(h.lost());
        assert!((&mut lost).now_or_never().is_none());
        let mut announced = 0;
        assert!(h.report_lost(LostReason::NotInHeartbeat, || announced += 1));
        assert!(
            !h.report_lost(LostReason::DeadlinePassed, || announced += 1),
            "reported once"
        );
        assert_eq!(announced, 1);
        assert_eq!(lost.now_or_never(), Some(LostReason::NotInHeartbeat));
        assert_eq!(h.lost_reason(), Some(LostReason::NotInHeartbeat));
    }

    #[test]
    fn renewal_moves_the_deadline_forward_only() {
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        assert!(h.renew(Duration::ZERO, Duration::from_millis(500)));
        assert!(h.renew(Duration::ZERO, Duration::from_millis(300)));
        assert_eq!(h.deadline(), Duration::from_millis(500));
        assert!(h.clone().report_lost(LostReason::Released, || {}));
        assert!(h.is_lost(), "clones share state");
    }

    #[test]
    fn nested_holds_count_down_to_the_outermost_release() {
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        let inner = h.nest().unwrap();
        assert!(inner.same_grant(&h));
        assert_eq!(inner.leave(), Leave::Nested);
        assert_eq!(h.leave(), Leave::Last);
        assert_eq!(h.leave(), Leave::Done, "a hold is given back once");
        assert!(h.nest().is_err(), "nothing to nest into any more");
    }

    #[test]
    fn a_lost_handle_cannot_be_nested() {
        let clock = ManualClock::new();
        let h = handle(&clock, 100);
        clock.advance(Duration::from_millis(100));
        assert_eq!(
            h.nest().unwrap_err(),
            LockError::LockLost { key: "k".into() }
        );
        let h = handle(&clock, 1_000);
        h.report_lost(LostReason::NotInHeartbeat, || {});
        assert!(h.nest().is_err());
    }

    #[test]
    fn a_shared_hold_nests_under_an_exclusive_one_but_never_the_other_way() {
        let clock = ManualClock::new();
        let writer = held_in(&clock, 100, LockMode::Exclusive);
        let reader = writer
            .nest_shared()
            .expect("a reader inside the writer's section");
        assert!(reader.same_grant(&writer));
        assert_eq!(
            reader.mode(),
            LockMode::Exclusive,
            "still the writer's grant"
        );
        assert!(writer.nest_exclusive().is_ok());
        assert_eq!(writer.leave(), Leave::Nested);
        assert_eq!(writer.leave(), Leave::Nested);
        assert_eq!(writer.leave(), Leave::Last);

        let shared = held_in(&clock, 100, LockMode::Shared);
        assert!(shared.nest().is_ok(), "same mode");
        assert!(shared.nest_shared().is_ok());
        assert_eq!(
            shared.nest_exclusive().unwrap_err(),
            LockError::UpgradeNotAllowed { key: "k".into() }
        );
        assert_eq!(
            shared.nest_as(LockMode::Exclusive).unwrap_err().code(),
            "UPGRADE_NOT_ALLOWED"
        );
        assert_eq!(shared.leave(), Leave::Nested);
        assert_eq!(shared.leave(), Leave::Nested);
        assert_eq!(
            shared.leave(),
            Leave::Last,
            "the refused upgrade took no hold"
        );
    }
}
