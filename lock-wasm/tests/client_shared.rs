//! Shared holds through the public API (C2 ct2-shared), on a scripted server and simulated
//! time: what goes on the wire in each mode, what is refused before anything is sent,
//! nesting across modes, the two shared-hold refusals that end an acquire at once, the
//! semaphore helper, and turns per key in both modes.
#![cfg(not(target_arch = "wasm32"))]
// the fixture runs on the native simulated executor
// Scripted answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

use std::time::Duration;

use futures::FutureExt;
use lock_api::{ErrorBody, ErrorCode, LockGrant};
use lock_wasm::error::TransportError;
use lock_wasm::test_support::Fixture;
use lock_wasm::transport::{Call, ScriptedTransport};
use lock_wasm::{AcquirePolicy, HoldKind, LockError, LockMode};

const TTL: Duration = Duration::from_secs(10);

fn exclusive(token: u64) -> Result<LockGrant, TransportError> {
    Ok(ScriptedTransport::grant("k", "s1", token, 10_000))
}

fn shared(token: u64, limit: Option<u32>) -> Result<LockGrant, TransportError> {
    Ok(LockGrant {
        mode: LockMode::Shared,
        limit,
        ..ScriptedTransport::grant("k", "s1", token, 10_000)
    })
}

/// The L4 bodies sent so far, as JSON (serde's: what the native HTTP transport sends; the wasm
/// transport's body is checked against serde's in `src/wasm/transport.rs`).
fn l4_bodies(f: &Fixture) -> Vec<String> {
    f.transport
        .calls()
        .into_iter()
        .filter_map(|call| match call {
            Call::Acquire(_, body) => Some(serde_json::to_string(&body).unwrap()),
            _ => None,
        })
        .collect()
}

/// C2 ct2-pinned, *Exclusive body unchanged*: an exclusive acquire's L4 body is byte for byte what
/// it was before shared holds; a read lock's carries `"mode":"shared"` and no limit; a semaphore's
/// carries its permits as the limit. Each handle reports the mode and limit it was granted.
#[test]
fn each_mode_puts_its_own_body_on_the_wire() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    f.transport.push_acquire(exclusive(1));
    f.transport.push_acquire(shared(2, None));
    f.transport.push_acquire(shared(3, Some(2)));
    let s = session.clone();
    let (writer, reader, permit) = f.run(async move {
        let writer = s.acquire("k", TTL, &policy).await.unwrap().unwrap();
        s.release(&writer).await.unwrap();
        let reader = s.read("k", TTL, &policy).await.unwrap().unwrap();
        s.release(&reader).await.unwrap();
        let permit = s.semaphore("k", 2).acquire(TTL, &policy).await.unwrap();
        (writer, reader, permit.unwrap())
    });
    assert_eq!(
        l4_bodies(&f),
        [
            r#"{"sessionId":"s1","ttlMillis":10000,"waitMillis":0}"#,
            r#"{"sessionId":"s1","ttlMillis":10000,"waitMillis":0,"mode":"shared"}"#,
            r#"{"sessionId":"s1","ttlMillis":10000,"waitMillis":0,"mode":"shared","limit":2}"#,
        ]
    );
    assert_eq!((writer.mode(), writer.limit()), (LockMode::Exclusive, None));
    assert_eq!((reader.mode(), reader.limit()), (LockMode::Shared, None));
    assert_eq!((permit.mode(), permit.limit()), (LockMode::Shared, Some(2)));
    assert_eq!(
        [writer, reader, permit].map(|h| h.fencing_token()),
        [1, 2, 3],
        "every grant, shared or not, has a token of its own"
    );
}

/// C2 ct2-pinned, *Exclusive body unchanged*: `write` is `acquire`; `acquire_hold` with
/// `HoldKind::Exclusive` too: one body for all.
#[test]
fn write_and_an_exclusive_hold_send_the_exclusive_body() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    f.transport.push_acquire(exclusive(1));
    f.transport.push_acquire(exclusive(2));
    f.run(async move {
        let w = session.write("k", TTL, &policy).await.unwrap().unwrap();
        session.release(&w).await.unwrap();
        let hold = HoldKind::Exclusive;
        let e = session.acquire_hold("k", hold, TTL, &policy).await;
        session.release(&e.unwrap().unwrap()).await.unwrap();
    });
    let bodies = l4_bodies(&f);
    assert_eq!(bodies.len(), 2);
    for body in bodies {
        assert_eq!(
            body,
            r#"{"sessionId":"s1","ttlMillis":10000,"waitMillis":0}"#
        );
    }
}

/// C2 ct2-pinned, *Limits checked first*: a limit outside 1…10,000 is refused as `Validation` on
/// `limit` before any request, on `acquire_hold` and through the semaphore alike.
#[test]
fn a_limit_out_of_range_is_refused_before_anything_is_sent() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    let results = f.run(async move {
        let mut results = Vec::new();
        for limit in [0, 10_001] {
            let hold = HoldKind::Shared { limit: Some(limit) };
            results.push(session.acquire_hold("k", hold, TTL, &policy).await);
            results.push(session.semaphore("k", limit).acquire(TTL, &policy).await);
        }
        results
    });
    for result in results {
        match result {
            Err(LockError::Validation { field, message }) => {
                assert_eq!(field, "limit");
                assert!(message.contains("10000"), "{message}");
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
    assert_eq!(f.transport.acquire_calls(), 0, "nothing was sent");
}

/// C2 ct2-pinned, *No upgrade*: an exclusive nest under a shared handle is refused with
/// `UpgradeNotAllowed` (not retryable) and sends nothing; the shared hold is untouched and releases
/// with one L6.
#[test]
fn an_upgrade_by_nesting_is_refused_without_a_request() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    f.transport.push_acquire(shared(4, None));
    let s = session.clone();
    let reader = f.run(async move { s.read("k", TTL, &policy).await.unwrap().unwrap() });
    let calls = f.transport.calls().len();
    let err = reader.nest_exclusive().unwrap_err();
    assert_eq!(err, LockError::UpgradeNotAllowed { key: "k".into() });
    assert_eq!(err.code(), "UPGRADE_NOT_ALLOWED");
    assert!(!err.retryable());
    assert_eq!(
        reader.nest_as(LockMode::Exclusive).unwrap_err(),
        err,
        "the general form refuses alike"
    );
    let inner = reader
        .nest()
        .expect("a shared nest in the handle's own mode");
    assert_eq!(f.transport.calls().len(), calls, "nothing was sent");
    f.run(async move {
        session.release(&inner).await.unwrap();
        assert!(!reader.is_lost(), "the outer hold stands");
        session.release(&reader).await.unwrap();
    });
    assert_eq!(f.transport.release_calls(), 1);
}

/// C2 ct2-pinned, *No upgrade*: a shared hold nested under an exclusive one is the same handle and
/// token, and sends nothing; the lock goes with the outermost release.
#[test]
fn a_shared_nest_under_an_exclusive_hold_is_the_same_grant() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    f.transport.push_acquire(exclusive(9));
    let s = session.clone();
    let writer = f.run(async move { s.write("k", TTL, &policy).await.unwrap().unwrap() });
    let reader = writer.nest_shared().unwrap();
    assert!(reader.same_grant(&writer));
    assert_eq!(reader.fencing_token(), 9);
    assert_eq!(reader.mode(), LockMode::Exclusive);
    assert_eq!(f.transport.acquire_calls(), 1);
    let s = session.clone();
    f.run(async move { s.release(&reader).await.unwrap() });
    assert_eq!(f.transport.release_calls(), 0, "the outer hold stands");
    assert!(!writer.is_lost());
    f.run(async move { session.release(&writer).await.unwrap() });
    assert_eq!(f.transport.release_calls(), 1);
}

/// C2 ct2-pinned, *Shared refusals are final*: 409 LIMIT_MISMATCH ends the acquire at once, never
/// retried, with the limit in force.
#[test]
fn a_limit_mismatch_ends_the_acquire_at_once_with_the_limit_in_force() {
    let f = Fixture::new();
    let session = f.session();
    let mut body = ErrorBody::new(ErrorCode::LimitMismatch, "the key's limit is 5");
    body.limit = Some(5);
    f.transport
        .push_acquire(Err(TransportError::Status { status: 409, body }));
    f.transport.push_acquire(shared(1, Some(3)));
    let policy = AcquirePolicy::default();
    let result = f.run(async move { session.semaphore("k", 3).acquire(TTL, &policy).await });
    let err = result.unwrap_err();
    assert_eq!(
        err,
        LockError::LimitMismatch {
            key: "k".into(),
            limit: Some(5)
        }
    );
    assert_eq!(err.code(), "LIMIT_MISMATCH");
    assert!(!err.retryable());
    assert_eq!(f.transport.acquire_calls(), 1, "not retried");
    assert!(!f.event_names().contains(&"contention"));
}

/// C2 ct2-pinned, *Shared refusals are final*: 409 UPGRADE_NOT_ALLOWED (an exclusive L4 by a
/// session the server sees holding the key shared) ends the acquire at once, never retried.
#[test]
fn an_upgrade_refused_by_the_server_ends_the_acquire_at_once() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::UpgradeNotAllowed)));
    f.transport.push_acquire(exclusive(2));
    let policy = AcquirePolicy::default();
    let result = f.run(async move { session.write("k", TTL, &policy).await });
    assert_eq!(
        result.unwrap_err(),
        LockError::UpgradeNotAllowed { key: "k".into() }
    );
    assert_eq!(f.transport.acquire_calls(), 1, "not retried");
}

/// The server answers a shared L4 by the key's exclusive holder with the exclusive grant: the
/// handle says so.
#[test]
fn a_shared_acquire_answered_with_an_exclusive_grant_is_an_exclusive_handle() {
    let f = Fixture::new();
    let session = f.session();
    f.transport.push_acquire(exclusive(6));
    let policy = AcquirePolicy::default();
    let s = session.clone();
    let h = f.run(async move { s.read("k", TTL, &policy).await.unwrap().unwrap() });
    assert_eq!(h.mode(), LockMode::Exclusive);
    assert!(
        h.nest_exclusive().is_ok(),
        "an exclusive handle nests either way"
    );
}

/// C2 ct2-pinned, *Readers take turns too*: two readers of one session take turns on the key, as
/// writers do: the second sends nothing until the first's release was answered, then gets a token
/// of its own.
#[test]
fn readers_of_one_session_take_turns_and_each_gets_its_own_token() {
    let f = Fixture::new();
    let session = f.session();
    let policy = AcquirePolicy::default();
    f.transport.push_acquire(shared(1, None));
    let (s, p) = (session.clone(), policy);
    let first = f.run(async move { s.read("k", TTL, &p).await.unwrap().unwrap() });
    let (s, p) = (session.clone(), policy);
    let mut second = Box::pin(async move { s.read("k", TTL, &p).await });
    assert!((&mut second).now_or_never().is_none(), "waits its turn");
    assert_eq!(f.transport.acquire_calls(), 1, "no L4 while it waits");
    f.transport.push_acquire(shared(2, None));
    let (released, second) = f.run(async move {
        let released = session.release(&first).await;
        (released, second.await)
    });
    released.unwrap();
    let second = second.unwrap().expect("granted after the release");
    assert_eq!(second.fencing_token(), 2);
    assert_eq!(second.mode(), LockMode::Shared);
    assert_eq!(f.transport.acquire_calls(), 2);
}

/// `LockClient::semaphore` takes its permits on the client's own session (one L1 for both), and
/// `Semaphore::release` gives a permit back through it.
#[test]
fn the_clients_semaphore_uses_its_own_session() {
    let f = Fixture::new();
    f.transport.push_acquire(shared(1, Some(2)));
    let client = f.client.clone();
    let policy = AcquirePolicy::default();
    let (permit, semaphore) = f.run(async move {
        let semaphore = client.semaphore("k", 2);
        let permit = semaphore.acquire(TTL, &policy).await.unwrap().unwrap();
        let own = client.session().await.unwrap();
        assert_eq!(permit.session_id(), own.id());
        (permit, semaphore)
    });
    assert_eq!(semaphore.key(), "k");
    assert_eq!(semaphore.permits(), 2);
    assert_eq!(permit.limit(), Some(2));
    f.run(async move { semaphore.release(&permit).await.unwrap() });
    assert_eq!(f.transport.release_calls(), 1);
    let opens = f
        .transport
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::OpenSession(_)))
        .count();
    assert_eq!(opens, 1);
}
