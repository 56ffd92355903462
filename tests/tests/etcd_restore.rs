//! The etcd restore runbook with real processes: a lock-server replica on a one-member etcd,
//! grants, `etcdctl snapshot save`, more grants, etcd stopped and `etcdctl snapshot restore`d
//! into a new data dir, etcd started on it. The replica sees the revision go back and
//! refuses grants (503 NOT_LEADER); `lock-server etcd-restored` raises the token epoch; then
//! every new token of a key, from that replica and from one started after the restore, is
//! above every token granted before, the ones granted after the snapshot included.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lock_e2e::backup::{acquire_once_released, lock_server_cli, log_line};
use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{Api, ServerOptions, TestServer};

const PREFIX: &str = "/restore-test/";
const KEYS: [&str; 2] = ["orders", "payouts/42"];
/// The first token of epoch 1 (2^40).
const EPOCH_ONE: u64 = 1 << 40;

fn replica(etcd: &EtcdCluster) -> TestServer {
    TestServer::start(
        ServerOptions::new()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", PREFIX, "--etcd-timeout-ms", "1000"]),
    )
}

/// `rounds` acquire + release cycles on every key; the highest token per key is kept.
async fn grant_rounds(api: &Api, session_id: &str, rounds: usize, max: &mut HashMap<String, u64>) {
    for _ in 0..rounds {
        for key in KEYS {
            let grant = api.acquire_ok(key, session_id, 10_000).await;
            let seen = max.entry(key.to_string()).or_default();
            assert!(grant.fencing_token > *seen, "tokens rise on {key}");
            *seen = grant.fencing_token;
            assert_eq!(
                api.release(key, grant.fencing_token, None).await.status,
                204
            );
        }
    }
}

/// Opens a session, retried while the replica finds its way back to etcd (bounded).
async fn open_session_when_up(api: &Api) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = api
            .try_json(
                "POST",
                "/v1/sessions",
                &serde_json::json!({"ttlMillis": 60_000}),
            )
            .await;
        match reply {
            Ok(reply) if reply.status == 201 => {
                return reply.body["sessionId"].as_str().unwrap().to_string()
            }
            Ok(reply) if reply.status == 503 => {}
            other => panic!("unexpected answer to L1: {other:?}"),
        }
        assert!(Instant::now() < deadline, "etcd did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn etcd_restored(etcd: &EtcdCluster) -> serde_json::Value {
    let endpoints = etcd.endpoints_arg();
    lock_server_cli([
        "etcd-restored",
        "--etcd-endpoints",
        &endpoints,
        "--etcd-prefix",
        PREFIX,
    ])
    .assert_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_snapshot_never_reissues_a_token() {
    let mut etcd = EtcdCluster::single();
    let first = replica(&etcd);
    let api = first.api();
    let session = api.open_session(60_000).await.session_id;
    let mut before = HashMap::new();
    grant_rounds(&api, &session, 10, &mut before).await;
    // Epoch 0: the tokens are the revisions, as they always were.
    assert!(before.values().all(|t| *t < EPOCH_ONE), "{before:?}");

    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("etcd.snapshot");
    etcd.snapshot_save(0, &snapshot);
    // Grants after the snapshot: their revisions come again after the restore.
    grant_rounds(&api, &session, 15, &mut before).await;

    etcd.restore_snapshot(0, &snapshot);
    // The replica, still running, meets the rewound cluster and refuses grants.
    let session = open_session_when_up(&api).await;
    let refused = api.acquire(KEYS[0], &session, Some(10_000), None).await;
    refused.assert_not_leader();
    assert!(
        refused.text.contains("etcd-restored"),
        "the 503 names the way out: {refused:?}"
    );
    let rewound = log_line(&first, "etcd_rewound").await;
    assert!(!rewound.contains(&session), "no session id in the log line");
    // Still refused: nothing changed yet.
    api.acquire(KEYS[1], &session, Some(10_000), None)
        .await
        .assert_not_leader();

    let raised = etcd_restored(&etcd);
    assert_eq!(
        (raised["before"].as_u64(), raised["epoch"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(raised["firstToken"], EPOCH_ONE);

    // Every new token is above every token granted before, on the replica that saw the
    // rewind and on one started after the restore.
    let second = replica(&etcd);
    let other = second.api();
    let other_session = other.open_session(60_000).await.session_id;
    for key in KEYS {
        let max_before = before[key];
        let grant =
            acquire_once_released(&api, key, &session, 10_000, Duration::from_secs(30), false)
                .await;
        assert!(
            grant.fencing_token > max_before && grant.fencing_token > EPOCH_ONE,
            "{key}: {} after {max_before}",
            grant.fencing_token
        );
        assert_eq!(
            api.release(key, grant.fencing_token, None).await.status,
            204
        );
        let next = acquire_once_released(
            &other,
            key,
            &other_session,
            10_000,
            Duration::from_secs(30),
            false,
        )
        .await;
        assert!(
            next.fencing_token > grant.fencing_token,
            "{key}: the second replica's {} after {}",
            next.fencing_token,
            grant.fencing_token
        );
        assert_eq!(
            other.release(key, next.fencing_token, None).await.status,
            204
        );
    }
    log_line(&first, "etcd_epoch_raised").await;

    // A second run raises it again (e.g. another restore): tokens keep rising.
    assert_eq!(etcd_restored(&etcd)["epoch"], 2);
    let grant = acquire_once_released(
        &other,
        KEYS[0],
        &other_session,
        10_000,
        Duration::from_secs(30),
        false,
    )
    .await;
    assert!(
        grant.fencing_token > 2 * EPOCH_ONE,
        "{}",
        grant.fencing_token
    );
    // The replica that granted in epoch 1 follows the stored epoch (its compare fails once).
    other.release(KEYS[0], grant.fencing_token, None).await;
    let from_first = acquire_once_released(
        &api,
        KEYS[0],
        &session,
        10_000,
        Duration::from_secs(30),
        false,
    )
    .await;
    assert!(from_first.fencing_token > grant.fencing_token);
}

#[test]
fn etcd_restored_without_etcd_fails_cleanly() {
    let run = lock_server_cli([
        "etcd-restored",
        "--etcd-endpoints",
        "http://127.0.0.1:1",
        "--etcd-timeout-ms",
        "300",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("lock-server etcd-restored:"), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}
