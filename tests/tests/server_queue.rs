//! The wait queue (C3) against the embedded (SQLite) backend.

use lock_e2e::{queue, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_serves_the_queue_in_order() {
    let server = TestServer::start(queue::options());
    queue::run_all(&[server.api()]).await;
}
