//! The SDK the way a service uses it, against a real lock-server: one long-lived session
//! shared by many concurrent tasks (every request handler of a service), on one key.
//!
//! Each task must run alone under a token of its own, strictly greater than the one before
//! it, and none may be refused while its budget lasts; the fenced demo ledger accepts every
//! write. Then the client's own session: lost when the server forgets it, replaced on the
//! next call. Real time only orders events here; nothing asserts on speed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, LockClient};

const TASKS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_of_one_session_take_turns_with_tokens_of_their_own() {
    let server = TestServer::start(ServerOptions::new());
    let client = LockClient::native(server.base_url());
    let session = client.open_session().await.expect("L1");
    let key = "payments/p4";
    // (token, "start" | "end") in the order the tasks ran.
    let trace = Arc::new(Mutex::new(Vec::<(u64, &str)>::new()));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (session, trace, api) = (session.clone(), trace.clone(), server.api());
        tasks.push(tokio::spawn(async move {
            let ttl = Duration::from_secs(5);
            let handle = session
                .acquire(key, ttl, &AcquirePolicy::default())
                .await
                .expect("no error")
                .expect("granted within the budget");
            let token = handle.fencing_token();
            trace.lock().unwrap().push((token, "start"));
            let write = api.ledger_append(key, token, &format!("task {i}")).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            trace.lock().unwrap().push((token, "end"));
            session.release(&handle).await.expect("L6");
            write.status
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 204, "every fenced write is accepted");
    }
    let trace = trace.lock().unwrap().clone();
    assert_eq!(trace.len(), 2 * TASKS);
    for (i, pair) in trace.chunks(2).enumerate() {
        assert_eq!(pair[0].1, "start", "task {i} ran alone: {trace:?}");
        assert_eq!(pair[1], (pair[0].0, "end"), "task {i} ran alone: {trace:?}");
    }
    let tokens: Vec<u64> = trace.chunks(2).map(|pair| pair[0].0).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "each task's token is greater than the one before: {tokens:?}"
    );
    let entries = server.api().ledger_read(key).await;
    assert_eq!(entries.entries.len(), TASKS, "{entries:?}");
    session.close().await.expect("L3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_own_session_is_replaced_after_the_server_forgot_it() {
    let server = TestServer::start(ServerOptions::new());
    let client = LockClient::native(server.base_url());
    let first = client.session().await.expect("opened on first use");
    let api = server.api();
    // The server forgets the session (L3 behind the SDK's back, as an expiry would).
    lock_e2e::client::remember_session(first.id(), first.holder_id());
    assert_eq!(api.close_session(first.id()).await.status, 204);
    let policy = AcquirePolicy::default();
    let ttl = Duration::from_secs(5);
    let refused = first.acquire("jobs/nightly", ttl, &policy).await;
    assert_eq!(refused.unwrap_err(), lock_wasm::LockError::SessionLost);
    let second = client.session().await.expect("a new session");
    assert_ne!(second.holder_id(), first.holder_id());
    let handle = second.acquire("jobs/nightly", ttl, &policy).await.unwrap();
    assert!(handle.is_some(), "the new session acquires");
    client.close().await.expect("L3");
}
