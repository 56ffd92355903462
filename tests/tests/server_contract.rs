//! C3 contract suite against the embedded (SQLite) backend.

use lock_e2e::{contract, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_meets_the_http_contract() {
    let server = TestServer::start(contract::options());
    contract::run_all(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_surface_is_disabled_without_a_token() {
    let server = TestServer::start(lock_e2e::ServerOptions::new());
    let api = server.api();
    let reply = api
        .revoke_with_auth("k", "r", Some("Bearer anything"))
        .await;
    reply.assert_error(403, "FORBIDDEN");
}
