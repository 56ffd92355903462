//! L8 events and L9 values (C3, "Watching a key") on etcd: the suite of `lock_e2e::watch` on
//! two lock-server replicas over one etcd member, watching through one and changing through
//! the other; the per-key watcher cap set by flag; and a resume on the replica that did not
//! serve the watch, which gets the same events with the same ids (the epoch is the etcd
//! cluster's, not the process's).

use lock_api::EventKind;
use lock_e2e::contract::unique_key;
use lock_e2e::etcd::EtcdCluster;
use lock_e2e::watch::{self, Pair};
use lock_e2e::TestServer;

fn replica(etcd: &EtcdCluster, prefix: &str, extra: &[&str]) -> TestServer {
    TestServer::start(
        watch::options()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", prefix])
            .args(extra.iter().copied()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_etcd_replicas_serve_the_watch_contract() {
    let etcd = EtcdCluster::single();
    let (a, b) = (
        replica(&etcd, "/watch/", &[]),
        replica(&etcd, "/watch/", &[]),
    );
    watch::run_all(&Pair {
        watch: a.api(),
        change: b.api(),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_per_key_are_capped_on_etcd() {
    let etcd = EtcdCluster::single();
    let server = replica(&etcd, "/cap/", &["--max-watchers-per-key", "2"]);
    watch::watchers_per_key_are_capped(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_on_the_other_replica_gets_the_same_events() {
    let etcd = EtcdCluster::single();
    let (a, b) = (
        replica(&etcd, "/resume/", &[]),
        replica(&etcd, "/resume/", &[]),
    );
    let key = unique_key("etcd resume elsewhere");
    let snapshot = watch::poll(&a.api(), &key, None, 0).await;
    assert_eq!(snapshot.len(), 1);
    let start = snapshot[0].id.clone();

    let api = b.api();
    let s = api.open_session(60_000).await;
    let token = api
        .acquire_ok(&key, &s.session_id, 30_000)
        .await
        .fencing_token;
    let reply = watch::proclaim(&api, &key, &s.session_id, token, "v").await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(api.release(&key, token, None).await.status, 204);

    let mut events = Vec::new();
    while events.len() < 3 {
        let after = events
            .last()
            .map_or(start.clone(), |e: &lock_api::WatchEvent| e.id.clone());
        events.extend(watch::poll(&a.api(), &key, Some(&after), 10_000).await);
    }
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Granted,
            EventKind::Proclaimed,
            EventKind::Released
        ]
    );

    // Replica B never had a feed for the key: it replays from etcd after the first id.
    let mut resumed = Vec::new();
    while resumed.len() < 2 {
        let after = resumed
            .last()
            .map_or(events[0].id.clone(), |e: &lock_api::WatchEvent| {
                e.id.clone()
            });
        resumed.extend(watch::poll(&b.api(), &key, Some(&after), 10_000).await);
    }
    let ids = |list: &[lock_api::WatchEvent]| -> Vec<(String, EventKind, Option<u64>)> {
        list.iter()
            .map(|e| (e.id.clone(), e.kind, e.fencing_token))
            .collect()
    };
    assert_eq!(ids(&resumed), ids(&events[1..]));
}
