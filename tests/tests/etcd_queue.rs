//! The wait queue (C3) on etcd: two lock-server replicas over one etcd member, waiters spread
//! over both, so order, hand-off, `waiterCount` and the cap are checked across replicas.

use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{queue, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_etcd_replicas_serve_one_queue_in_order() {
    let etcd = EtcdCluster::single();
    let replica = || {
        TestServer::start(
            queue::options()
                .args(["--backend", "etcd", "--etcd-endpoints"])
                .args([etcd.endpoints_arg()])
                .args(["--etcd-prefix", "/queue/"]),
        )
    };
    let (a, b) = (replica(), replica());
    queue::run_all(&[a.api(), b.api()]).await;
}
