//! The wait queue per key, for every backend: the rules both backends implement.
//!
//! An L4 with `waitMillis` > 0 that finds the key held (or others queued) takes a *ticket*,
//! one per `(session, key)`; tickets are served strictly in the order they were taken. When
//! the lock ends (release, revoke, session end, expiry), the transaction that ends it — or,
//! for an expiry, the first transaction that notices it — grants the lock to the first live
//! ticket (*hand-off*): the key is never free while a live ticket waits, and no waiter races
//! another for it.
//!
//! A ticket lives while an L4 of its session for that key is open, and a grace period
//! (`--queue-grace-ms`, [`DEFAULT_GRACE_MILLIS`]) after the last one ended: a client whose
//! request timed out re-sends and keeps its place, a client that went away stops blocking the
//! queue. Each ticket records `open_until`, the wall-clock end of the longest wait an open
//! request of it asked for (a request that ends early, its client gone, moves it to the
//! instant it ended), and the grace period it was taken with. A ticket is live while
//! `now < open_until + grace` and its session lives.
//!
//! A hand-off to a ticket whose request is open is claimed at once: that request answers the
//! grant. A hand-off to a ticket whose request already ended is *unclaimed*: the lock lives
//! until `open_until + grace` unless an L4 of that session comes and claims it (the
//! idempotent L4 returns the grant and renews it); otherwise it ends like an expired lock and
//! passes on.
//!
//! Tickets are not durable: after a restart the waiters re-send and queue again. An L4 with
//! `waitMillis` 0 never queues and never overtakes a queue: it is granted only if the key is
//! free and no ticket waits (no barging). The holder's own L4 always returns its grant.

use std::future::Future;
use std::time::Duration;

use lock_api::LockGrant;
use tokio::time::Instant;

use super::lease::now_millis;
use super::wakeup::until_expiry;
use super::{Acquired, Grant, StoreError};

/// How long a ticket outlives the last open request of its session for its key, by default
/// (ASSUMPTION: 1 s — longer than a client needs to notice a timed-out request and re-send,
/// short enough that a client that went away holds the queue up for about a second).
pub const DEFAULT_GRACE_MILLIS: u64 = 1_000;

/// What a waiting L4 brings to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queueing {
    /// Wall-clock millisecond at which this request's wait ends (arrival + `waitMillis`).
    pub open_until: u64,
    /// The grace period of the ticket this request takes or keeps open.
    pub grace: u64,
    /// Most tickets a key's queue holds; a request that would take ticket number cap + 1 is
    /// refused ([`super::StoreError::QueueFull`]). 0: nobody ever queues.
    pub cap: u32,
}

/// A ticket's times, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketTimes {
    /// Wall-clock ms until which a request of the ticket is open.
    pub open_until: u64,
    /// Its grace period, in ms.
    pub grace: u64,
}

impl TicketTimes {
    /// Whether the ticket still holds its place at `now`.
    pub fn live(self, now: u64) -> bool {
        now < self.open_until.saturating_add(self.grace)
    }

    /// The claim deadline of a lock handed to the ticket at `now`: `None` when a request of
    /// the ticket is open (it answers the grant at once), else the end of its grace period.
    pub fn claim_by(self, now: u64) -> Option<u64> {
        (now >= self.open_until).then(|| self.open_until.saturating_add(self.grace))
    }
}

/// What one L4 attempt found, as a backend reports it.
#[derive(Debug)]
pub enum Attempt {
    /// Granted or renewed at `at` (wall-clock ms): the lease runs from there.
    Granted { grant: LockGrant, at: u64 },
    /// Held by another session, or others queue; this request does not queue.
    Contended,
    /// This session's ticket waits. The current lock lives at most `holder_remaining` ms;
    /// `seen` is the backend's marker of the state this attempt saw (the etcd revision), so
    /// the wait that follows misses no hand-off after it.
    Queued { holder_remaining: u64, seen: i64 },
}

/// L4 for a backend, given one `attempt` and a `wait` for a hand-off (at most the given
/// bound, after the given marker; `Some` answers the grant handed over, `None` means "attempt
/// again"). Without `queue`: one attempt. With it: attempt, wait, attempt again, until
/// granted or the request's wait ends. If the future is dropped before either (its client
/// went away), `cancel` runs: it starts the ticket's grace period.
pub async fn acquire_with<A, AF, W, WF>(
    queue: Option<Queueing>,
    cancel: impl FnOnce(),
    mut attempt: A,
    mut wait: W,
) -> Result<Acquired, StoreError>
where
    A: FnMut(Option<Queueing>) -> AF,
    AF: Future<Output = Result<Attempt, StoreError>>,
    W: FnMut(Duration, i64) -> WF,
    WF: Future<Output = Option<(LockGrant, u64)>>,
{
    let Some(queue) = queue else {
        return Ok(match attempt(None).await? {
            Attempt::Granted { grant, at } => granted(grant, at, 1),
            _ => Acquired::Contended { attempts: 1 },
        });
    };
    let deadline =
        Instant::now() + Duration::from_millis(queue.open_until.saturating_sub(now_millis()));
    let mut open = OpenRequest(Some(cancel));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (holder_remaining, seen) = match attempt(Some(queue)).await? {
            Attempt::Granted { grant, at } => {
                open.ended();
                return Ok(granted(grant, at, attempts));
            }
            Attempt::Contended => return Ok(Acquired::Contended { attempts }),
            Attempt::Queued {
                holder_remaining,
                seen,
            } => (holder_remaining, seen),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // The ticket's `open_until` is this request's end: its grace period runs.
            open.ended();
            return Ok(Acquired::Contended { attempts });
        }
        // Woken by a hand-off to this session, or when the holder's lease runs out: the next
        // attempt notices the expiry and hands the lock on.
        if let Some((grant, at)) = wait(until_expiry(left, holder_remaining), seen).await {
            open.ended();
            return Ok(granted(grant, at, attempts));
        }
    }
}

fn granted(grant: LockGrant, at: u64, attempts: u32) -> Acquired {
    Acquired::Granted(Grant {
        grant,
        lease_start: at,
        attempts,
    })
}

/// Runs its action on drop unless the request ended by itself.
struct OpenRequest<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OpenRequest<F> {
    fn ended(&mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OpenRequest<F> {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICKET: TicketTimes = TicketTimes {
        open_until: 1_000,
        grace: 300,
    };

    #[test]
    fn a_ticket_outlives_its_last_request_by_the_grace_period() {
        assert!(TICKET.live(500));
        assert!(TICKET.live(1_299));
        assert!(!TICKET.live(1_300));
    }

    #[test]
    fn a_hand_off_to_an_open_request_is_claimed_at_once() {
        assert_eq!(TICKET.claim_by(999), None);
        assert_eq!(TICKET.claim_by(1_000), Some(1_300));
        assert_eq!(TICKET.claim_by(1_200), Some(1_300));
    }
}
