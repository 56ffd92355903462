//! [`World`]: the shared record of one run. The workers write what their clients did into it
//! (grants, reports, side effects, pauses), the clients' event sink what they reported
//! (`recorder`); the invariants are checked over it (`invariants`).

use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;
use std::time::Duration;

use crate::handle::{LockHandle, LostReason};

/// A (key, fencing token) pair: one grant. Two handles may share one (a grant whose L6 went
/// unanswered is returned again by the next L4 of its session), so handles are told apart
/// by their index in [`World::granted`].
pub(super) type Grant = (String, u64);

/// A handle some client was granted, kept for the whole run.
pub(super) struct Granted {
    pub(super) client: usize,
    pub(super) handle: LockHandle,
    /// The handle's anchor at the grant (the send time its first deadline counts from).
    pub(super) since: Duration,
    /// When the client got it.
    pub(super) at: Duration,
    /// When its `lost()` future completed, and why.
    pub(super) report: Option<(Duration, LostReason)>,
}

/// One side effect a worker ran under a handle (its index in [`World::granted`]):
/// `[start, end]` on the simulated clock.
pub(super) struct Effect {
    pub(super) handle: usize,
    pub(super) start: Duration,
    pub(super) end: Duration,
}

/// Shared bookkeeping of one run.
#[derive(Default)]
pub(super) struct World {
    /// Handles currently held by some client: (client, handle).
    pub(super) held: Mutex<Vec<(usize, LockHandle)>>,
    /// Every handle granted in the run.
    pub(super) granted: Mutex<Vec<Granted>>,
    /// How many of them were reported lost so far.
    pub(super) reported: AtomicUsize,
    /// Every `lock_lost` event: the grant, when, why.
    pub(super) events: Mutex<Vec<(Grant, Duration, LostReason)>>,
    pub(super) effects: Mutex<Vec<Effect>>,
    pub(super) violations: Mutex<Vec<String>>,
    /// Pause intervals per client: (start, end).
    pub(super) pauses: Mutex<Vec<(usize, Duration, Duration)>>,
    pub(super) acquires: AtomicUsize,
    pub(super) grants: AtomicUsize,
    /// Of them, the shared ones.
    pub(super) shared_grants: AtomicUsize,
    pub(super) finished: AtomicUsize,
    /// Sessions the finished clients declared lost.
    pub(super) sessions_lost: Mutex<u64>,
    /// Leaderships won in the run, in the order their campaigns returned: (when, the grant's
    /// handle, whether it was already lost then).
    pub(super) leaders: Mutex<Vec<(Duration, LockHandle, bool)>>,
    /// Campaigns that won.
    pub(super) terms_won: AtomicUsize,
}

impl World {
    pub(super) fn violate(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    pub(super) fn paused_between(&self, client: usize, start: Duration, end: Duration) -> Duration {
        self.pauses
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _, _)| *c == client)
            .map(|(_, from, to)| (*to).min(end).saturating_sub((*from).max(start)))
            .sum()
    }

    /// The first instant at or after `at` at which `client` is not paused.
    pub(super) fn runs_again(&self, client: usize, at: Duration) -> Duration {
        let pauses = self.pauses.lock().unwrap();
        let mut t = at;
        while let Some((_, _, to)) = pauses
            .iter()
            .find(|(c, from, to)| *c == client && (*from..*to).contains(&t))
        {
            t = *to;
        }
        t
    }
}

pub(super) fn grant_of(handle: &LockHandle) -> Grant {
    (handle.key().to_owned(), handle.fencing_token())
}
