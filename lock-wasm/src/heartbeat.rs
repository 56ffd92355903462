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
//!   failed) are released, each by a task of its own, so no L2 waits for their answers.
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
use lock_api::ErrorCode;

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
            heartbeat_once(&s, &clock).await;
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
async fn heartbeat_once(s: &Arc<SessionState>, clock: &Arc<dyn Clock>) {
    let clock_ref = &**clock;
    let now = clock_ref.now();
    let deadline = s.deadline();
    if now >= deadline {
        s.mark_lost();
        return;
    }
    let seq_at_send = s.heartbeat_sent(now);
    let hop = round_hop(s, clock_ref, deadline - now);
    let transport = &s.parts().transport;
    let request = s.heartbeat_request();
    let beat = transport.heartbeat_since(s.session_ref(), &request, hop);
    let result = call(clock_ref, hop, beat).await;
    if !s.is_open() {
        return;
    }
    match result {
        Ok(answer) => {
            s.apply_heartbeat(now, seq_at_send, &request, &answer);
            release_orphans(s, clock);
        }
        Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => s.mark_lost(),
        // Anything else is transient until the deadline, which the watchdog keeps: re-sent
        // soon, not a whole period later.
        Err(_) => s.heartbeat_failed(clock_ref.now()),
    }
}

/// Releases grants the server lists but no handle tracks: heartbeats would otherwise renew
/// them forever. Best effort: a failure leaves them for the next heartbeat.
///
/// Each L6 runs in a task of its own (holding its key's turn), never in the heartbeat loop:
/// a lock granted while one is on its way may be due for renewal before an unanswered L6
/// times out, and an L2 waiting for it would come after that lock's deadline.
fn release_orphans(s: &Arc<SessionState>, clock: &Arc<dyn Clock>) {
    for (key, token, turn) in s.claim_orphans() {
        let until_deadline = s.deadline().saturating_sub(clock.now());
        let hop = s.parts().config.request_timeout.min(until_deadline);
        if !s.is_open() || hop.is_zero() {
            return;
        }
        let (session, clock) = (Arc::downgrade(s), clock.clone());
        let task = async move {
            let _turn = turn;
            let Some(s) = session.upgrade() else { return };
            if s.send_release(&key, token, &*clock, hop).await.is_ok() {
                s.orphan_released(&key);
            }
        };
        s.parts().spawner.spawn(Box::pin(task));
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::FutureExt;

    use super::*;
    use crate::backoff::SeededRngSource;
    use crate::clock::ManualClock;
    use crate::config::ClientConfig;
    use crate::error::TransportError;
    use crate::events::NoEvents;
    use crate::parts::ClientParts;
    use crate::spawn::Spawner;
    use crate::transport::ScriptedTransport;

    const TIMEOUT: Duration = Duration::from_millis(500);
    /// The session's heartbeat period: long, so a held lock's renewal comes first.
    const PERIOD: Duration = Duration::from_secs(10);

    /// Keeps what the session spawns, for the test to poll by hand: the simulated executor
    /// sits above this module.
    #[derive(Default)]
    struct Tasks(Mutex<Vec<BoxFuture<'static, ()>>>);

    impl Spawner for Tasks {
        fn spawn(&self, task: BoxFuture<'static, ()>) {
            self.0.lock().unwrap().push(task);
        }
    }

    impl Tasks {
        /// Runs the tasks to their end on `clock`, from timer to timer.
        fn run(&self, clock: &ManualClock) {
            loop {
                let tasks = std::mem::take(&mut *self.0.lock().unwrap());
                let pending: Vec<_> = tasks
                    .into_iter()
                    .filter_map(|mut task| (&mut task).now_or_never().is_none().then_some(task))
                    .collect();
                if pending.is_empty() {
                    return;
                }
                self.0.lock().unwrap().extend(pending);
                assert!(clock.advance_to_next_timer(), "a task waits on no timer");
            }
        }
    }

    struct Setup {
        session: Arc<SessionState>,
        clock: ManualClock,
        transport: ScriptedTransport,
        tasks: Arc<Tasks>,
    }

    /// An open session `s1` (TTL 30 s, heartbeat period [`PERIOD`]) opened at time zero, on
    /// a scripted transport and a manual clock.
    fn setup() -> Setup {
        let (clock, transport) = (ManualClock::new(), ScriptedTransport::new());
        let tasks = Arc::new(Tasks::default());
        let parts = ClientParts {
            transport: Arc::new(transport.clone()),
            clock: Arc::new(clock.clone()),
            spawner: tasks.clone(),
            rng: Arc::new(SeededRngSource::new(7)),
            events: Arc::new(NoEvents),
            config: ClientConfig {
                request_timeout: TIMEOUT,
                ..ClientConfig::default()
            },
            sessions_lost: Arc::default(),
        };
        let (id, holder, ttl) = ("s1".to_owned(), "h1".to_owned(), Duration::from_secs(30));
        let session = SessionState::new(id, holder, ttl, PERIOD, Duration::ZERO, Arc::new(parts));
        Setup {
            session: Arc::new(session),
            clock,
            transport,
            tasks,
        }
    }

    /// A handle of `key` with `ttl`, granted now and registered in `session`.
    fn grant(session: &SessionState, key: &str, ttl: Duration) -> LockHandle {
        let now = session.parts().clock.now();
        let claim = session.claim(key, now + TIMEOUT).now_or_never();
        let claim = claim
            .expect("a free key's turn comes at once")
            .unwrap()
            .unwrap();
        let ttl_millis = ttl.as_millis() as u64;
        claim.grant(
            ScriptedTransport::grant(key, "s1", 1, ttl_millis),
            now,
            None,
        )
    }

    /// A handle whose release failed: its hold ended, its L6 is to be re-sent.
    fn released(session: &SessionState, ttl: Duration) -> LockHandle {
        let handle = grant(session, "k", ttl);
        drop(session.release_hold(&handle));
        handle
    }

    #[test]
    fn a_background_call_waits_the_request_timeout_when_nothing_is_nearer() {
        let s = setup();
        assert_eq!(round_hop(&s.session, &s.clock, Duration::MAX), TIMEOUT);
    }

    #[test]
    fn a_background_call_never_waits_past_its_limit() {
        let s = setup();
        let limit = TIMEOUT / 5;
        assert_eq!(round_hop(&s.session, &s.clock, limit), limit);
    }

    #[test]
    fn a_background_call_never_waits_past_the_next_heartbeat() {
        let s = setup();
        let next = s.session.next_heartbeat();
        s.clock.advance_to(next - TIMEOUT / 5);
        assert_eq!(round_hop(&s.session, &s.clock, Duration::MAX), TIMEOUT / 5);
        s.clock.advance_to(next + TIMEOUT);
        assert_eq!(
            round_hop(&s.session, &s.clock, Duration::MAX),
            Duration::ZERO
        );
    }

    /// Starts a wait for the next heartbeat, applies `change` to the schedule, and lets the
    /// wait run to its timer. Returns the instants it was armed for before and after the
    /// change.
    fn armed_around(s: &Setup, change: impl FnOnce()) -> (Duration, Duration) {
        let weak = Arc::downgrade(&s.session);
        let mut wait = Box::pin(wait_until(&weak, &s.clock, SessionState::next_heartbeat));
        assert!(wait.as_mut().now_or_never().is_none());
        let before = s.clock.next_timer().expect("the wait sleeps");
        change();
        assert!(wait.as_mut().now_or_never().is_none());
        let after = s.clock.next_timer().expect("the wait sleeps");
        s.clock.advance_to(after);
        assert!(matches!(wait.as_mut().now_or_never(), Some(Wake::Due)));
        (before, after)
    }

    /// A grant whose renewal is due before the armed wake-up moves the wait to it at once.
    #[test]
    fn a_schedule_moved_earlier_re_arms_the_wait_at_once() {
        let s = setup();
        let acquire = || drop(grant(&s.session, "k", Duration::from_secs(1)));
        let (before, after) = armed_around(&s, acquire);
        assert_eq!(before, PERIOD);
        assert!(after < PERIOD, "{after:?}");
        assert_eq!(after, s.session.next_heartbeat());
    }

    /// A release moves the next heartbeat later: the armed timer stays and wakes early (the
    /// loop then finds nothing due), rather than being replaced on every release.
    #[test]
    fn a_schedule_moved_later_keeps_the_armed_timer() {
        let s = setup();
        let handle = grant(&s.session, "k", Duration::from_secs(1));
        let due = s.session.next_heartbeat();
        let release = || drop(s.session.release_hold(&handle));
        assert_eq!(armed_around(&s, release), (due, due));
        assert_eq!(s.session.next_heartbeat(), PERIOD);
    }

    #[test]
    fn a_wait_ends_with_its_session() {
        let s = setup();
        let weak = Arc::downgrade(&s.session);
        let mut wait = Box::pin(wait_until(&weak, &s.clock, SessionState::next_deadline));
        assert!(wait.as_mut().now_or_never().is_none());
        assert!(s.session.mark_closed());
        assert!(matches!(wait.as_mut().now_or_never(), Some(Wake::Ended)));

        let s = setup();
        let weak = Arc::downgrade(&s.session);
        drop(s.session);
        let wait = wait_until(&weak, &s.clock, SessionState::next_deadline);
        assert!(matches!(wait.now_or_never(), Some(Wake::Ended)));
    }

    /// Runs the re-sends of the failed release of a lock with `ttl` to their end, the server
    /// answering `answers` (then the scripted default: released).
    fn retried(ttl: Duration, answers: Vec<Result<(), TransportError>>) -> (Setup, LockHandle) {
        let s = setup();
        let handle = released(&s.session, ttl);
        for answer in answers {
            s.transport.push_release(answer);
        }
        retry_release(&s.session, &handle);
        s.tasks.run(&s.clock);
        (s, handle)
    }

    #[test]
    fn a_failed_release_is_re_sent_until_answered() {
        let failures = vec![
            Err(TransportError::Network("reset".into())),
            Err(TransportError::Timeout(TIMEOUT)),
        ];
        let (s, _) = retried(Duration::from_secs(30), failures);
        assert_eq!(s.transport.release_calls(), 3);
        assert!(s.session.is_open());
    }

    /// LOCK_LOST answers the release too: the lock is gone either way.
    #[test]
    fn a_release_answered_lock_lost_is_not_re_sent() {
        let lost = ScriptedTransport::error(ErrorCode::LockLost);
        let (s, _) = retried(Duration::from_secs(30), vec![Err(lost)]);
        assert_eq!(s.transport.release_calls(), 1);
        assert!(s.session.is_open());
    }

    #[test]
    fn a_release_answered_session_not_found_loses_the_session() {
        let gone = ScriptedTransport::error(ErrorCode::SessionNotFound);
        let (s, _) = retried(Duration::from_secs(30), vec![Err(gone)]);
        assert_eq!(s.transport.release_calls(), 1);
        assert!(!s.session.is_open() && !s.session.is_closed());
    }

    /// Past the lock's TTL from its last renewal the server has dropped it: the re-sends stop
    /// before it, without a timer beyond it.
    #[test]
    fn re_sends_stop_before_the_lock_would_have_lapsed() {
        let down = || Err(TransportError::Network("down".into()));
        let (s, handle) = retried(Duration::from_secs(1), (0..100).map(|_| down()).collect());
        let sent = s.transport.release_calls();
        assert!((1..100).contains(&sent), "{sent} re-sends");
        assert!(s.clock.now() < handle.anchor() + handle.ttl());
    }

    #[test]
    fn nothing_is_re_sent_for_a_session_that_ended_or_was_dropped() {
        let s = setup();
        let handle = released(&s.session, Duration::from_secs(30));
        retry_release(&s.session, &handle);
        s.session.mark_closed();
        s.tasks.run(&s.clock);
        assert_eq!(s.transport.release_calls(), 0);

        let s = setup();
        let handle = released(&s.session, Duration::from_secs(30));
        retry_release(&s.session, &handle);
        drop(s.session);
        s.tasks.run(&s.clock);
        assert_eq!(s.transport.release_calls(), 0);
    }

    fn held(key: &str, token: u64) -> lock_api::HeldLock {
        lock_api::HeldLock {
            key: key.into(),
            fencing_token: token,
            mode: Default::default(),
        }
    }

    /// One L2 round on the scripted transport, answered at once; the `since` it sent.
    fn beat_once(s: &Setup) -> Option<String> {
        let clock: Arc<dyn Clock> = Arc::new(s.clock.clone());
        let round = heartbeat_once(&s.session, &clock).now_or_never();
        round.expect("a scripted L2 is answered at once");
        let calls = s.transport.calls();
        match calls.last() {
            Some(crate::transport::Call::Heartbeat(_, since)) => since.clone(),
            other => panic!("the last call was no L2: {other:?}"),
        }
    }

    #[test]
    fn a_revoke_in_a_delta_loses_the_handle_and_a_full_list_after_a_reset_is_applied() {
        use crate::handle::LostReason;
        use lock_api::{ChangeKind, HeartbeatResponse, HoldChange};
        let s = setup();
        let (a, b) = (
            grant(&s.session, "a", PERIOD),
            grant(&s.session, "b", PERIOD),
        );
        let a_lost = a.lost();
        let full =
            HeartbeatResponse::full(30_000, Some("v1".into()), vec![held("a", 1), held("b", 1)]);
        s.transport.push_heartbeat(Ok(full));
        assert_eq!(beat_once(&s), None, "the first L2 asks for every lock");
        assert!(!a.is_lost() && !b.is_lost());

        // `a` revoked server-side: the delta says so, and only that.
        let gone = HoldChange {
            key: "a".into(),
            fencing_token: 1,
            mode: Default::default(),
            change: ChangeKind::Gone,
        };
        let delta = HeartbeatResponse::delta(30_000, "v2".into(), vec![gone]);
        s.transport.push_heartbeat(Ok(delta));
        s.clock.advance(Duration::from_secs(1));
        assert_eq!(beat_once(&s).as_deref(), Some("v1"));
        assert_eq!(a.lost_reason(), Some(LostReason::NotInHeartbeat));
        assert_eq!(a_lost.now_or_never(), Some(LostReason::NotInHeartbeat));
        assert!(!b.is_lost(), "a delta without b leaves b held");
        let renewed = b.deadline();

        // Nothing changed: `b` is renewed from this L2 as by a full list naming it.
        s.transport
            .push_heartbeat(Ok(HeartbeatResponse::unchanged(30_000, "v2".into())));
        s.clock.advance(Duration::from_secs(1));
        assert_eq!(beat_once(&s).as_deref(), Some("v2"));
        assert!(!b.is_lost() && b.deadline() > renewed);

        // The server restarted: a full list under a new version, without `b`.
        let reset = HeartbeatResponse::full(30_000, Some("w1".into()), vec![]);
        s.transport.push_heartbeat(Ok(reset));
        s.clock.advance(Duration::from_secs(1));
        assert_eq!(beat_once(&s).as_deref(), Some("v2"));
        assert_eq!(b.lost_reason(), Some(LostReason::NotInHeartbeat));
        s.transport
            .push_heartbeat(Ok(HeartbeatResponse::unchanged(30_000, "w1".into())));
        s.clock.advance(Duration::from_secs(1));
        assert_eq!(
            beat_once(&s).as_deref(),
            Some("w1"),
            "the reset's version is sent back"
        );
    }

    #[test]
    fn a_delta_granting_a_new_token_loses_the_older_handle() {
        use crate::handle::LostReason;
        use lock_api::{ChangeKind, HeartbeatResponse, HoldChange};
        let s = setup();
        let a = grant(&s.session, "a", PERIOD);
        let full = HeartbeatResponse::full(30_000, Some("v1".into()), vec![held("a", 1)]);
        s.transport.push_heartbeat(Ok(full));
        beat_once(&s);
        // Revoked, then granted again under a higher token (an L4 answer the client lost):
        // one change for the key, its latest state.
        let regranted = HoldChange {
            key: "a".into(),
            fencing_token: 9,
            mode: Default::default(),
            change: ChangeKind::Granted,
        };
        let delta = HeartbeatResponse::delta(30_000, "v2".into(), vec![regranted]);
        s.transport.push_heartbeat(Ok(delta));
        s.clock.advance(Duration::from_secs(1));
        beat_once(&s);
        assert_eq!(a.lost_reason(), Some(LostReason::NotInHeartbeat));
    }
}
