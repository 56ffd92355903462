//! `lockctl watch`: a key's events from a real server as lines, in order, across a server
//! restart (the resume after a restart is a `reset`, never a silent gap), and a key outside
//! the client's scope refused with lockctl's status.

mod lockctl_kit;

use lock_api::{EventKind, WatchEvent};
use lock_e2e::auth_contract::{self, AuthFile, ALPHA, CLIENTS};
use lock_e2e::{ServerOptions, TestServer};
use lockctl_kit::{eventually, start, Dir, REFUSED};

/// The JSON lines `lockctl watch --json` printed so far.
fn events(dir: &Dir, name: &str) -> Vec<WatchEvent> {
    dir.lines(&format!("{name}.out"))
        .iter()
        .map(|line| serde_json::from_str(line).expect("a JSON event line"))
        .collect()
}

async fn until_events(dir: &Dir, name: &str, count: usize) -> Vec<WatchEvent> {
    eventually(&format!("{count} events from lockctl watch"), || {
        let seen = events(dir, name);
        async move { (seen.len() >= count).then_some(seen) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prints_every_change_in_order_and_resets_after_a_restart() {
    // Restarts keep the port: lockctl follows one URL.
    let mut server = TestServer::start(ServerOptions::new().keep_port());
    let api = server.api();
    let dir = Dir::new();
    let mut watch = start(
        &dir,
        "watch",
        &server.base_url(),
        &[],
        &["watch", "jobs/nightly", "--json"],
    );
    let first = until_events(&dir, "watch", 1).await;
    assert_eq!(first[0].kind, EventKind::Snapshot, "{first:?}");

    let session = api.open_session(10_000).await;
    let one = api
        .acquire_ok("jobs/nightly", &session.session_id, 5_000)
        .await;
    api.release("jobs/nightly", one.fencing_token, None).await;
    let two = api
        .acquire_ok("jobs/nightly", &session.session_id, 5_000)
        .await;
    let seen = until_events(&dir, "watch", 4).await;
    let kinds: Vec<_> = seen.iter().map(|e| (e.kind, e.fencing_token)).collect();
    assert_eq!(
        kinds[1..4],
        [
            (EventKind::Granted, Some(one.fencing_token)),
            (EventKind::Released, Some(one.fencing_token)),
            (EventKind::Granted, Some(two.fencing_token)),
        ],
        "{kinds:?}"
    );
    assert!(
        seen.iter().all(|e| !e.id.is_empty()),
        "every event has an id"
    );

    // kill -9 and a restart: the resume id is from the previous start, so the server must
    // answer a reset (with the state now), never continue as if nothing was missed.
    server.kill9();
    server.restart();
    let after = until_events(&dir, "watch", 5).await;
    assert_eq!(after[4].kind, EventKind::Reset, "{after:?}");
    assert!(after[4].state.is_some(), "a reset carries the state");

    watch.signal(libc::SIGINT);
    assert_eq!(watch.code().await, 0, "{}", watch.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_outside_the_clients_scope_is_refused() {
    let file = AuthFile::new(&CLIENTS);
    let server = TestServer::start(auth_contract::options(&file));
    let dir = Dir::new();
    let mut watch = start(
        &dir,
        "outside",
        &server.base_url(),
        &[("LOCK_TOKEN", ALPHA.token)],
        &["watch", "beta/secret", "--count", "1"],
    );
    assert_eq!(watch.code().await, REFUSED, "{}", watch.stderr());
    watch.assert_clear_failure("beta/secret");

    let mut inside = start(
        &dir,
        "inside",
        &server.base_url(),
        &[("LOCK_TOKEN", ALPHA.token)],
        &["watch", "alpha/job", "--count", "1"],
    );
    assert_eq!(inside.code().await, 0, "{}", inside.stderr());
    assert!(
        inside.stdout().starts_with("snapshot"),
        "{}",
        inside.stdout()
    );
}
