//! The bounded acquire loop (C2 ct2-acquire) through the public API, on a scripted server and
//! simulated time.
#![cfg(not(target_arch = "wasm32"))]
// the fixture runs on the native simulated executor
// Scripted answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

use std::time::Duration;

use futures::FutureExt;
use lock_api::{ErrorCode, LockGrant, Unavailability};
use lock_wasm::clock::Clock;
use lock_wasm::error::TransportError;
use lock_wasm::policy::PolicySettings;
use lock_wasm::test_support::Fixture;
use lock_wasm::transport::ScriptedTransport;
use lock_wasm::{AcquirePolicy, LockError, LockHandle};

fn grant(token: u64) -> Result<LockGrant, TransportError> {
    Ok(ScriptedTransport::grant("k", "s1", token, 10_000))
}

/// C2 ct2-pinned, *Bounded give-up*: L4 always 409 → `Ok(None)` within the budget and
/// the attempt cap.
#[test]
fn always_contended_gives_up_within_budget_and_attempts() {
    let f = Fixture::new();
    let session = f.session();
    let start = f.clock.now();
    let policy = AcquirePolicy::default();
    let result = f.run(async move {
        // The declared type, checked at compile time.
        let r: Result<Option<LockHandle>, LockError> =
            session.acquire("k", Duration::from_secs(10), &policy).await;
        r
    });
    assert_eq!(result.unwrap().map(|h| h.fencing_token()), None);
    let calls = f.transport.acquire_calls();
    let took = f.clock.now() - start;
    println!("always 409: {calls} L4 calls in {took:?} (budget 10 s, cap 12)");
    assert!((2..=12).contains(&calls), "{calls} calls");
    assert!(took <= Duration::from_secs(10), "took {took:?}");
    assert!(f.event_names().contains(&"lock_not_granted"));
}

#[test]
fn the_attempt_cap_bounds_calls_when_the_budget_is_large() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(300),
        max_attempts: 3,
        ..PolicySettings::default()
    })
    .unwrap();
    let result = f.run(async move { session.acquire("k", Duration::from_secs(10), &policy).await });
    assert!(matches!(result, Ok(None)));
    assert_eq!(f.transport.acquire_calls(), 3);
}

/// C2 ct2-pinned, *Through NOT_LEADER*: 503, 503, 200 → a grant with the server's token,
/// after the floor delays.
#[test]
fn not_leader_twice_then_granted() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
    f.transport.push_acquire(grant(4242));
    let start = f.clock.now();
    let handle = f
        .run(async move { session.acquire_default("k").await })
        .unwrap()
        .expect("granted");
    assert_eq!(handle.fencing_token(), 4242);
    assert_eq!(f.transport.acquire_calls(), 3);
    assert_eq!(
        f.clock.now() - start,
        Duration::from_millis(200),
        "two 100 ms floors"
    );
}

/// A store outage (503 STORE_UNAVAILABLE) shorter than the budget: the loop waits the
/// server's `retryAfterMillis` between attempts and is granted when it ends.
#[test]
fn an_acquire_rides_out_a_store_unavailable_burst_within_its_budget() {
    let f = Fixture::new();
    let session = f.session();
    for _ in 0..3 {
        f.transport
            .push_acquire(Err(ScriptedTransport::store_unavailable(
                Unavailability::DiskFull,
                1_000,
            )));
    }
    f.transport.push_acquire(grant(77));
    let start = f.clock.now();
    let handle = f
        .run(async move { session.acquire_default("k").await })
        .unwrap()
        .expect("granted after the outage");
    assert_eq!(handle.fencing_token(), 77);
    assert_eq!(f.transport.acquire_calls(), 4);
    assert_eq!(
        f.clock.now() - start,
        Duration::from_secs(3),
        "three waits of the server's 1 s hint"
    );
    let reasons: Vec<String> = f
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            lock_wasm::events::ClientEvent::Contention { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, ["STORE_UNAVAILABLE"; 3]);
}

/// An outage longer than the budget: the acquire gives up before its deadline with the
/// STORE_UNAVAILABLE error (the service was unavailable, not the key held), and its last
/// wait is cut so that one attempt still comes near the end of the budget.
#[test]
fn an_acquire_gives_up_with_store_unavailable_past_its_budget() {
    let f = Fixture::new();
    let session = f.session();
    for _ in 0..50 {
        f.transport
            .push_acquire(Err(ScriptedTransport::store_unavailable(
                Unavailability::NoQuorum,
                3_000,
            )));
    }
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(5),
        ..PolicySettings::default()
    })
    .unwrap();
    let start = f.clock.now();
    let result = f.run(async move { session.acquire("k", Duration::from_secs(10), &policy).await });
    let took = f.clock.now() - start;
    match result {
        Err(LockError::StoreUnavailable {
            reason,
            retry_after,
        }) => {
            assert_eq!(reason, "no_quorum");
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
        }
        other => panic!("{other:?}"),
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // At 0 s, after the 3 s hint, then once more just before the deadline.
    assert_eq!(f.transport.acquire_calls(), 3);
    assert!(
        took > Duration::from_secs(4),
        "the last attempt came late: {took:?}"
    );
}

#[test]
fn credential_refusals_are_not_retried() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::Forbidden)));
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::Unauthorized)));
    let s = session.clone();
    let first = f.run(async move { s.acquire_default("k").await });
    assert!(
        matches!(first, Err(LockError::Forbidden { .. })),
        "{first:?}"
    );
    let second = f.run(async move { session.acquire_default("k").await });
    assert!(
        matches!(second, Err(LockError::Unauthorized { .. })),
        "{second:?}"
    );
    assert_eq!(f.transport.acquire_calls(), 2, "one L4 each");
}

#[test]
fn validation_and_other_errors_are_not_retried() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::ValidationFailed)));
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::Internal)));
    let s = session.clone();
    let first = f.run(async move { s.acquire_default("k").await });
    assert!(
        matches!(first, Err(LockError::Validation { .. })),
        "{first:?}"
    );
    let second = f.run(async move { session.acquire_default("k").await });
    assert!(matches!(
        second,
        Err(LockError::Unexpected { status: 500, .. })
    ));
    assert_eq!(f.transport.acquire_calls(), 2);
}

#[test]
fn bad_input_is_refused_before_sending() {
    let f = Fixture::new();
    let session = f.session();
    let result = f.run(async move {
        let bad_key = session
            .acquire("a\nb", Duration::from_secs(1), &AcquirePolicy::default())
            .await;
        let bad_ttl = session
            .acquire("k", Duration::from_millis(1), &AcquirePolicy::default())
            .await;
        (bad_key, bad_ttl)
    });
    assert!(matches!(result.0, Err(LockError::Validation { ref field, .. }) if field == "key"));
    assert!(
        matches!(result.1, Err(LockError::Validation { ref field, .. }) if field == "ttlMillis")
    );
    assert_eq!(f.transport.acquire_calls(), 0);
}

#[test]
fn session_not_found_on_acquire_loses_the_session() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
    let s = session.clone();
    let result = f.run(async move { s.acquire_default("k").await });
    assert_eq!(result.unwrap_err(), LockError::SessionLost);
    assert!(session.is_lost());
    assert_eq!(f.client.session_lost_count(), 1);
    let again = f.run(async move { session.acquire_default("k").await });
    assert_eq!(again.unwrap_err(), LockError::SessionLost);
    assert_eq!(
        f.transport.acquire_calls(),
        1,
        "nothing sent after the loss"
    );
}

#[test]
fn an_unanswered_attempt_is_retried_and_a_last_one_is_reported() {
    let f = Fixture::new();
    let session = f.session();
    let timeout = TransportError::Timeout(Duration::from_secs(2));
    f.transport.push_acquire(Err(timeout.clone()));
    f.transport.push_acquire(grant(9));
    let s = session.clone();
    let handle = f
        .run(async move { s.acquire_default("k").await })
        .unwrap()
        .unwrap();
    assert_eq!(handle.fencing_token(), 9);
    let policy = AcquirePolicy::new(PolicySettings {
        max_attempts: 1,
        ..PolicySettings::default()
    })
    .unwrap();
    f.transport.push_acquire(Err(timeout));
    let result = f.run(async move {
        session
            .acquire("other", Duration::from_secs(10), &policy)
            .await
    });
    assert!(matches!(result, Err(LockError::Timeout(_))), "{result:?}");
}

/// The last attempt's hop cut short by the budget and timing out (a slow answer under
/// load) tells nothing new: after a 503 it is NOT_LEADER, after a 409 it is not granted,
/// after another unanswered attempt it is that error. A connection failure on such a hop is reported.
#[test]
fn a_timeout_of_a_hop_the_budget_cut_short_leaves_the_verdict_to_the_attempt_before() {
    let f = Fixture::new();
    let session = f.session();
    // 300 ms budget, far less than the 5 s request timeout: every hop is cut short. Two
    // attempts: a 503, then the one under test.
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(300),
        max_attempts: 2,
        ..PolicySettings::default()
    })
    .unwrap();
    let slow = TransportError::Timeout(Duration::from_millis(200));
    let try_twice = |first: TransportError, second: TransportError| {
        let (s, policy) = (session.clone(), policy);
        f.transport.push_acquire(Err(first));
        f.transport.push_acquire(Err(second));
        f.run(async move { s.acquire("k", Duration::from_secs(10), &policy).await })
    };
    let not_leader = || ScriptedTransport::error(ErrorCode::NotLeader);
    let after_503 = try_twice(not_leader(), slow.clone());
    assert!(
        matches!(after_503, Err(LockError::NotLeader { .. })),
        "{after_503:?}"
    );
    let contended = || ScriptedTransport::error(ErrorCode::LockContended);
    let after_409 = try_twice(contended(), slow.clone());
    assert!(matches!(after_409, Ok(None)), "{after_409:?}");
    let never_answered = try_twice(slow.clone(), slow);
    assert!(
        matches!(never_answered, Err(LockError::Timeout(_))),
        "{never_answered:?}"
    );
    let refused = try_twice(not_leader(), TransportError::Network("refused".into()));
    assert!(matches!(refused, Err(LockError::Network(_))), "{refused:?}");
    assert_eq!(f.transport.acquire_calls(), 8);
}

/// A grant after an unanswered attempt may be the server's idempotent answer to the
/// earlier request, so its deadline conservatively counts from the earlier send (safe
/// even against a server that does not renew on a repeated L4).
#[test]
fn a_grant_after_an_unanswered_attempt_counts_from_the_first_send() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(TransportError::Network("reset".into())));
    f.transport.push_acquire(grant(3));
    let start = f.clock.now();
    let handle = f
        .run(async move { session.acquire_default("k").await })
        .unwrap()
        .unwrap();
    assert!(f.clock.now() > start, "a backoff happened");
    // 10 s TTL, margin 1 s, counted from the first (unanswered) send.
    assert_eq!(handle.deadline(), start + Duration::from_secs(9));
}

#[test]
fn concurrent_acquires_of_one_key_take_turns_in_arrival_order() {
    let f = Fixture::new();
    let session = f.session();
    for token in 1..=5 {
        f.transport.push_acquire(grant(token));
    }
    let tokens = f.run(async move {
        let one = |s: lock_wasm::LockClientSession| async move {
            let handle = s
                .acquire_default("k")
                .await
                .unwrap()
                .expect("granted in turn");
            let token = handle.fencing_token();
            s.release(&handle).await.unwrap();
            token
        };
        futures::future::join_all((0..5).map(|_| one(session.clone()))).await
    });
    assert_eq!(tokens, [1, 2, 3, 4, 5], "in arrival order, one grant each");
    assert_eq!(f.transport.acquire_calls(), 5, "no L4 while a caller waits");
}

/// A caller whose budget ends while it waits for its turn is not granted, having sent
/// nothing; one after it still gets the key.
#[test]
fn a_budget_spent_waiting_for_the_turn_is_not_granted() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(grant(1));
    let s = session.clone();
    let held = f.run(async move { s.acquire_default("k").await.unwrap().unwrap() });
    let short = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(500),
        ..PolicySettings::default()
    })
    .unwrap();
    let s = session.clone();
    let waited = f.run(async move { s.acquire("k", Duration::from_secs(10), &short).await });
    assert!(matches!(waited, Ok(None)), "{waited:?}");
    assert_eq!(f.transport.acquire_calls(), 1);
    f.transport.push_acquire(grant(2));
    let next = f.run(async move {
        session.release(&held).await.unwrap();
        session.acquire_default("k").await
    });
    assert_eq!(next.unwrap().unwrap().fencing_token(), 2);
}

#[test]
fn dropping_an_acquire_mid_flight_frees_the_key() {
    let f = Fixture::new();
    let session = f.session();
    let s = session.clone();
    let mut first = Box::pin(async move { s.acquire_default("k").await });
    assert!(
        (&mut first).now_or_never().is_none(),
        "sleeping after a 409"
    );
    drop(first);
    f.transport.push_acquire(grant(5));
    let handle = f
        .run(async move { session.acquire_default("k").await })
        .unwrap();
    assert_eq!(handle.unwrap().fencing_token(), 5);
}

/// Queued (`waitMillis` > 0): a 409 (the server-side wait ran out) and a lost answer are
/// re-sent at once, keeping the ticket's place; a 429 (queue full) backs off; every L4
/// carries the wait.
#[test]
fn a_queued_acquire_re_sends_at_once_and_backs_off_only_when_the_queue_is_full() {
    let f = Fixture::new();
    let session = f.session();
    let contended = || Err(ScriptedTransport::error(ErrorCode::LockContended));
    f.transport.push_acquire(contended());
    f.transport
        .push_acquire(Err(TransportError::Timeout(Duration::from_secs(2))));
    f.transport.push_acquire(contended());
    f.transport.push_acquire(grant(8));
    let policy = AcquirePolicy::new(PolicySettings {
        wait_millis: 1_000,
        ..PolicySettings::default()
    })
    .unwrap();
    let start = f.clock.now();
    let s = session.clone();
    let handle = f
        .run(async move { s.acquire("k", Duration::from_secs(10), &policy).await })
        .unwrap()
        .expect("granted");
    assert_eq!(handle.fencing_token(), 8);
    assert_eq!(f.clock.now(), start, "no backoff between the re-sends");
    let waits: Vec<Option<u64>> = f
        .transport
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            lock_wasm::transport::Call::Acquire(_, r) => Some(r.wait_millis),
            _ => None,
        })
        .collect();
    assert_eq!(waits, [Some(1_000); 4]);
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::ContentionExceeded)));
    f.transport.push_acquire(grant(9));
    let start = f.clock.now();
    f.run(async move {
        session
            .acquire("other", Duration::from_secs(10), &policy)
            .await
    })
    .unwrap()
    .expect("granted");
    assert!(f.clock.now() > start, "a full queue is backed off from");
}

/// A lost session wakes its waiters at once instead of letting them spin to the budget.
#[test]
fn a_lost_session_fails_waiters_promptly() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(60),
        max_attempts: 1_000,
        ..PolicySettings::default()
    })
    .unwrap();
    let start = f.clock.now();
    let result = f.run(async move { session.acquire("k", Duration::from_secs(10), &policy).await });
    assert_eq!(result.unwrap_err(), LockError::SessionLost);
    // The first heartbeat (5 s) answered 404; the waiter failed right then.
    assert_eq!(f.clock.now() - start, Duration::from_secs(5));
    assert_eq!(f.client.session_lost_count(), 1);
}
