//! The SDK's entry points: [`LockClient`] (the seams plus configuration) and
//! [`LockClientSession`] (one server session: acquire, release, close, status).
//!
//! A session is its shared state ([`crate::session_state`]) plus a background task that keeps
//! it ([`crate::heartbeat`]): heartbeats renew the session and every lock it holds in time,
//! and a deadline watchdog reports each passed deadline at its instant. Deadlines: every lock
//! and the session itself are valid locally until `sent_at + ttl - safety_margin`, where
//! `sent_at` is when the granting or renewing request was sent (see [`crate::renewal`]).
//! When the session's deadline passes without a renewal (or the server answers 404) the
//! session is lost: every handle is reported lost, waiters fail at once with `SessionLost`,
//! `lock_session_lost` is counted, and the session sends nothing more.

use std::sync::Arc;
use std::time::Duration;

use lock_api::{ErrorCode, OpenSessionRequest, SessionStatus};

use crate::backoff::RngSource;
use crate::clock::Clock;
use crate::config::ClientConfig;
use crate::error::LockError;
use crate::events::{EventSink, NoEvents};
use crate::handle::LockHandle;
use crate::parts::ClientParts;
use crate::policy::AcquirePolicy;
use crate::session_state::SessionState;
use crate::spawn::Spawner;
use crate::transport::{call, Transport, TransportExt};

/// Entry point: the seams and settings shared by every session it opens.
#[derive(Clone)]
pub struct LockClient {
    parts: Arc<ClientParts>,
}

impl LockClient {
    /// A client over the given seams, with default settings and no event sink.
    pub fn new(
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        spawner: Arc<dyn Spawner>,
        rng: Arc<dyn RngSource>,
    ) -> Self {
        LockClient {
            parts: Arc::new(ClientParts {
                transport,
                clock,
                spawner,
                rng,
                events: Arc::new(NoEvents),
                config: ClientConfig::default(),
                sessions_lost: Arc::default(),
            }),
        }
    }

    /// Replaces the event sink (logs, JS `onEvent`).
    pub fn with_events(self, events: Arc<dyn EventSink>) -> Self {
        self.map_parts(|p| p.events = events)
    }

    /// Replaces the settings.
    pub fn with_config(self, config: ClientConfig) -> Self {
        self.map_parts(|p| p.config = config)
    }

    fn map_parts(self, f: impl FnOnce(&mut ClientParts)) -> Self {
        let mut parts = (*self.parts).clone();
        f(&mut parts);
        LockClient {
            parts: Arc::new(parts),
        }
    }

    /// The settings in use.
    pub fn config(&self) -> &ClientConfig {
        &self.parts.config
    }

    /// `lock_session_lost{backend}`: sessions of this client lost so far. The SDK's only
    /// metric; label it with [`ClientConfig::backend`] when exporting.
    pub fn session_lost_count(&self) -> u64 {
        self.parts.sessions_lost.get()
    }

    /// L1: opens a session and starts its background task.
    pub async fn open_session(&self) -> Result<LockClientSession, LockError> {
        let parts = self.parts.clone();
        let request = OpenSessionRequest {
            ttl_millis: parts.config.session_ttl.map(crate::backoff::millis),
            owner: parts.config.owner.clone(),
        };
        let hop = parts.config.request_timeout;
        let sent_at = parts.clock.now();
        let opened = call(
            &*parts.clock,
            hop,
            parts.transport.open_session(&request, hop),
        )
        .await
        .map_err(|e| LockError::from_transport(e, ""))?;
        let state = Arc::new(SessionState::new(
            opened.session_id,
            opened.holder_id,
            Duration::from_millis(opened.ttl_millis),
            Duration::from_millis(opened.heartbeat_millis.max(1)),
            sent_at,
            parts,
        ));
        crate::heartbeat::spawn(&state);
        Ok(LockClientSession { state })
    }
}

/// One server session. Cheap to clone; clones share the session. Dropping every clone
/// without [`LockClientSession::close`] stops the heartbeat and lets the server expire it;
/// its handles end then (`LostReason::SessionClosed`).
#[derive(Clone)]
pub struct LockClientSession {
    state: Arc<SessionState>,
}

impl LockClientSession {
    /// The server's session id: the session's credential, for this client only (never log
    /// or show it; [`LockClientSession::holder_id`] is its public name).
    pub fn id(&self) -> &str {
        self.state.id()
    }

    /// The session's public name, L1's `holderId`: what L7 shows as the holder of this
    /// session's locks, and what the server's logs call it. Safe to log and display.
    pub fn holder_id(&self) -> &str {
        self.state.holder_id()
    }

    /// Acquires `key` for `ttl` under `policy`: `Ok(Some(handle))` when granted (or already
    /// held by this session: a nested hold), `Ok(None)` when not granted within the budget.
    /// See [`crate::acquire`] for the loop. Cancel by dropping the future.
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        crate::acquire::acquire(&self.state, key, ttl, policy).await
    }

    /// [`LockClientSession::acquire`] with the default lock TTL and [`AcquirePolicy::default`].
    pub async fn acquire_default(&self, key: &str) -> Result<Option<LockHandle>, LockError> {
        let ttl = self.state.parts().config.default_lock_ttl;
        self.acquire(key, ttl, &AcquirePolicy::default()).await
    }

    /// Releases one hold of `handle`. Only the outermost release (depth zero) sends L6;
    /// 409 LOCK_LOST is benign (the lock is already gone). A released handle reports lost.
    /// Releasing a handle that is no longer registered does nothing. A lost or closed session
    /// sends nothing: its locks are gone with it. A lost handle releases quietly: its L6 is
    /// still sent (the server may hold the lock a little longer), but a failure is not an error.
    pub async fn release(&self, handle: &LockHandle) -> Result<(), LockError> {
        let s = &self.state;
        if handle.session_id() != s.id() {
            return Err(LockError::validation(
                "handle",
                "handle belongs to another session",
            ));
        }
        let was_lost = handle.is_lost();
        let Some(_in_flight) = s.release_hold(handle) else {
            return Ok(());
        };
        if s.ensure_open().is_err() {
            return Ok(());
        }
        let parts = s.parts();
        let (key, token) = (handle.key(), handle.fencing_token());
        let hop = parts.config.request_timeout;
        let result = s.send_release(key, token, &*parts.clock, hop).await;
        match &result {
            Ok(()) => s.released(key, token),
            Err(LockError::SessionLost) => s.mark_lost(),
            // The lock may still be held (e.g. the L6 was lost): the next heartbeat releases
            // it as an orphan, and until then a new grant of the key counts from its anchor.
            Err(_) => s.record_suspect(key, handle.anchor()),
        }
        // The holder of a lost lock has been told already (the `lost` event, the handle's
        // signal), and a failed L6 leaves nothing that the next heartbeat or the lock's own TTL
        // does not end. Failing here would only hide the caller's result: after a network
        // partition heals, the first request often meets a pooled connection the peer closed.
        if was_lost {
            return Ok(());
        }
        result
    }

    /// L3: closes the session (the server releases all its locks) and stops the heartbeat.
    /// 404 is benign; closing a lost or closed session sends nothing.
    pub async fn close(&self) -> Result<(), LockError> {
        let s = &self.state;
        if !s.mark_closed() {
            return Ok(());
        }
        let parts = s.parts();
        let hop = parts.config.request_timeout;
        let closed = parts.transport.close_session(s.id(), hop);
        match call(&*parts.clock, hop, closed).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => Ok(()),
            Err(e) => Err(LockError::from_transport(e, "")),
        }
    }

    /// L5: the server's view of this session.
    pub async fn status(&self) -> Result<SessionStatus, LockError> {
        let s = &self.state;
        s.ensure_open()?;
        let parts = s.parts();
        let hop = parts.config.request_timeout;
        let status = parts.transport.session_status(s.id(), hop);
        s.check_session_answer(call(&*parts.clock, hop, status).await)
    }

    /// True once the session is lost (404 or deadline passed without renewal).
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// True once [`LockClientSession::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.state.is_closed()
    }

    /// The session's conservative local deadline, on the client's clock.
    pub fn deadline(&self) -> Duration {
        self.state.deadline()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))] // uses test_support (native only)
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::error::TransportError;
    use crate::events::ClientEvent;
    use crate::handle::LostReason;
    use crate::test_support::Fixture;
    use crate::transport::{Call, ScriptedTransport};
    use lock_api::{HeartbeatResponse, HeldLock, LockGrant};
    use std::sync::Mutex;

    fn grant(key: &str, token: u64) -> Result<LockGrant, TransportError> {
        Ok(ScriptedTransport::grant(key, "s1", token, 10_000))
    }

    fn heartbeat(locks: &[(&str, u64)]) -> Result<HeartbeatResponse, TransportError> {
        Ok(HeartbeatResponse {
            ttl_millis: 15_000,
            locks: locks
                .iter()
                .map(|(key, token)| HeldLock {
                    key: (*key).into(),
                    fencing_token: *token,
                })
                .collect(),
        })
    }

    /// C2 ct2-pinned, *One grant per nesting*: nested acquires → one L4, the same token, one
    /// L6 on the outer release.
    #[test]
    fn nested_acquires_share_one_grant_and_one_release() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 77));
        let (outer, inner, after_inner) = f.run(async move {
            let outer = session.acquire_default("k").await.unwrap().unwrap();
            let inner = session.acquire_default("k").await.unwrap().unwrap();
            session.release(&inner).await.unwrap();
            let after_inner = outer.is_lost();
            session.release(&outer).await.unwrap();
            (outer, inner, after_inner)
        });
        assert_eq!(f.transport.acquire_calls(), 1);
        assert_eq!(outer.fencing_token(), 77);
        assert_eq!(inner.fencing_token(), outer.fencing_token());
        assert!(!after_inner, "the inner release keeps the outer hold");
        assert_eq!(f.transport.release_calls(), 1);
        assert!(outer.is_lost(), "a released handle reports lost");
    }

    /// C2 ct2-pinned, *Lost is not reentrant*: a key missing from a heartbeat is lost at once;
    /// re-acquiring it fails with LockLost and sends no L4.
    #[test]
    fn reacquiring_a_lost_key_fails_without_a_request() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 5));
        f.transport.push_heartbeat(heartbeat(&[]));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        let deadline = handle.deadline();
        f.clock.advance(Duration::from_secs(5)); // the first heartbeat answers without "k"
        let s = session.clone();
        let result = f.run(async move { s.acquire_default("k").await });
        assert!(handle.is_lost());
        assert!(
            f.clock.now() < deadline,
            "lost before its deadline, from the heartbeat"
        );
        assert_eq!(result.unwrap_err(), LockError::LockLost { key: "k".into() });
        assert_eq!(f.transport.acquire_calls(), 1);
        assert!(f.event_names().contains(&"lock_lost"));
        // Releasing the lost handle (LOCK_LOST is benign) makes the key acquirable again.
        f.transport
            .push_release(Err(ScriptedTransport::error(ErrorCode::LockLost)));
        f.transport.push_acquire(grant("k", 6));
        let again = f.run(async move {
            session.release(&handle).await.unwrap();
            session.acquire_default("k").await
        });
        assert_eq!(again.unwrap().unwrap().fencing_token(), 6);
    }

    /// A lost handle releases quietly: its L6 is sent, and its failure is not an error; a
    /// valid handle's failed L6 is.
    #[test]
    fn a_lost_handle_releases_quietly_and_a_valid_one_reports_the_failure() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("lost", 5));
        f.transport.push_acquire(grant("held", 6));
        f.transport.push_heartbeat(heartbeat(&[("held", 6)]));
        let s = session.clone();
        let (lost, held) = f.run(async move {
            let lost = s.acquire_default("lost").await.unwrap().unwrap();
            let held = s.acquire_default("held").await.unwrap().unwrap();
            (lost, held)
        });
        f.clock.advance(Duration::from_secs(5)); // the first heartbeat answers without "lost"
        let s = session.clone();
        f.run(async move { s.is_lost() });
        assert!(lost.is_lost() && !held.is_lost());
        let refused = || Err(TransportError::Network("other side closed".into()));
        f.transport.push_release(refused());
        f.transport.push_release(refused());
        let (quiet, loud) =
            f.run(async move { (session.release(&lost).await, session.release(&held).await) });
        assert_eq!(f.transport.release_calls(), 2, "both send their L6");
        assert_eq!(quiet, Ok(()));
        assert!(loud.is_err(), "{loud:?}");
    }

    #[test]
    fn deadlines_count_from_the_send_time_minus_the_margin_and_heartbeats_move_them() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        // Granted at t=0 with a 10 s TTL: margin max(500 ms, 1 s) = 1 s.
        assert_eq!(handle.deadline(), Duration::from_secs(9));
        f.clock.advance(Duration::from_secs(5)); // heartbeat sent at 5 s lists the lock
        let s = session.clone();
        f.run(async move { s.is_lost() });
        assert_eq!(handle.deadline(), Duration::from_secs(14));
        assert_eq!(
            session.deadline(),
            Duration::from_millis(5_000 + 15_000 - 1_500)
        );
    }

    #[test]
    fn failed_heartbeats_past_the_deadline_lose_the_session_and_count_it() {
        let f = Fixture::new();
        let session = f.session();
        for _ in 0..10 {
            f.transport
                .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        }
        f.transport.push_acquire(grant("k", 1));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
        // Session deadline 13.5 s (15 s TTL, 1.5 s margin); every heartbeat before it fails
        // (due at a third of the lock's TTL while it is held, then every 5 s).
        let heartbeats = || {
            f.transport
                .calls()
                .iter()
                .filter(|c| matches!(c, Call::Heartbeat(_)))
                .count()
        };
        let mut at_loss = None;
        for _ in 0..20 {
            f.clock.advance(Duration::from_secs(1));
            let s = session.clone();
            if f.run(async move { s.is_lost() }) && at_loss.is_none() {
                at_loss = Some(heartbeats());
            }
        }
        assert!(session.is_lost());
        assert!(handle.is_lost());
        assert_eq!(f.client.session_lost_count(), 1);
        assert!(at_loss.is_some_and(|n| n >= 2), "{at_loss:?}");
        assert_eq!(Some(heartbeats()), at_loss, "no heartbeat after the loss");
        let s = session.clone();
        assert_eq!(f.run(async move { s.release(&handle).await }), Ok(()));
        assert_eq!(
            f.transport.release_calls(),
            0,
            "a lost session sends nothing"
        );
        assert_eq!(f.run(async move { session.close().await }), Ok(()));
        assert!(!f
            .transport
            .calls()
            .iter()
            .any(|c| matches!(c, Call::CloseSession(_))));
    }

    fn heartbeat_calls(f: &Fixture) -> usize {
        f.transport
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Heartbeat(_)))
            .count()
    }

    /// Lets `by` of simulated time pass, every timer firing at its instant.
    fn pass(f: &Fixture, by: Duration) {
        let clock = f.clock.clone();
        f.run(async move { clock.sleep(by).await });
    }

    /// A 500 ms lock on a 15 s session (heartbeat period 5 s) is renewed halfway through its
    /// 250 ms of local validity, so it stays held; released, the schedule falls back to the
    /// session's period.
    #[test]
    fn a_short_lock_is_renewed_in_time_and_its_release_relaxes_the_schedule() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 500,
            ..g
        }));
        let s = session.clone();
        let policy = AcquirePolicy::default();
        let handle = f.run(async move {
            let h = s.acquire("k", Duration::from_millis(500), &policy).await;
            h.unwrap().unwrap()
        });
        pass(&f, Duration::from_secs(5));
        assert!(!handle.is_lost(), "{handle:?}");
        assert_eq!(handle.lost_reason(), None);
        let held = heartbeat_calls(&f);
        assert!((39..=41).contains(&held), "one L2 every 125 ms: {held}");
        let (s, h) = (session.clone(), handle.clone());
        f.run(async move { s.release(&h).await.unwrap() });
        assert_eq!(handle.lost_reason(), Some(LostReason::Released));
        pass(&f, Duration::from_millis(10_500));
        assert_eq!(heartbeat_calls(&f) - held, 2, "back to one L2 every 5 s");
        assert!(
            !f.event_names().contains(&"lock_lost"),
            "a release is no loss"
        );
    }

    /// The heartbeat task sleeping towards the session's next heartbeat is woken by a grant
    /// whose renewal is due sooner.
    #[test]
    fn a_grant_wakes_the_heartbeat_early() {
        let f = Fixture::new();
        let session = f.session();
        pass(&f, Duration::from_secs(1));
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 600,
            ..g
        }));
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let granted =
            f.run(async move { s.acquire("k", Duration::from_millis(600), &policy).await });
        assert!(matches!(granted, Ok(Some(_))), "{granted:?}");
        pass(&f, Duration::from_millis(149));
        assert_eq!(heartbeat_calls(&f), 0);
        pass(&f, Duration::from_millis(1));
        assert_eq!(
            heartbeat_calls(&f),
            1,
            "due at 1 s + (600 ms − 300 ms margin) / 2"
        );
    }

    /// With every heartbeat failing, a 1 s lock is reported lost at its deadline (500 ms):
    /// its `lost()` future completes then, with one `lock_lost` event.
    #[test]
    fn a_passed_deadline_is_reported_at_that_instant() {
        let f = Fixture::new();
        let session = f.session();
        for _ in 0..10 {
            f.transport
                .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        }
        f.transport.push_acquire(grant("k", 1).map(|g| LockGrant {
            ttl_millis: 1_000,
            ..g
        }));
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let handle = f.run(async move {
            let h = s.acquire("k", Duration::from_secs(1), &policy).await;
            h.unwrap().unwrap()
        });
        assert_eq!(handle.deadline(), Duration::from_millis(500));
        let (h, clock) = (handle.clone(), f.clock.clone());
        let (at, reason) = f.run(async move {
            let reason = h.lost().await;
            (clock.now(), reason)
        });
        assert_eq!(
            (at, reason),
            (Duration::from_millis(500), LostReason::DeadlinePassed)
        );
        let lost: Vec<_> = f
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.name() == "lock_lost")
            .cloned()
            .collect();
        assert_eq!(
            lost,
            [ClientEvent::Lost {
                key: "k".into(),
                fencing_token: 1,
                reason: LostReason::DeadlinePassed
            }]
        );
        drop(session);
    }

    /// Dropping every clone of a session ends its handles: nothing can renew them now.
    #[test]
    fn dropping_the_session_ends_its_handles() {
        let f = Fixture::new();
        let session = f.session();
        f.transport.push_acquire(grant("k", 1));
        let handle = f.run(async move { session.acquire_default("k").await.unwrap().unwrap() });
        assert_eq!(handle.lost_reason(), Some(LostReason::SessionClosed));
    }

    #[test]
    fn a_ttl_too_short_to_renew_is_refused_naming_the_shortest_that_works() {
        let f = Fixture::new();
        let session = f.session();
        let policy = AcquirePolicy::default();
        let s = session.clone();
        let refused =
            f.run(async move { s.acquire("k", Duration::from_millis(399), &policy).await });
        let Err(LockError::Validation { field, message }) = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(field, "ttlMillis");
        assert!(message.contains("at least 400 ms"), "{message}");
        assert_eq!(f.transport.acquire_calls(), 0);
        f.transport.push_acquire(grant("k", 1));
        let granted = f.run(async move {
            session
                .acquire("k", Duration::from_millis(400), &policy)
                .await
        });
        assert!(matches!(granted, Ok(Some(_))), "{granted:?}");
    }

    #[test]
    fn close_sends_l3_once_and_ends_the_session() {
        let f = Fixture::new();
        let session = f.session();
        let s = session.clone();
        let (first, second, acquire) = f.run(async move {
            (
                s.close().await,
                s.close().await,
                s.acquire_default("k").await,
            )
        });
        assert_eq!((first, second), (Ok(()), Ok(())));
        assert_eq!(acquire.unwrap_err(), LockError::Closed);
        let closes = f
            .transport
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::CloseSession(_)))
            .count();
        assert_eq!(closes, 1);
        assert!(session.is_closed());
    }

    /// A grant the client has no handle for (its acquire timed out) is released by the
    /// next heartbeat instead of being renewed forever.
    #[test]
    fn heartbeats_release_orphan_grants() {
        let f = Fixture::new();
        let _session = f.session();
        f.transport.push_heartbeat(heartbeat(&[("orphan", 12)]));
        f.clock.advance(Duration::from_secs(5));
        f.run(async {});
        let released: Vec<_> = f
            .transport
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Release(key, req) => Some((key, req.fencing_token)),
                _ => None,
            })
            .collect();
        assert_eq!(
            released,
            vec![("orphan".to_owned(), 12)],
            "{:?}",
            f.transport.calls()
        );
    }

    /// Records whether each sleep of a [`ManualClock`] was a background one.
    #[derive(Clone)]
    struct RecordingClock {
        inner: ManualClock,
        background: Arc<Mutex<Vec<bool>>>,
    }

    impl Clock for RecordingClock {
        fn now(&self) -> Duration {
            self.inner.now()
        }

        fn sleep(&self, duration: Duration) -> crate::spawn::BoxFuture<'static, ()> {
            self.background.lock().unwrap().push(false);
            self.inner.sleep(duration)
        }

        fn background_sleep(&self, duration: Duration) -> crate::spawn::BoxFuture<'static, ()> {
            self.background.lock().unwrap().push(true);
            self.inner.sleep(duration)
        }
    }

    /// The heartbeat task waits only on background sleeps (JS: unref'd timers, so an open
    /// session never keeps Node alive), the caller's calls only on foreground ones.
    #[test]
    fn only_the_heartbeat_task_sleeps_in_the_background() {
        let f = Fixture::new();
        let clock = RecordingClock {
            inner: f.clock.clone(),
            background: Arc::default(),
        };
        let client = LockClient::new(
            Arc::new(f.transport.clone()),
            Arc::new(clock.clone()),
            f.exec.spawner(1),
            Arc::new(crate::backoff::SeededRngSource::new(1)),
        )
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_secs(15)),
            ..ClientConfig::default()
        });
        let taken = || std::mem::take(&mut *clock.background.lock().unwrap());
        let session = f.run(async move { client.open_session().await.unwrap() });
        f.run(async {}); // the background task arms its waits
        assert_eq!(
            taken(),
            [false, true, true],
            "L1's timeout, then the heartbeat's and the deadline watchdog's waits"
        );
        f.transport.push_heartbeat(heartbeat(&[]));
        f.clock.advance(Duration::from_secs(5));
        f.run(async {});
        let heartbeat_round = taken();
        assert!(heartbeat_round.len() >= 2, "{heartbeat_round:?}");
        assert!(heartbeat_round.iter().all(|&b| b), "{heartbeat_round:?}");
        f.transport.push_acquire(grant("k", 1));
        f.run(async move { session.acquire_default("k").await.unwrap().unwrap() });
        let acquire = taken();
        assert!(
            !acquire.is_empty() && acquire.iter().all(|&b| !b),
            "{acquire:?}"
        );
    }
}
