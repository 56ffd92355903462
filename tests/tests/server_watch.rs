//! L8 events and L9 values (C3, "Watching a key") against the embedded (SQLite) backend:
//! the suite of `lock_e2e::watch` with one server as both endpoints, and the checks that
//! need a process of their own.

use std::sync::Arc;

use lock_e2e::auth_contract::{self, AuthFile, ALPHA};
use lock_e2e::tls::TestPki;
use lock_e2e::watch::{self, Pair};
use lock_e2e::{TestServer, Tls};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_serves_the_watch_contract() {
    let server = TestServer::start(watch::options());
    let api = server.api();
    watch::run_all(&Pair {
        watch: api.clone(),
        change: api,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_from_before_a_kill9_restart_is_a_reset() {
    let mut server = TestServer::start(watch::options());
    watch::a_restart_resets_every_resume(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_per_key_are_capped() {
    let server = TestServer::start(watch::options().args(["--max-watchers-per-key", "2"]));
    watch::watchers_per_key_are_capped(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_per_connection_are_capped_on_http2() {
    let options = watch::options()
        .tls(Tls::Pki(Arc::new(TestPki::new())))
        .args(["--max-streams-per-connection", "2"]);
    let server = TestServer::start(options);
    watch::streams_per_connection_are_capped_on_http2(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_gets_a_reset_and_the_end() {
    let server = TestServer::start(watch::options().args(["--watch-buffer-events", "8"]));
    watch::a_slow_consumer_gets_a_reset_and_the_end(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_streams_and_polls() {
    let mut server = TestServer::start(watch::options());
    watch::shutdown_ends_streams_and_polls(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_proclaim_need_auth_and_scope() {
    let file = AuthFile::new(&[ALPHA]);
    let server = TestServer::start(auth_contract::options(&file));
    watch::watch_and_proclaim_need_a_token_and_a_key_in_scope(
        &server,
        ALPHA.token,
        "alpha/watched",
        "beta/watched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_of_configured_origins_may_watch() {
    let server = TestServer::start(
        watch::options().args(["--cors-origin", lock_e2e::contract::CORS_ORIGIN]),
    );
    watch::watch_is_open_to_configured_origins_only(&server).await;
}
