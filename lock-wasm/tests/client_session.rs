//! The session's behaviour through the public API, on a scripted server and simulated time:
//! explicit nesting, turns per key, releases that fail, heartbeats, deadlines, close.
#![cfg(not(target_arch = "wasm32"))]
// the fixture runs on the native simulated executor
// Scripted answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use lock_api::{ErrorCode, HeartbeatResponse, HeldLock, LockGrant, Unavailability};
use lock_wasm::clock::{Clock, ManualClock};
use lock_wasm::error::TransportError;
use lock_wasm::events::ClientEvent;
use lock_wasm::handle::LostReason;
use lock_wasm::policy::PolicySettings;
use lock_wasm::test_support::Fixture;
use lock_wasm::transport::{Call, Reply, Request, ScriptedTransport, Transport};
use lock_wasm::{
    AcquirePolicy, ClientConfig, LockClient, LockClientSession, LockError, SeededRngSource,
};

fn grant(key: &str, token: u64) -> Result<LockGrant, TransportError> {
    Ok(ScriptedTransport::grant(key, "s1", token, 10_000))
}

fn heartbeat(locks: &[(&str, u64)]) -> Result<HeartbeatResponse, TransportError> {
    let locks = locks
        .iter()
        .map(|(key, token)| HeldLock {
            key: (*key).into(),
            fencing_token: *token,
            mode: Default::default(),
        })
        .collect();
    Ok(HeartbeatResponse::full(15_000, None, locks))
}

/// C2 ct2-pinned, *One grant per nesting*: a hold nested through the handle → one L4, the
/// same token, one L6 on the outer release.
#[test]
fn nested_holds_share_one_grant_and_one_release() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 77));
    let (outer, inner, after_inner) = f.run(async move {
        let outer = session.acquire_default("k").await.unwrap().unwrap();
        let inner = outer.nest().unwrap();
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

/// C2 ct2-pinned, *Strangers take turns*: an acquire of a key another caller of the session
/// holds is never a nested hold: it waits, sending nothing, until the holder's release was
/// answered, then gets a grant and a token of its own.
#[test]
fn a_second_caller_waits_for_the_release_and_gets_its_own_token() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 1));
    let s = session.clone();
    let first = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    let s = session.clone();
    let mut second = Box::pin(async move { s.acquire_default("k").await });
    assert!((&mut second).now_or_never().is_none(), "waits its turn");
    f.clock.advance(Duration::from_secs(3));
    assert!((&mut second).now_or_never().is_none());
    assert_eq!(f.transport.acquire_calls(), 1, "no L4 while it waits");
    f.transport.push_acquire(grant("k", 2));
    let s = session.clone();
    let (released, second) = f.run(async move {
        let released = s.release(&first).await;
        (released, second.await)
    });
    released.unwrap();
    let second = second.unwrap().expect("granted after the release");
    assert_eq!(second.fencing_token(), 2);
    assert_eq!(f.transport.acquire_calls(), 2);
}

/// C2 ct2-pinned, *Lost is not reentrant*: a key missing from a heartbeat is lost at once;
/// nesting into it fails with LockLost and sends nothing, and another caller's acquire waits
/// for the lost hold's release.
#[test]
fn a_lost_handle_cannot_be_nested_and_keeps_its_turn_until_released() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 5));
    f.transport.push_heartbeat(heartbeat(&[]));
    let s = session.clone();
    let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    let deadline = handle.deadline();
    f.clock.advance(Duration::from_secs(5)); // the first heartbeat answers without "k"
    f.run(async {});
    assert!(handle.is_lost());
    assert!(
        f.clock.now() < deadline,
        "lost before its deadline, from the heartbeat"
    );
    assert_eq!(
        handle.nest().unwrap_err(),
        LockError::LockLost { key: "k".into() }
    );
    assert_eq!(f.transport.acquire_calls(), 1);
    assert!(f.event_names().contains(&"lock_lost"));
    // Releasing the lost handle (LOCK_LOST is benign) lets the waiting caller in.
    f.transport
        .push_release(Err(ScriptedTransport::error(ErrorCode::LockLost)));
    f.transport.push_acquire(grant("k", 6));
    let again = f.run(async move {
        let waiting = session.acquire_default("k");
        let release = async {
            session.release(&handle).await.unwrap();
        };
        futures::join!(waiting, release).0
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
            .filter(|c| matches!(c, Call::Heartbeat(..)))
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

/// A store outage shorter than the session's validity: heartbeats answered 503
/// STORE_UNAVAILABLE are re-sent, the session and its lock stay valid until the deadline, and
/// the first answered heartbeat moves the deadlines on.
#[test]
fn heartbeats_answered_store_unavailable_keep_the_session_until_its_deadline() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 1));
    let s = session.clone();
    let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    let outage = || {
        Err(ScriptedTransport::store_unavailable(
            Unavailability::DiskFull,
            1_000,
        ))
    };
    for _ in 0..4 {
        f.transport.push_heartbeat(outage());
    }
    let deadline = handle.deadline();
    // Through the four failed heartbeats, second by second, never past the deadline.
    while heartbeat_calls(&f) < 4 {
        assert!(f.clock.now() < deadline, "the outage outlived the deadline");
        f.clock.advance(Duration::from_millis(250));
        let s = session.clone();
        assert!(
            !f.run(async move { s.is_lost() }),
            "lost at {:?}",
            f.clock.now()
        );
        assert!(!handle.is_lost());
    }
    // The next heartbeat is answered: the session and the lock live on past the old deadline.
    while f.clock.now() <= deadline + Duration::from_secs(1) {
        f.clock.advance(Duration::from_millis(250));
        let s = session.clone();
        f.run(async move { s.is_lost() });
    }
    assert!(heartbeat_calls(&f) > 4);
    assert!(!session.is_lost());
    assert!(!handle.is_lost());
    assert!(handle.deadline() > deadline);
    assert_eq!(f.client.session_lost_count(), 0);
}

/// A release answered STORE_UNAVAILABLE is re-sent in the background until it is answered.
#[test]
fn a_release_answered_store_unavailable_is_re_sent() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 1));
    let s = session.clone();
    let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    f.transport
        .push_release(Err(ScriptedTransport::store_unavailable(
            Unavailability::NoQuorum,
            200,
        )));
    let s = session.clone();
    let first = f.run(async move { s.release(&handle).await });
    assert!(
        matches!(first, Err(LockError::StoreUnavailable { .. })),
        "{first:?}"
    );
    for _ in 0..20 {
        f.clock.advance(Duration::from_millis(250));
        f.run(async {});
    }
    assert_eq!(
        f.transport.release_calls(),
        2,
        "re-sent once, then answered"
    );
    assert!(!session.is_lost());
}

fn heartbeat_calls(f: &Fixture) -> usize {
    f.transport
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Heartbeat(..)))
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
    f.run(async {}); // the L2 due at 5 s too, whichever timer of that instant woke first
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
    let granted = f.run(async move { s.acquire("k", Duration::from_millis(600), &policy).await });
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
    let refused = f.run(async move { s.acquire("k", Duration::from_millis(399), &policy).await });
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
    // The L6 goes from a task of its own, which the heartbeat's answer spawned.
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

    fn sleep(&self, duration: Duration) -> lock_wasm::spawn::BoxFuture<'static, ()> {
        self.background.lock().unwrap().push(false);
        self.inner.sleep(duration)
    }

    fn background_sleep(&self, duration: Duration) -> lock_wasm::spawn::BoxFuture<'static, ()> {
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
        Arc::new(lock_wasm::backoff::SeededRngSource::new(1)),
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

/// A release whose L6 fails never wedges the key: the handle ends, the next caller gets the
/// key at once, and when the server answers its L4 with the grant the session already
/// ended (the failed L6 never arrived), that grant is released again and the L4 re-sent, so
/// the new caller gets a token of its own.
#[test]
fn a_failed_release_passes_the_key_on_and_its_grant_is_never_handed_out_again() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 1));
    f.transport
        .push_release(Err(TransportError::Network("restarting".into())));
    f.transport.push_acquire(grant("k", 1)); // the server still holds the old grant
    f.transport.push_acquire(grant("k", 2));
    let (failed, next) = f.run(async move {
        let first = session.acquire_default("k").await.unwrap().unwrap();
        let failed = session.release(&first).await;
        assert!(first.is_lost(), "the handle ended with its release");
        (failed, session.acquire_default("k").await)
    });
    assert!(matches!(failed, Err(LockError::Network(_))), "{failed:?}");
    assert_eq!(next.unwrap().unwrap().fencing_token(), 2);
    assert!(f.event_names().contains(&"lock_release_failed"));
    let releases: Vec<u64> = f
        .transport
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Release(_, r) => Some(r.fencing_token),
            _ => None,
        })
        .collect();
    assert_eq!(
        releases[..2],
        [1, 1],
        "the failed L6, then the stale grant's"
    );
}

/// The L6 of a failed release is re-sent in the background until it is answered.
#[test]
fn a_failed_release_is_retried_in_the_background() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant("k", 1));
    f.transport
        .push_release(Err(TransportError::Timeout(Duration::from_secs(2))));
    f.transport
        .push_release(Err(TransportError::Network("refused".into())));
    let s = session.clone();
    let failed = f.run(async move {
        let handle = s.acquire_default("k").await.unwrap().unwrap();
        s.release(&handle).await
    });
    assert!(failed.is_err());
    assert_eq!(f.transport.release_calls(), 1);
    pass(&f, Duration::from_secs(3));
    assert_eq!(
        f.transport.release_calls(),
        3,
        "re-sent until answered, then no more"
    );
    pass(&f, Duration::from_secs(10));
    assert_eq!(f.transport.release_calls(), 3);
    assert!(!session.is_lost());
}

/// Regression (fault seeds 1637, 2154, 3180, 3414, 3693, 7352 of the simulation): an L4
/// answered with a grant the session already ended, whose L6 then goes unanswered, still
/// ends the acquire within its budget. The L6 used to get the L4's own hop, fixed before the
/// L4's round trip, and overran the deadline by that round trip.
#[test]
fn releasing_a_stale_grant_stays_within_the_acquires_budget() {
    let f = Fixture::new();
    let client = TenMsAway::client(&f, true);
    let session = f.run(async move { client.open_session().await.unwrap() });
    f.run(async {});
    f.transport.push_acquire(grant("k", 1));
    f.transport.push_acquire(grant("k", 1)); // the lost L6 left the old grant at the server
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(300),
        max_attempts: 1,
        ..PolicySettings::default()
    })
    .unwrap();
    let s = session.clone();
    let first = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    let s = session.clone();
    let failed = f.run(async move { s.release(&first).await });
    assert!(matches!(failed, Err(LockError::Timeout(_))), "{failed:?}");
    let start = f.clock.now();
    let clock = f.clock.clone();
    let (second, ended) = f.run(async move {
        let second = session.acquire("k", Duration::from_secs(10), &policy).await;
        (second, clock.now())
    });
    assert!(matches!(second, Ok(None)), "{second:?}");
    let stale_l6 = f
        .transport
        .calls()
        .iter()
        .rev()
        .any(|c| matches!(c, Call::Release(_, r) if r.fencing_token == 1));
    assert!(stale_l6, "the stale grant's L6 was sent");
    assert!(
        ended - start <= Duration::from_millis(300),
        "took {:?}, budget 300 ms",
        ended - start
    );
}

/// The scripted server, every L4's answer `l4` on its way back (the grant made at once).
struct SlowL4 {
    server: ScriptedTransport,
    clock: ManualClock,
    l4: Duration,
}

impl SlowL4 {
    /// A session of a client of `f`'s scripted server over this network, with `config`.
    fn session(f: &Fixture, l4: Duration, config: ClientConfig) -> LockClientSession {
        let slow = SlowL4 {
            server: f.transport.clone(),
            clock: f.clock.clone(),
            l4,
        };
        let client = LockClient::new(
            Arc::new(slow),
            Arc::new(f.clock.clone()),
            f.exec.spawner(1),
            Arc::new(SeededRngSource::new(1)),
        )
        .with_config(config);
        let session = f.run(async move { client.open_session().await.unwrap() });
        f.run(async {});
        session
    }
}

#[async_trait::async_trait]
impl Transport for SlowL4 {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Result<Reply, TransportError> {
        let slow = matches!(request, Request::Acquire(..));
        let answer = self.server.send(request, timeout).await;
        if slow {
            self.clock.sleep(self.l4).await;
        }
        answer
    }
}

/// Regression (fault seed 9225 of the simulation): an L2 sent while an L4 is on its way,
/// and answered before the grant arrives, renewed nothing the grant's deadline counts from
/// (the L4's send), so the lock's next renewal counts from the L4's send too. It used to
/// count from that L2, and came due after the lock's deadline: every heartbeat answered,
/// the lock lost anyway.
#[test]
fn a_grant_that_arrives_after_a_heartbeat_is_renewed_by_its_own_schedule() {
    let f = Fixture::new();
    let session = SlowL4::session(&f, Duration::from_millis(1_200), f.client.config().clone());
    // The L4 at 4 s, the session's L2 at 5 s (its period), the grant at 5.2 s: a 2 s lock,
    // valid until 4 s + 2 s − 500 ms margin = 5.5 s, due for renewal since 4.667 s.
    pass(&f, Duration::from_secs(4));
    f.transport
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 2_000)));
    let s = session.clone();
    let handle = f.run(async move {
        s.acquire("k", Duration::from_secs(2), &AcquirePolicy::default())
            .await
            .unwrap()
            .unwrap()
    });
    assert_eq!(f.clock.now(), Duration::from_millis(5_200));
    assert_eq!(
        heartbeat_calls(&f),
        1,
        "the L2 at 5 s went out before the grant came"
    );
    assert_eq!(handle.deadline(), Duration::from_millis(5_500));
    pass(&f, Duration::from_millis(400));
    assert_eq!(heartbeat_calls(&f), 2, "renewed at once, not at 5.667 s");
    assert!(!handle.is_lost(), "{:?}", handle.lost_reason());
    assert!(handle.deadline() > Duration::from_millis(6_000));
}

/// Regression (fault seed 8894 of the simulation): a grant the session ended whose L6
/// failed, answered to an L4 that was on its way while an L2 came back without it, is still
/// released again, never handed out. The L2's answer used to drop it from the session's
/// ended grants although that L4 had reached the server first (a retried L6 then ended
/// the grant at the server while the new caller believed it held it).
#[test]
fn an_ended_grant_answered_to_an_l4_sent_before_a_heartbeat_is_not_handed_out() {
    let f = Fixture::new();
    let config = ClientConfig {
        request_timeout: Duration::from_secs(5),
        ..f.client.config().clone()
    };
    let session = SlowL4::session(&f, Duration::from_secs(3), config);
    f.transport.push_acquire(grant("k", 1));
    f.transport
        .push_release(Err(TransportError::Network("restarting".into())));
    f.transport.push_acquire(grant("k", 1)); // the failed L6 left it at the server
    f.transport.push_acquire(grant("k", 2));
    // The session's L2 at 5 s, while the second L4 (3 s to 6 s) is on its way.
    f.transport.push_heartbeat(heartbeat(&[]));
    let next = f.run(async move {
        let first = session.acquire_default("k").await.unwrap().unwrap();
        assert!(session.release(&first).await.is_err());
        session.acquire_default("k").await
    });
    assert_eq!(heartbeat_calls(&f), 1, "one L2 while the L4 was on its way");
    let next = next.unwrap().unwrap();
    assert_eq!(
        next.fencing_token(),
        2,
        "the ended grant was released, not handed out"
    );
}

/// Regression (seed 431 of the simulation with two more clients on its shared keys): an
/// orphan's L6 that goes unanswered does not hold up the heartbeats. A lock granted while it
/// is on its way is renewed when due; the heartbeat loop used to wait for that L6 to time
/// out, and the lock's deadline passed first although every L2 was answered.
#[test]
fn an_unanswered_orphan_release_does_not_hold_up_the_next_renewal() {
    let f = Fixture::new();
    let client = TenMsAway::client(&f, true);
    let session = f.run(async move { client.open_session().await.unwrap() });
    f.run(async {});
    // The session's L2 at 5 s lists an orphan; its L6 (2 s request timeout) is never answered.
    f.transport.push_heartbeat(heartbeat(&[("orphan", 12)]));
    pass(&f, Duration::from_millis(5_100));
    assert_eq!(
        f.transport.release_calls(),
        1,
        "the orphan's L6 is on its way"
    );
    // A 1 s lock at 5.1 s: valid until 5.6 s, due for renewal at 5.35 s.
    f.transport
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 1_000)));
    let s = session.clone();
    let handle = f.run(async move {
        let policy = AcquirePolicy::default();
        s.acquire("k", Duration::from_secs(1), &policy)
            .await
            .unwrap()
            .unwrap()
    });
    pass(&f, Duration::from_millis(900));
    assert!(heartbeat_calls(&f) >= 2, "renewed while the L6 waited");
    assert!(!handle.is_lost(), "{:?}", handle.lost_reason());
}

/// The scripted server 10 ms away on the simulated clock: a call whose timeout is shorter
/// gets no answer, as over a real network; with `l6_lost`, every L6 reaches the server but
/// its answer never comes back (it times out after its whole timeout).
struct TenMsAway {
    server: ScriptedTransport,
    clock: ManualClock,
    l6_lost: bool,
}

impl TenMsAway {
    /// A client of `f`'s scripted server over this network, with `f`'s settings.
    fn client(f: &Fixture, l6_lost: bool) -> LockClient {
        let away = TenMsAway {
            server: f.transport.clone(),
            clock: f.clock.clone(),
            l6_lost,
        };
        LockClient::new(
            Arc::new(away),
            Arc::new(f.clock.clone()),
            f.exec.spawner(1),
            Arc::new(SeededRngSource::new(1)),
        )
        .with_config(f.client.config().clone())
    }
}

#[async_trait::async_trait]
impl Transport for TenMsAway {
    async fn send(&self, request: Request<'_>, timeout: Duration) -> Result<Reply, TransportError> {
        let away = Duration::from_millis(10);
        if timeout < away {
            self.clock.sleep(timeout).await;
            return Err(TransportError::Timeout(timeout));
        }
        self.clock.sleep(away).await;
        let answer = self.server.send(request, timeout).await;
        if self.l6_lost && matches!(request, Request::Release(..)) {
            // Applied, but the answer never comes back.
            self.clock.sleep(timeout - away).await;
            return Err(TransportError::Timeout(timeout));
        }
        answer
    }
}

/// Heartbeats failing from 1 s to 12 s of a 15 s session (valid 13.5 s) holding a 15 s
/// lock: they are re-sent with jittered delays, one is answered before the deadline, and
/// the session and its lock live on. Heartbeats only at the period (5 s, 10 s, 15 s) would
/// have lost both.
fn ride_out_an_outage(f: &Fixture, session: LockClientSession) {
    f.transport
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 15_000)));
    let s = session.clone();
    let handle = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    pass(f, Duration::from_secs(1));
    for _ in 0..1_000 {
        f.transport
            .push_heartbeat(Err(TransportError::Network("balancer down".into())));
    }
    pass(f, Duration::from_secs(11));
    let during = heartbeat_calls(f);
    f.transport.clear_heartbeats();
    pass(f, Duration::from_secs(8));
    assert!(during >= 8, "{during} heartbeats in an 11 s outage");
    assert!(!session.is_lost(), "the session outlived the outage");
    assert!(!handle.is_lost(), "and so did its lock");
    assert!(!f.event_names().contains(&"session_lost"));
}

/// C2 ct2-pinned, *Heartbeats ride out outages*, on a server that answers at once.
#[test]
fn failed_heartbeats_are_retried_until_one_is_answered() {
    let f = Fixture::new();
    let session = f.session();
    ride_out_an_outage(&f, session);
}

/// The same over a network that takes time: each re-send has a whole request timeout for
/// its answer (a re-send timed out at the instant it was due would never be answered).
#[test]
fn a_re_sent_heartbeat_has_time_for_its_answer() {
    let f = Fixture::new();
    let client = TenMsAway::client(&f, false);
    let session = f.run(async move { client.open_session().await.unwrap() });
    f.run(async {});
    ride_out_an_outage(&f, session);
}

/// The client's own session is opened once for every caller and replaced after a loss.
#[test]
fn the_clients_own_session_is_shared_and_replaced_when_lost() {
    let f = Fixture::new();
    let client = f.client.clone();
    let (a, b) = f.run(async move { futures::join!(client.session(), client.session()) });
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.id(), b.id());
    let opened = |f: &Fixture| {
        f.transport
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::OpenSession(_)))
            .count()
    };
    assert_eq!(opened(&f), 1, "concurrent first callers share one L1");
    f.transport
        .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
    f.clock.advance(Duration::from_secs(5));
    f.run(async {});
    assert!(a.is_lost());
    let client = f.client.clone();
    let c = f.run(async move { client.session().await.unwrap() });
    assert!(!c.is_lost());
    assert_eq!(opened(&f), 2, "a new session after the loss");
    let client = f.client.clone();
    f.run(async move { client.close().await.unwrap() });
    assert!(c.is_closed());
}
