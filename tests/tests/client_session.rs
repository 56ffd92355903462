//! The SDK's session handling against a real lock-server: a session the server forgot is
//! noticed by the next heartbeat (handles lost, `lock_session_lost` counted, waiters failed
//! at once), and a lock whose key the heartbeat no longer lists is lost at once.
//!
//! Waiting for a heartbeat is done by polling with a generous bound; nothing asserts speed.
//!
//! With an auth file: the `token` option is sent as the bearer, 401 and 403 surface as
//! `LockError::Unauthorized` / `Forbidden` after exactly one request (never retried), and a
//! session's `holder_id()` is what L7 shows.

use std::time::Duration;

use lock_e2e::auth_contract::{self, AuthFile, ALPHA, CLIENTS, OPS};
use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, ClientConfig, LockClient, LockError, PolicySettings};

fn client(server: &TestServer) -> LockClient {
    LockClient::native(server.base_url()).with_config(ClientConfig {
        // Heartbeats every ~500 ms (the server's TTL/3), so the tests notice things quickly.
        session_ttl: Some(Duration::from_millis(1_500)),
        backend: "sqlite".into(),
        ..ClientConfig::default()
    })
}

/// Polls `cond` every 20 ms for up to 30 s.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1_500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_server_forgot_is_lost_and_fails_its_waiter() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let client = client(&server);
    let holder = client.open_session().await.unwrap();
    let waiter = client.open_session().await.unwrap();
    let held = holder
        .acquire_default("k")
        .await
        .unwrap()
        .expect("free key");

    // The waiter contends with a long budget; then the server forgets its session.
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(60),
        max_attempts: 10_000,
        ..PolicySettings::default()
    })
    .unwrap();
    let w = waiter.clone();
    let pending =
        tokio::spawn(async move { w.acquire("k", Duration::from_secs(10), &policy).await });
    lock_e2e::client::remember_session(waiter.id(), waiter.holder_id());
    assert_eq!(api.close_session(waiter.id()).await.status, 204);

    let outcome = tokio::time::timeout(Duration::from_secs(30), pending)
        .await
        .expect("the waiter fails at the next heartbeat, not at its 60 s budget")
        .unwrap();
    assert_eq!(outcome.unwrap_err(), LockError::SessionLost);
    assert!(waiter.is_lost());
    assert_eq!(client.session_lost_count(), 1);
    assert!(!held.is_lost(), "the other session is unaffected");
    holder.release(&held).await.unwrap();
    holder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_missing_from_the_heartbeat_is_lost_at_once() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let client = client(&server);
    let session = client.open_session().await.unwrap();
    let handle = session
        .acquire("k", Duration::from_secs(30), &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("free key");
    // Someone releases our lock behind our back (L6 is compare-and-delete on key + token).
    let reply = api.release("k", handle.fencing_token(), None).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    eventually("the next heartbeat marks the handle lost", || {
        handle.is_lost()
    })
    .await;
    assert!(handle.remaining() == Duration::ZERO);
    assert!(!session.is_lost(), "only the lock is gone, not the session");
    // Nesting into the lost handle fails without a request; another caller of the session
    // waits for the lost hold's release (here its budget runs out first).
    assert_eq!(
        handle.nest().unwrap_err(),
        LockError::LockLost { key: "k".into() }
    );
    let short = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(300),
        ..PolicySettings::default()
    })
    .unwrap();
    let waited = session.acquire("k", Duration::from_secs(30), &short).await;
    assert!(matches!(waited, Ok(None)), "{waited:?}");
    session.release(&handle).await.unwrap(); // LOCK_LOST from the server is benign
    let fresh = session
        .acquire_default("k")
        .await
        .unwrap()
        .expect("free again");
    assert!(fresh.fencing_token() > handle.fencing_token());
    session.close().await.unwrap();
}

/// `lock_acquire_total{outcome}` as the server counts it (read with the admin client).
async fn acquires(server: &TestServer, outcome: &str) -> u64 {
    let text = server.api().with_token(OPS.token).metrics().await;
    let prefix = format!("lock_acquire_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_option_authenticates_and_refusals_are_not_retried() {
    let file = AuthFile::new(&CLIENTS);
    let server = TestServer::start(auth_contract::options(&file));
    let client = LockClient::native_with_token(server.base_url(), ALPHA.token).unwrap();

    let session = client.open_session().await.expect("L1 with the token");
    let handle = session
        .acquire_default("alpha/sdk")
        .await
        .unwrap()
        .expect("a free key in scope");
    let alpha = server.api().with_token(ALPHA.token);
    let holder = alpha.lock_state("alpha/sdk").await.holder.expect("held");
    assert_eq!(holder.holder_id, session.holder_id());
    assert_ne!(session.holder_id(), session.id());
    assert_eq!(holder.fencing_token, handle.fencing_token());

    // Out of scope: one L4, answered 403, not retried whatever the policy allows.
    let before = acquires(&server, "forbidden").await;
    let refused = session.acquire_default("beta/sdk").await;
    assert!(
        matches!(refused, Err(LockError::Forbidden { .. })),
        "{refused:?}"
    );
    assert_eq!(acquires(&server, "forbidden").await, before + 1, "one L4");

    session.release(&handle).await.unwrap();
    session.close().await.unwrap();

    // No token, an unknown one: 401 on L1.
    for client in [
        LockClient::native(server.base_url()),
        LockClient::native_with_token(server.base_url(), "not-a-client").unwrap(),
    ] {
        let refused = client.open_session().await;
        assert!(
            matches!(refused, Err(LockError::Unauthorized { .. })),
            "{:?}",
            refused.err()
        );
    }
    // A token no header can carry is refused before anything is sent.
    let bad = LockClient::native_with_token(server.base_url(), "two words");
    assert!(
        matches!(bad, Err(LockError::Validation { ref field, .. }) if field == "token"),
        "{:?}",
        bad.err()
    );
}
