//! C3 contract suite against the embedded (SQLite) backend, and the C4 join of a request's
//! `traceparent` to its log lines (`trace_context`, in this binary to spare a link).

#[path = "server_contract/trace_context.rs"]
mod trace_context;

use lock_e2e::heartbeat_versions::{self, Shape};
use lock_e2e::{auth_contract, contract, ServerOptions, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_meets_the_http_contract() {
    let mut server = TestServer::start(contract::options());
    contract::run_all(&server).await;
    heartbeat_versions::run_all(&server).await;
    // The change records are in memory: a version from before a restart names another
    // epoch, so the first L2 after it lists every lock.
    let shape = heartbeat_versions::versions_across_a_restart(&mut server).await;
    assert_eq!(shape, Shape::Full);
    contract::demo_ledgers_survive_a_restart(&mut server).await;
    contract::shutdown_ends_waiters_with_not_leader(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_meets_the_contract_unconfigured() {
    let server = TestServer::start(contract::unconfigured_options());
    contract::run_unconfigured(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_meets_the_auth_contract() {
    let file = auth_contract::AuthFile::new(&auth_contract::CLIENTS);
    let mut server = TestServer::start(auth_contract::options(&file));
    auth_contract::run_all(&server, &file).await;
    auth_contract::holder_ids_survive_a_restart(&mut server).await;
    auth_contract::public_ops(auth_contract::options(&file)).await;
    tokio::task::block_in_place(|| auth_contract::protected_mode(&ServerOptions::new()));
}
