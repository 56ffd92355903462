//! The full HTTP contract suite (C3) against the etcd backend: the same functions the SQLite
//! backend runs (`lock_e2e::contract`), on a real lock-server over a real etcd member.

use lock_e2e::etcd::EtcdCluster;
use lock_e2e::heartbeat_versions::{self, Shape};
use lock_e2e::{auth_contract, contract, ServerOptions, TestServer};

fn on_etcd(options: ServerOptions, etcd: &EtcdCluster, prefix: &str) -> ServerOptions {
    options
        .args(["--backend", "etcd", "--etcd-endpoints"])
        .args([etcd.endpoints_arg()])
        .args(["--etcd-prefix", prefix])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_suite_passes_on_etcd() {
    let etcd = EtcdCluster::single();
    let mut server = TestServer::start(on_etcd(contract::options(), &etcd, "/contract/"));
    contract::run_all(&server).await;
    heartbeat_versions::run_all(&server).await;
    // Versions are digests of the holds, the same after a restart: holds that did not change
    // are "unchanged", exactly.
    let shape = heartbeat_versions::versions_across_a_restart(&mut server).await;
    assert_eq!(shape, Shape::Unchanged);
    contract::demo_ledgers_survive_a_restart(&mut server).await;
    contract::shutdown_ends_waiters_with_not_leader(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_suite_passes_on_etcd_unconfigured() {
    let etcd = EtcdCluster::single();
    let options = on_etcd(contract::unconfigured_options(), &etcd, "/unconfigured/");
    let server = TestServer::start(options);
    contract::run_unconfigured(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_contract_passes_on_etcd() {
    let etcd = EtcdCluster::single();
    let file = auth_contract::AuthFile::new(&auth_contract::CLIENTS);
    let options = on_etcd(auth_contract::options(&file), &etcd, "/auth/");
    let mut server = TestServer::start(options.clone());
    auth_contract::run_all(&server, &file).await;
    auth_contract::holder_ids_survive_a_restart(&mut server).await;
    auth_contract::public_ops(options).await;
    let backend = on_etcd(ServerOptions::new(), &etcd, "/auth-protected/");
    tokio::task::block_in_place(|| auth_contract::protected_mode(&backend));
}
