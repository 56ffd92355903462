//! A session's background task: the heartbeat loop and the deadline watchdog, over its
//! [`SessionState`].
//!
//! - The heartbeat loop sends L2 when [`crate::renewal`] says it is due: at the earliest of
//!   the session's period and a third of each held lock's TTL, recomputed — and the sleeping
//!   loop woken — on every grant, renewal and release. No call of it waits past the session's
//!   deadline nor the next due heartbeat. A heartbeat that fails (no answer, a balancer's
//!   502, a 503) is re-sent after a full-jitter delay (`renewal::RETRY_BASE`, `RETRY_CAP`), again and again
//!   until one is answered or the session's deadline passes, so an outage shorter than the
//!   session's validity never loses it (C2 ct2-renewal states the bound). Each answer renews
//!   the session and its listed locks; grants it lists that no caller of the session has (an
//!   acquire that timed out or was dropped after the server granted, a release whose L6
//!   failed) are released.
//! - A release whose L6 failed is re-sent in the background ([`retry_release`]).
//! - The deadline watchdog sleeps on the client's clock until the earliest deadline of the
//!   session and its unreported handles, and at that instant reports what passed (see
//!   [`SessionState::expire_passed`]).
//!
//! Both wait on a background view of the client's clock ([`BackgroundClock`]: in Node its
//! timers are unref'd, so an open session never keeps a process alive by itself), and hold
//! only a weak reference to the session between wake-ups: dropping the last
//! `LockClientSession` ends the task.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::{ErrorCode, HeartbeatResponse};

use crate::backoff::Backoff;
use crate::clock::{BackgroundClock, Clock};
use crate::error::LockError;
use crate::handle::LockHandle;
use crate::renewal::{RETRY_BASE, RETRY_CAP};
use crate::session_state::SessionState;
use crate::spawn::BoxFuture;
use crate::transport::{call, TransportExt};

/// Starts `session`'s background task on its client's spawner.
pub(crate) fn spawn(session: &Arc<SessionState>) {
    let parts = session.parts();
    let clock = background_clock(session);
    let heartbeats = heartbeat_loop(Arc::downgrade(session), clock.clone());
    let deadlines = deadline_watch(Arc::downgrade(session), clock);
    // Both loops end when the session does; whichever notices first ends the task.
    let task = async move {
        select(Box::pin(heartbeats), Box::pin(deadlines)).await;
    };
    parts.spawner.spawn(Box::pin(task));
}

/// What woke a background loop.
enum Wake {
    /// Its timer: the time it waited for may have come (a loop re-checks what is due).
    Due,
    /// The session ended (closed, lost) or was dropped: stop.
    Ended,
}

/// Sleeps on `clock` until `at`, or until the session ends. A schedule change that moves
/// `at` earlier re-arms the timer at once; one that moves it later (a release) keeps the
/// timer armed, which then wakes early and the loop finds nothing due yet. So a steady
/// acquire+release cycle does not replace the two loops' timers on every grant and release.
async fn wait_until(
    session: &Weak<SessionState>,
    clock: &dyn Clock,
    at: impl Fn(&SessionState) -> Duration,
) -> Wake {
    let mut armed: Option<(Duration, BoxFuture<'static, ()>)> = None;
    loop {
        let (sleep, rescheduled, ended) = {
            let Some(s) = session.upgrade() else {
                return Wake::Ended;
            };
            if !s.is_open() {
                return Wake::Ended;
            }
            // Listen before reading the schedule, so a change made in between is not missed.
            let rescheduled = s.rescheduled();
            let target = at(&s);
            let sleep = match armed.take() {
                Some((due, sleep)) if due <= target => (due, sleep),
                _ => (target, clock.sleep(target.saturating_sub(clock.now()))),
            };
            (sleep, rescheduled, s.ended())
        };
        let (due, sleep) = sleep;
        let changed = select(Box::pin(rescheduled), Box::pin(ended));
        match select(sleep, changed).await {
            Either::Left(_) => return Wake::Due,
            Either::Right((Either::Left(_), sleep)) => armed = Some((due, sleep)),
            Either::Right((Either::Right(_), _)) => return Wake::Ended,
        }
    }
}

/// One L2 whenever [`SessionState::next_heartbeat`] comes.
async fn heartbeat_loop(session: Weak<SessionState>, clock: Arc<dyn Clock>) {
    loop {
        if let Wake::Ended = wait_until(&session, &*clock, SessionState::next_heartbeat).await {
            return;
        }
        let Some(s) = session.upgrade() else { return };
        if clock.now() >= s.next_heartbeat() {
            heartbeat_once(&s, &*clock).await;
        }
    }
}

/// At each deadline of the session and its handles, reports what passed.
async fn deadline_watch(session: Weak<SessionState>, clock: Arc<dyn Clock>) {
    loop {
        if let Some(s) = session.upgrade() {
            s.expire_passed();
        }
        if let Wake::Ended = wait_until(&session, &*clock, SessionState::next_deadline).await {
            return;
        }
    }
}

/// One L2 round: renew, or lose the session on 404. Its calls time out on `clock`.
async fn heartbeat_once(s: &SessionState, clock: &dyn Clock) {
    let now = clock.now();
    let deadline = s.deadline();
    if now >= deadline {
        s.mark_lost();
        return;
    }
    let seq_at_send = s.heartbeat_sent(now);
    let hop = round_hop(s, clock, deadline - now);
    let transport = &s.parts().transport;
    let result = call(clock, hop, transport.heartbeat(s.id(), hop)).await;
    if !s.is_open() {
        return;
    }
    match result {
        Ok(answer) => {
            s.apply_heartbeat(now, seq_at_send, &answer);
            release_orphans(s, &answer, clock).await;
        }
        Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => s.mark_lost(),
        // Anything else is transient until the deadline, which the watchdog keeps: re-sent
        // soon, not a whole period later.
        Err(_) => s.heartbeat_failed(clock.now()),
    }
}

/// Releases grants the server lists but no handle tracks: heartbeats would otherwise renew
/// them forever. Best effort: a failure leaves them for the next heartbeat.
async fn release_orphans(s: &SessionState, answer: &HeartbeatResponse, clock: &dyn Clock) {
    for lock in &answer.locks {
        let Some(_turn) = s.claim_orphan(lock) else {
            continue;
        };
        let hop = round_hop(s, clock, Duration::MAX);
        if !s.is_open() || hop.is_zero() {
            return;
        }
        let released = s.send_release(&lock.key, lock.fencing_token, clock, hop);
        if released.await.is_ok() {
            s.orphan_released(&lock.key);
        }
    }
}

/// The timeout of a call of the background task: the request timeout, but never past
/// `limit` nor the next due heartbeat.
fn round_hop(s: &SessionState, clock: &dyn Clock, limit: Duration) -> Duration {
    let until_next = s.next_heartbeat().saturating_sub(clock.now());
    s.parts().config.request_timeout.min(limit).min(until_next)
}

/// The background view of `session`'s clock: its timers never keep a Node process alive.
fn background_clock(session: &SessionState) -> Arc<dyn Clock> {
    Arc::new(BackgroundClock(session.parts().clock.clone()))
}

/// Re-sends the L6 of `handle`'s grant, whose release failed, after full-jitter delays, until
/// it is answered (LOCK_LOST included: the lock is gone either way), the session ends, or the
/// lock's TTL from its last renewal has passed (the server has dropped it by then, unless a
/// heartbeat renewed it since: then that heartbeat's answer lists it and the orphan release
/// ends it). No caller waits for this: the key's turn has passed on already.
pub(crate) fn retry_release(session: &Arc<SessionState>, handle: &LockHandle) {
    let clock = background_clock(session);
    let weak = Arc::downgrade(session);
    let (key, token) = (handle.key().to_owned(), handle.fencing_token());
    let until = handle.anchor() + handle.ttl();
    let mut rng = session.parts().rng.rng();
    let task = async move {
        let backoff = Backoff::new(RETRY_BASE, RETRY_CAP);
        for attempt in 0.. {
            let delay = backoff.delay(attempt, &mut rng);
            if clock.now() + delay >= until {
                return;
            }
            clock.sleep(delay).await;
            let Some(s) = weak.upgrade() else { return };
            let hop = s
                .parts()
                .config
                .request_timeout
                .min(until.saturating_sub(clock.now()));
            if !s.is_open() || hop.is_zero() {
                return;
            }
            match s.send_release(&key, token, &*clock, hop).await {
                Ok(()) => return s.orphan_released(&key),
                Err(LockError::SessionLost) => return s.mark_lost(),
                Err(_) => {}
            }
        }
    };
    session.parts().spawner.spawn(Box::pin(task));
}
