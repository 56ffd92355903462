//! `lock-server backup` and `restore` on the embedded store, as an operator runs them: a
//! backup taken while clients acquire and release, more grants after it, the server killed,
//! the backup restored into a fresh data dir; the restored server issues every key tokens
//! above every token granted before, the backup's data included, and the commands refuse a
//! running server's dir, a non-empty dir without `--force`, and files that are no backup.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::paths;
use lock_api::LockGrant;
use lock_e2e::backup::{acquire_once_released, lock_server_cli, lock_server_cli_async, log_line};
use lock_e2e::{temp_data_dir, Api, ServerOptions, TestServer};
use serde_json::json;

const KEYS: usize = 3;
const WORKERS: usize = 4;
/// The first token of epoch 1 (2^40): where a restore of an epoch-0 store starts.
const EPOCH_ONE: u64 = 1 << 40;

/// Every token granted per key, and how many grants in all.
#[derive(Default)]
struct Granted {
    max_token: HashMap<String, u64>,
    grants: usize,
}

/// Acquire and release on the load keys until `stop`, recording every grant.
async fn worker(n: usize, api: Api, stop: Arc<AtomicBool>, granted: Arc<Mutex<Granted>>) {
    let session = api.open_session(120_000).await.session_id;
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let key = format!("load-{}", (n + round) % KEYS);
        let body = json!({"sessionId": session, "ttlMillis": 5_000});
        let Ok(reply) = api.try_json("POST", &paths::acquire(&key), &body).await else {
            continue;
        };
        if reply.status != 200 {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let grant: LockGrant = reply.parse();
        {
            let mut granted = granted.lock().unwrap();
            granted.grants += 1;
            let max = granted.max_token.entry(key.clone()).or_default();
            *max = (*max).max(grant.fencing_token);
        }
        let release = json!({"fencingToken": grant.fencing_token});
        let _ = api.try_json("POST", &paths::release(&key), &release).await;
    }
}

/// Waits until the workers made `more` grants beyond now (grants, not time: no speed
/// assumption).
async fn more_grants(granted: &Mutex<Granted>, more: usize) {
    let wanted = granted.lock().unwrap().grants + more;
    let deadline = Instant::now() + Duration::from_secs(60);
    while granted.lock().unwrap().grants < wanted {
        assert!(Instant::now() < deadline, "the server stopped granting");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn path_str(path: &Path) -> String {
    path.to_str().expect("UTF-8 temp path").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_backup_never_reissues_a_token() {
    let mut server = TestServer::start(ServerOptions::new());
    let api = server.api();
    // Written before the backup: must be in the restored store.
    let writer = api.open_session(60_000).await;
    let marked = api.acquire_ok("marked", &writer.session_id, 10_000).await;
    assert_eq!(
        api.ledger_append("marked", marked.fencing_token, "before-backup")
            .await
            .status,
        204
    );
    api.release("marked", marked.fencing_token, None).await;

    let stop = Arc::new(AtomicBool::new(false));
    let granted = Arc::new(Mutex::new(Granted::default()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|n| tokio::spawn(worker(n, server.api(), stop.clone(), granted.clone())))
        .collect();
    more_grants(&granted, 50).await;

    // The backup, while the workers acquire and release.
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("lock.backup");
    let backup = lock_server_cli_async(vec![
        "backup".into(),
        "--data-dir".into(),
        path_str(server.data_dir()),
        "--to".into(),
        path_str(&file),
    ])
    .await
    .assert_ok();
    assert_eq!(backup["online"], true, "{backup}");
    let backup_mark = backup["reservedUpto"].as_u64().unwrap();
    assert!(
        granted
            .lock()
            .unwrap()
            .max_token
            .values()
            .all(|t| *t <= backup_mark),
        "every token granted before the backup is at or below its mark"
    );
    log_line(&server, "backup_taken").await;

    // The server keeps granting after the backup.
    more_grants(&granted, 100).await;
    // A restore into the running server's dir is refused, whatever the flags.
    refuse_restore_into(&server, &file);
    more_grants(&granted, 20).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let before: HashMap<String, u64> = granted.lock().unwrap().max_token.clone();
    assert_eq!(before.len(), KEYS);
    server.kill9();

    // The stopped dir is not empty: no restore into it without --force.
    lock_server_cli([
        "restore",
        "--from",
        &path_str(&file),
        "--data-dir",
        &path_str(server.data_dir()),
    ])
    .assert_refused("is not empty");

    // Files that are no whole backup are refused, and leave the target untouched.
    let whole = std::fs::read(&file).unwrap();
    let bad = [
        ("garbage", b"this is not a database ".repeat(100)),
        ("torn", whole[..whole.len() / 2].to_vec()),
    ];
    for (name, bytes) in bad {
        let path = out.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let target = temp_data_dir();
        lock_server_cli([
            "restore",
            "--from",
            &path_str(&path),
            "--data-dir",
            &path_str(target.path()),
        ])
        .assert_refused("is not a usable lock-server backup");
        assert!(!target.path().join("lock.db").exists(), "{name}");
        assert!(!target.path().join("fencing.json").exists(), "{name}");
    }

    // The restore into a fresh data dir, and a server on it.
    let fresh = temp_data_dir();
    let restored = lock_server_cli([
        "restore",
        "--from",
        &path_str(&file),
        "--data-dir",
        &path_str(fresh.path()),
    ])
    .assert_ok();
    assert_eq!(restored["backupReservedUpto"], backup_mark);
    assert_eq!(restored["firstToken"], EPOCH_ONE);
    // A small hold-back: the restored start is treated as after a crash across a reboot.
    let options = ServerOptions::new().args(["--unclean-holdback-ms", "1500"]);
    let server = TestServer::start_in(options, fresh);
    let opened = log_line(&server, "store_opened").await;
    assert!(opened.contains(r#""rebooted":true"#), "{opened}");
    assert!(!opened.contains(r#""holdback_until_millis":0"#), "{opened}");

    let api = server.api();
    // The backup's data is there.
    let entries = api.ledger_read("marked").await;
    assert_eq!(entries.entries.len(), 1, "{entries:?}");
    assert_eq!(entries.entries[0].entry, "before-backup");
    // Every new token of every key is above every token granted before, the ones granted
    // after the backup included.
    let probe = api.open_session(60_000).await;
    for (key, max_before) in &before {
        let grant = acquire_once_released(
            &api,
            key,
            &probe.session_id,
            5_000,
            Duration::from_secs(60),
            true,
        )
        .await;
        assert!(
            grant.fencing_token > *max_before && grant.fencing_token >= EPOCH_ONE,
            "{key}: token {} after {max_before}",
            grant.fencing_token
        );
        // The ledger, fenced by the old tokens, takes the new ones.
        let reply = api.ledger_append(key, grant.fencing_token, "after").await;
        assert_eq!(reply.status, 204, "{reply:?}");
    }
    // A second restore into this running server's dir is refused.
    refuse_restore_into(&server, &file);
}

/// A restore into a running server's data dir is refused, whatever the flags.
fn refuse_restore_into(server: &TestServer, file: &Path) {
    lock_server_cli([
        "restore",
        "--from",
        &path_str(file),
        "--data-dir",
        &path_str(server.data_dir()),
        "--force",
    ])
    .assert_refused("a lock-server is running on");
}

#[tokio::test]
async fn a_stopped_dir_is_backed_up_offline_above_every_token() {
    let mut server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let s = api.open_session(60_000).await;
    let grant = api.acquire_ok("k", &s.session_id, 10_000).await;
    assert!(server.terminate(), "graceful stop");
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("offline.backup");
    let report = lock_server_cli([
        "backup",
        "--data-dir",
        &path_str(server.data_dir()),
        "--to",
        &path_str(&file),
    ])
    .assert_ok();
    assert_eq!(report["online"], false, "{report}");
    assert!(report["reservedUpto"].as_u64().unwrap() >= grant.fencing_token);
    // Nothing to back up where no store is.
    let empty = temp_data_dir();
    lock_server_cli([
        "backup",
        "--data-dir",
        &path_str(empty.path()),
        "--to",
        &path_str(&out.path().join("none")),
    ])
    .assert_refused("nothing to back up");
    // The dir's own server starts again after the offline backup (its lock was let go).
    server.restart();
    assert_eq!(server.api().session_status(&s.session_id).await.status, 200);
}
