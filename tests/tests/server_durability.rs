//! Fencing-token and lease durability of the embedded store across restarts: graceful,
//! kill -9 under load, and an OS crash simulated by deleting the WAL and faking a reboot;
//! shared holds through both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use lock_api::paths;
use lock_api::{LockGrant, LockMode, SessionStatus};
use lock_e2e::{Api, ServerOptions, TestServer};
use serde_json::json;

const LOAD_KEYS: usize = 3;
const WORKERS: usize = 6;

/// How long a worker may take to notice `stop` (one request, bounded by the client's timeout).
const WORKER_STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// The server the workers load: `None` while it is being stopped and started again. Its port
/// is free from the moment it dies and any process's bind to port 0 may get it, so requests
/// sent to the old address in that window could reach (and wait on) another program.
type Target = Arc<RwLock<Option<Api>>>;

/// What the workers saw acknowledged, per key.
#[derive(Default)]
struct Seen {
    max_token: HashMap<String, u64>,
    grants: usize,
    fenced_while_holding: Vec<String>,
}

async fn worker(n: usize, target: Target, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let mut session: Option<String> = None;
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let Some(api) = target.read().unwrap().clone() else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        round += 1;
        let key = format!("load-{}", (n + round) % LOAD_KEYS);
        let Some(id) = session.clone() else {
            if let Ok(r) = api
                .try_json("POST", "/v1/sessions", &json!({"ttlMillis": 120_000}))
                .await
            {
                if r.status == 201 {
                    session = r.body["sessionId"].as_str().map(str::to_string);
                }
            }
            continue;
        };
        let acquire = api
            .try_json(
                "POST",
                &paths::acquire(&key),
                &json!({"sessionId": id, "ttlMillis": 1_000}),
            )
            .await;
        let Ok(reply) = acquire else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        match reply.status {
            200 => {
                let grant: LockGrant = reply.parse();
                {
                    let mut seen = seen.lock().unwrap();
                    seen.grants += 1;
                    let max = seen.max_token.entry(key.clone()).or_default();
                    *max = (*max).max(grant.fencing_token);
                }
                let path = paths::ledger(&key);
                let body = json!({"fencingToken": grant.fencing_token, "entry": format!("w{n}")});
                if let Ok(r) = api.try_json("POST", &path, &body).await {
                    if r.status == 409 {
                        seen.lock()
                            .unwrap()
                            .fenced_while_holding
                            .push(format!("{key}: {grant:?} {:?}", r.body));
                    }
                }
                let path = paths::release(&key);
                let _ = api
                    .try_json("POST", &path, &json!({"fencingToken": grant.fencing_token}))
                    .await;
            }
            404 => session = None,
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Long-lived sessions each holding one lock; they must survive every restart.
async fn sticky_locks(api: &Api, count: usize) -> Vec<Sticky> {
    let mut out = Vec::new();
    for i in 0..count {
        let s = api.open_session(120_000).await;
        let key = format!("sticky-{i}");
        let grant = api.acquire_ok(&key, &s.session_id, 120_000).await;
        out.push(Sticky {
            session_id: s.session_id,
            holder_id: s.holder_id,
            key,
            token: grant.fencing_token,
        });
    }
    out
}

/// A long-lived session holding one lock through every restart.
struct Sticky {
    session_id: String,
    holder_id: String,
    key: String,
    token: u64,
}

async fn assert_sticky_intact(api: &Api, sticky: &[Sticky], round: usize) {
    for s in sticky {
        let reply = api.session_status(&s.session_id).await;
        assert_eq!(reply.status, 200, "round {round}: session lost: {reply:?}");
        let status: SessionStatus = reply.parse();
        assert_eq!(status.locks.len(), 1, "round {round}: {status:?}");
        let holder = api.lock_state(&s.key).await.holder;
        // The holder id is the same after every restart: its key is in the store.
        assert_eq!(
            holder.map(|h| (h.holder_id, h.fencing_token)),
            Some((s.holder_id.clone(), s.token)),
            "round {round}: lock {} lost",
            s.key
        );
    }
}

/// A fresh grant on every load key must be above everything acknowledged before.
async fn assert_tokens_rise(api: &Api, seen: &Mutex<Seen>, round: usize) {
    let probe = api.open_session(60_000).await;
    for k in 0..LOAD_KEYS {
        let key = format!("load-{k}");
        let before = seen
            .lock()
            .unwrap()
            .max_token
            .get(&key)
            .copied()
            .unwrap_or(0);
        let reply = api
            .acquire(&key, &probe.session_id, Some(1_000), Some(10_000))
            .await;
        assert_eq!(
            reply.status, 200,
            "round {round}: probe not granted: {reply:?}"
        );
        let grant: LockGrant = reply.parse();
        assert!(
            grant.fencing_token > before,
            "round {round}: token went back on {key}: {} after {before}",
            grant.fencing_token
        );
        seen.lock()
            .unwrap()
            .max_token
            .insert(key.clone(), grant.fencing_token);
        assert_eq!(
            api.release(&key, grant.fencing_token, None).await.status,
            204
        );
    }
    let _ = api.close_session(&probe.session_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_under_load_never_lose_tokens_sessions_or_locks() {
    let mut server = TestServer::start(ServerOptions::new());
    let sticky = sticky_locks(&server.api(), 4).await;
    let target: Target = Arc::new(RwLock::new(Some(server.api())));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|n| tokio::spawn(worker(n, target.clone(), stop.clone(), seen.clone())))
        .collect();
    // 24 restarts: 20 by kill -9 and, every sixth, a graceful SIGTERM stop.
    for round in 0..24 {
        // Let load build up (wait for grants, not for time: no speed assumption).
        let wanted = seen.lock().unwrap().grants + 20;
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.lock().unwrap().grants < wanted && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Requests already sent are cut by the stop; new ones wait for the next address.
        *target.write().unwrap() = None;
        if round % 6 == 5 {
            assert!(server.terminate(), "round {round}: graceful stop failed");
            server.restart();
        } else {
            server.kill9();
            server.restart();
        }
        *target.write().unwrap() = Some(server.api());
        let current = server.api();
        assert_sticky_intact(&current, &sticky, round).await;
        assert_tokens_rise(&current, &seen, round).await;
    }
    stop.store(true, Ordering::Relaxed);
    for (n, w) in workers.into_iter().enumerate() {
        tokio::time::timeout(WORKER_STOP_TIMEOUT, w)
            .await
            .unwrap_or_else(|_| panic!("worker {n} did not stop"))
            .unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(seen.grants >= 400, "too little load: {}", seen.grants);
    assert!(
        seen.fenced_while_holding.is_empty(),
        "a holder was fenced out: {:?}",
        seen.fenced_while_holding
    );
    // The ledger's accepted tokens never go back per key. (Equal neighbours are legitimate:
    // a worker whose release was cut by a restart may be re-granted the same lock
    // idempotently, same token, and append again.)
    let api = server.api();
    for k in 0..LOAD_KEYS {
        let ledger = api.ledger_read(&format!("load-{k}")).await;
        for pair in ledger.entries.windows(2) {
            assert!(pair[0].fencing_token <= pair[1].fencing_token, "{pair:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_wal_after_a_reboot_holds_back_grants_and_tokens_still_rise() {
    let boot = tempfile::tempdir().unwrap();
    let boot_id = boot.path().join("boot_id");
    std::fs::write(&boot_id, "boot-A\n").unwrap();
    let options = ServerOptions::new().args([
        "--boot-id-path".to_string(),
        boot_id.display().to_string(),
        "--unclean-holdback-ms".to_string(),
        "1500".to_string(),
    ]);
    let mut server = TestServer::start(options);
    let api = server.api();
    let s = api.open_session(60_000).await;
    let mut max = 0;
    for _ in 0..20 {
        let g = api.acquire_ok("k", &s.session_id, 1_000).await;
        max = g.fencing_token;
        assert_eq!(api.release("k", max, None).await.status, 204);
    }
    let held = api.acquire_ok("held", &s.session_id, 1_000).await;

    // Same boot, kill -9: nothing lost, no hold-back, the lock is still there.
    server.kill9();
    server.restart();
    let api = server.api();
    let holder = api
        .lock_state("held")
        .await
        .holder
        .expect("survives kill -9");
    assert_eq!(holder.fencing_token, held.fencing_token);
    let g = api.acquire_ok("k", &s.session_id, 1_000).await;
    assert!(g.fencing_token > max);
    max = g.fencing_token;

    // An OS crash: the un-checkpointed WAL is gone, and the boot id changed.
    server.kill9();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(server.data_dir().join(format!("lock.db{suffix}")));
    }
    std::fs::write(&boot_id, "boot-B\n").unwrap();
    server.restart();
    let api = server.api();
    let fresh = api.open_session(60_000).await;
    let reply = api.acquire("k", &fresh.session_id, Some(1_000), None).await;
    reply.assert_not_leader();

    // After the hold-back, grants resume with tokens above everything issued before.
    let deadline = Instant::now() + Duration::from_secs(30);
    let grant = loop {
        let reply = api.acquire("k", &fresh.session_id, Some(1_000), None).await;
        if reply.status == 200 {
            break reply.parse::<LockGrant>();
        }
        assert_eq!(reply.code(), Some("NOT_LEADER"), "{reply:?}");
        assert!(Instant::now() < deadline, "hold-back never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        grant.fencing_token > max,
        "{} after {max}",
        grant.fencing_token
    );
    assert!(grant.fencing_token > held.fencing_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_keeps_everything_and_needs_no_holdback() {
    let boot = tempfile::tempdir().unwrap();
    let boot_id = boot.path().join("boot_id");
    std::fs::write(&boot_id, "boot-A\n").unwrap();
    let options =
        ServerOptions::new().args(["--boot-id-path".to_string(), boot_id.display().to_string()]);
    let mut server = TestServer::start(options);
    let api = server.api();
    let s = api.open_session(60_000).await;
    let grant = api.acquire_ok("g", &s.session_id, 60_000).await;
    assert!(server.terminate(), "graceful exit");
    assert!(server.data_dir().join("clean-shutdown").exists());
    // A clean stop followed by a reboot loses nothing: no hold-back (the default hold-back
    // would be 5 minutes, so a 503 here would show).
    std::fs::write(&boot_id, "boot-B\n").unwrap();
    server.restart();
    let api = server.api();
    let holder = api.lock_state("g").await.holder.expect("lock kept");
    assert_eq!(holder.fencing_token, grant.fencing_token);
    let other = api.open_session(60_000).await;
    let next = api.acquire_ok("g2", &other.session_id, 1_000).await;
    assert!(next.fencing_token > grant.fencing_token);
}

/// Shared holds keep every durability guarantee. Readers hold a key shared; kill -9 and a
/// restart on the same file (same boot: no hold-back) keep each hold with its token, mode
/// and limit, and the next grants, shared or exclusive, carry tokens above every token issued
/// before. Then an OS crash (WAL gone, another boot id): during the hold-back nothing is
/// granted, shared or exclusive, waiting or not, and L7 shows no hold above the old tokens;
/// after it, grants resume above every earlier token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_holds_survive_kill9_and_are_held_back_after_a_reboot() {
    const KEY: &str = "shared";
    const LIMIT: u32 = 5;
    let boot = tempfile::tempdir().unwrap();
    let boot_id = boot.path().join("boot_id");
    std::fs::write(&boot_id, "boot-A\n").unwrap();
    let options = ServerOptions::new().args([
        "--boot-id-path".to_string(),
        boot_id.display().to_string(),
        "--unclean-holdback-ms".to_string(),
        "4000".to_string(),
    ]);
    let mut server = TestServer::start(options);
    let api = server.api();
    let mut readers = Vec::new();
    for _ in 0..3 {
        let session = api.open_session(120_000).await;
        let reply = api
            .acquire_shared(KEY, &session.session_id, Some(LIMIT), None)
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
        readers.push((session, reply.parse::<LockGrant>()));
    }
    let mut max = readers.last().unwrap().1.fencing_token;
    // Shared grants on another key move the one counter on, too.
    let churn = api.open_session(120_000).await;
    for _ in 0..20 {
        let reply = api
            .acquire_shared("churn", &churn.session_id, None, None)
            .await;
        let grant: LockGrant = reply.parse();
        assert!(grant.fencing_token > max);
        max = grant.fencing_token;
        assert_eq!(api.release("churn", max, None).await.status, 204);
    }

    server.kill9();
    server.restart();
    let api = server.api();
    let state = api.lock_state(KEY).await;
    let kept: Vec<(String, u64)> = state
        .holders
        .iter()
        .map(|h| (h.holder_id.clone(), h.fencing_token))
        .collect();
    let held: Vec<(String, u64)> = readers
        .iter()
        .map(|(s, g)| (s.holder_id.clone(), g.fencing_token))
        .collect();
    assert_eq!(kept, held, "the shared holds survive kill -9: {state:?}");
    assert_eq!(
        (state.mode, state.limit),
        (Some(LockMode::Shared), Some(LIMIT))
    );
    for (session, grant) in &readers {
        let status: SessionStatus = api.session_status(&session.session_id).await.parse();
        assert_eq!(status.locks.len(), 1, "{status:?}");
        assert_eq!(status.locks[0].fencing_token, grant.fencing_token);
        assert_eq!(status.locks[0].mode, LockMode::Shared);
    }
    let fourth = api.open_session(120_000).await;
    let reply = api
        .acquire_shared(KEY, &fourth.session_id, Some(LIMIT), None)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let after: LockGrant = reply.parse();
    assert!(
        after.fencing_token > max,
        "{} after {max}",
        after.fencing_token
    );
    let other = api.acquire_ok("other", &fourth.session_id, 60_000).await;
    assert!(other.fencing_token > after.fencing_token);
    max = other.fencing_token;

    // An OS crash: the un-checkpointed WAL is gone, and the boot id changed.
    server.kill9();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(server.data_dir().join(format!("lock.db{suffix}")));
    }
    std::fs::write(&boot_id, "boot-B\n").unwrap();
    server.restart();
    let api = server.api();
    let fresh = api.open_session(60_000).await;
    let id = fresh.session_id.as_str();
    api.acquire_shared(KEY, id, Some(LIMIT), None)
        .await
        .assert_not_leader();
    api.acquire_shared(KEY, id, Some(LIMIT), Some(1_000))
        .await
        .assert_not_leader();
    api.acquire("another", id, Some(1_000), None)
        .await
        .assert_not_leader();
    // Until the hold-back ends: every L4 is refused, and no hold newer than the crash shows.
    let deadline = Instant::now() + Duration::from_secs(30);
    let grant = loop {
        let state = api.lock_state(KEY).await;
        assert!(
            state.holders.iter().all(|h| h.fencing_token <= max),
            "granted during the hold-back: {state:?}"
        );
        let reply = api.acquire_shared(KEY, id, Some(LIMIT), None).await;
        if reply.status == 200 {
            break reply.parse::<LockGrant>();
        }
        reply.assert_not_leader();
        assert!(Instant::now() < deadline, "hold-back never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        grant.fencing_token > max,
        "{} after {max}",
        grant.fencing_token
    );
    assert_eq!(grant.mode, LockMode::Shared);
}
