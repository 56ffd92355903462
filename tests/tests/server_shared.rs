//! Shared holds (C3, "Shared holds") against the embedded (SQLite) backend.

use lock_e2e::{shared_holds, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_serves_shared_holds() {
    let server = TestServer::start(shared_holds::options());
    shared_holds::run_all(&[server.api()]).await;
}
