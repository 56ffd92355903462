//! The full HTTP contract suite (C3) against the etcd backend: the same functions the SQLite
//! backend runs (`lock_e2e::contract`), on a real lock-server over a real etcd member.

use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{contract, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_suite_passes_on_etcd() {
    let etcd = EtcdCluster::single();
    let server = TestServer::start(
        contract::options()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", "/contract/"]),
    );
    contract::run_all(&server).await;
}
