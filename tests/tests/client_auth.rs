//! The native SDK against a real lock-server with an auth file: the `token` option is sent as
//! the bearer, 401 and 403 surface as `LockError::Unauthorized` / `Forbidden` after exactly
//! one request (never retried), and a session's `holder_id()` is what L7 shows.

use lock_e2e::auth_contract::{self, AuthFile, ALPHA, CLIENTS, OPS};
use lock_e2e::TestServer;
use lock_wasm::{LockClient, LockError};

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
