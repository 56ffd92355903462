//! Several lock-server replicas over one 3-member etcd cluster, through HTTP only:
//! contention spread across replicas, the etcd leader killed mid-run, a replica killed while
//! its session holds the lock. Invariants checked: the ledger never accepts a stale token,
//! tokens strictly increase, no two sessions ever share a token, and failures surface as
//! 503 STORE_UNAVAILABLE or NOT_LEADER (never 500) and heal without restarting anything.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_api::LockGrant;
use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{Api, ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, LockClient, LockError};

/// Acquire budget of one attempt loop, as the SDK's default total budget (10 s).
const ACQUIRE_BUDGET: Duration = Duration::from_secs(10);
/// Floor delay after a 503, as the SDK's NOT_LEADER floor (ASSUMPTION: 100 ms).
const NOT_LEADER_FLOOR: Duration = Duration::from_millis(100);
/// Upper bound for anything waiting on a real lease expiry.
const EXPIRY_BOUND: Duration = Duration::from_secs(15);

fn replica(etcd: &EtcdCluster) -> TestServer {
    TestServer::start(
        ServerOptions::new()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", "/replicas/", "--etcd-timeout-ms", "1000"]),
    )
}

/// What one acquire loop ended with.
enum Attempt {
    Granted(LockGrant),
    SessionLost,
    BudgetSpent,
}

/// The SDK's loop in miniature: retry 409/429 with full jitter, 503 after a floor, inside a
/// deadline computed once at entry; counts the 503s it saw.
async fn acquire_within_budget(
    api: &Api,
    key: &str,
    session_id: &str,
    seed: &mut u64,
    not_leader: &mut usize,
) -> Attempt {
    let deadline = Instant::now() + ACQUIRE_BUDGET;
    let mut attempt = 0u32;
    while Instant::now() < deadline {
        let reply = api.acquire(key, session_id, Some(5_000), None).await;
        match reply.status {
            200 => return Attempt::Granted(reply.parse()),
            404 => return Attempt::SessionLost,
            409 | 429 => {
                let cap = 50u64.saturating_mul(1 << attempt.min(5)).min(500);
                tokio::time::sleep(Duration::from_millis(jitter(seed, cap))).await;
                attempt += 1;
            }
            503 => {
                assert_retry_later(&reply);
                *not_leader += 1;
                tokio::time::sleep(NOT_LEADER_FLOOR).await;
            }
            _ => panic!("acquire answered {reply:?}"),
        }
    }
    Attempt::BudgetSpent
}

/// xorshift: uniform-enough full jitter in `[0, cap]` without a rand dependency.
fn jitter(seed: &mut u64, cap: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % (cap + 1)
}

/// Everything one worker saw.
#[derive(Default)]
struct Seen {
    grants: Vec<(u64, String)>,
    not_leader: usize,
}

/// A worker: open a session, loop acquire → two ledger appends → release, heartbeating
/// between rounds, until `stop`. Every error but 503 / benign LOCK_LOST fails the test.
async fn worker(api: Api, id: u64, key: &'static str, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (id + 1);
    let mut session: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let Some(sid) = session.clone() else {
            let reply = api
                .open_session_with(serde_json::json!({"ttlMillis": 5_000}))
                .await;
            match reply.status {
                201 => session = Some(reply.body["sessionId"].as_str().unwrap().to_owned()),
                503 => {
                    seen.not_leader += 1;
                    tokio::time::sleep(NOT_LEADER_FLOOR).await;
                }
                _ => panic!("open session answered {reply:?}"),
            }
            continue;
        };
        match api.heartbeat(&sid).await.status {
            200 | 503 => {}
            404 => {
                session = None;
                continue;
            }
            other => panic!("heartbeat answered {other}"),
        }
        let grant =
            match acquire_within_budget(&api, key, &sid, &mut seed, &mut seen.not_leader).await {
                Attempt::Granted(grant) => grant,
                Attempt::SessionLost => {
                    session = None;
                    continue;
                }
                Attempt::BudgetSpent => continue,
            };
        seen.grants.push((grant.fencing_token, sid.clone()));
        for n in 0..2 {
            let reply = api
                .ledger_append(key, grant.fencing_token, &format!("w{id} n{n}"))
                .await;
            match reply.status {
                200 | 201 | 204 => {}
                503 => seen.not_leader += 1,
                _ => panic!("a current holder's append answered {reply:?}"),
            }
        }
        let reply = api.release(key, grant.fencing_token, Some(&sid)).await;
        match reply.status {
            204 => {}
            409 => {
                reply.assert_error(409, "LOCK_LOST");
            }
            503 => seen.not_leader += 1,
            _ => panic!("release answered {reply:?}"),
        }
    }
    seen
}

/// Runs `count` workers spread over `apis`, calls `during` while they run, stops them and
/// returns the grants of all.
async fn run_workers<F, Fut>(apis: &[Api], key: &'static str, count: u64, during: F) -> Seen
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..count)
        .map(|id| {
            let api = apis[id as usize % apis.len()].clone();
            tokio::spawn(worker(api, id, key, stop.clone()))
        })
        .collect();
    during().await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Seen::default();
    for handle in handles {
        let seen = handle.await.expect("worker panicked");
        all.grants.extend(seen.grants);
        all.not_leader += seen.not_leader;
    }
    all
}

/// Distinct grants, checked: a token belongs to one session only (a session may get its own
/// grant back after a failed release: L4 is idempotent); sorted by token.
fn distinct_tokens(seen: &Seen) -> Vec<u64> {
    let mut grants = seen.grants.clone();
    grants.sort_unstable();
    grants.dedup();
    let mut tokens: Vec<u64> = grants.iter().map(|(t, _)| *t).collect();
    let with_sessions = tokens.len();
    tokens.dedup();
    assert_eq!(with_sessions, tokens.len(), "two sessions shared a token");
    tokens
}

/// The ledger accepted tokens in non-decreasing order, all of them granted ones.
async fn assert_ledger_fenced(api: &Api, key: &str, tokens: &[u64]) {
    let ledger = api.ledger_read(key).await;
    let accepted: Vec<u64> = ledger.entries.iter().map(|e| e.fencing_token).collect();
    assert!(!accepted.is_empty(), "nothing reached the ledger");
    assert!(
        accepted.windows(2).all(|w| w[0] <= w[1]),
        "the ledger accepted a stale token: {accepted:?}"
    );
    assert!(accepted.iter().all(|t| tokens.binary_search(t).is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_locks_and_survive_an_etcd_leader_kill() {
    let mut etcd = EtcdCluster::start(3);
    let replicas = [replica(&etcd), replica(&etcd)];
    let apis: Vec<Api> = replicas.iter().map(TestServer::api).collect();

    // Phase 1: contention across replicas on a healthy cluster.
    let calm = run_workers(&apis, "hot-calm", 4, || {
        tokio::time::sleep(Duration::from_secs(3))
    })
    .await;
    let calm_tokens = distinct_tokens(&calm);
    assert!(
        calm_tokens.len() >= 4,
        "too few grants: {}",
        calm_tokens.len()
    );
    assert_ledger_fenced(&apis[0], "hot-calm", &calm_tokens).await;

    // Phase 2: the etcd leader dies mid-run.
    let mut highest_before_kill = 0;
    let (etcd_ref, highest_ref, observer) = (&mut etcd, &mut highest_before_kill, &apis[1]);
    let stormy = run_workers(&apis, "hot-failover", 4, move || async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        *highest_ref = observer
            .ledger_read("hot-failover")
            .await
            .highest_token
            .unwrap_or(0);
        let leader = etcd_ref.leader().expect("a leader");
        etcd_ref.kill(leader);
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    let tokens = distinct_tokens(&stormy);
    assert_ledger_fenced(&apis[1], "hot-failover", &tokens).await;
    let after = tokens.iter().filter(|t| **t > highest_before_kill).count();
    assert!(
        after >= 2,
        "grants did not resume after the failover ({after})"
    );
    eprintln!(
        "failover run: {} grants, {} NOT_LEADER answers",
        tokens.len(),
        stormy.not_leader
    );

    // Phase 3: the real SDK (native build of lock-wasm) through a second leader kill. Its
    // acquire loop must ride through the 503s within its default budget.
    let old_leader = (0..etcd.size()).find(|i| !etcd.is_running(*i)).unwrap();
    etcd.restart(old_leader);
    let stop = Arc::new(AtomicBool::new(false));
    let sdk_workers: Vec<_> = (0..4)
        .map(|id| {
            let base = replicas[id % 2].base_url();
            tokio::spawn(sdk_worker(base, id, stop.clone()))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = apis[0]
        .ledger_read("hot-sdk")
        .await
        .highest_token
        .unwrap_or(0);
    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let mut sdk = Seen::default();
    for worker in sdk_workers {
        sdk.grants
            .extend(worker.await.expect("sdk worker panicked").grants);
    }
    let sdk_tokens = distinct_tokens(&sdk);
    assert_ledger_fenced(&apis[0], "hot-sdk", &sdk_tokens).await;
    let after = sdk_tokens.iter().filter(|t| **t > before).count();
    assert!(
        after >= 2,
        "SDK grants did not resume after the failover ({after})"
    );
}

/// A worker on the SDK: acquire (default policy: full jitter, NOT_LEADER floor, 10 s
/// budget), two ledger appends with the handle's token, release. The SDK heartbeats itself.
async fn sdk_worker(base: String, id: usize, stop: Arc<AtomicBool>) -> Seen {
    let api = Api::new(base.clone(), None);
    let client = LockClient::native(base);
    let mut seen = Seen::default();
    let mut session = None;
    while !stop.load(Ordering::Relaxed) {
        let Some(current) = session.as_ref() else {
            match client.open_session().await {
                Ok(opened) => session = Some(opened),
                Err(LockError::NotLeader { .. } | LockError::StoreUnavailable { .. }) => {
                    tokio::time::sleep(NOT_LEADER_FLOOR).await
                }
                Err(other) => panic!("open session: {other:?}"),
            }
            continue;
        };
        let policy = AcquirePolicy::default();
        let handle = match current
            .acquire("hot-sdk", Duration::from_secs(5), &policy)
            .await
        {
            Ok(Some(handle)) => handle,
            // Budget spent while contended or during the election: try again.
            Ok(None)
            | Err(LockError::NotLeader { .. })
            | Err(LockError::StoreUnavailable { .. })
            | Err(LockError::Contention { .. })
            | Err(LockError::Timeout(_)) => continue,
            // A lost session, or a handle lost while its release failed: start afresh.
            Err(LockError::SessionLost) | Err(LockError::LockLost { .. }) => {
                session = None;
                continue;
            }
            Err(other) => panic!("sdk acquire: {other:?}"),
        };
        let token = handle.fencing_token();
        seen.grants.push((token, current.id().to_owned()));
        for n in 0..2 {
            let reply = api
                .ledger_append("hot-sdk", token, &format!("sdk{id} n{n}"))
                .await;
            assert!(
                reply.status < 300 || reply.status == 503,
                "a current holder's append answered {reply:?}"
            );
        }
        let _ = current.release(&handle).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_locks_expire_and_move_on_with_higher_tokens() {
    let etcd = EtcdCluster::start(3);
    let mut doomed = replica(&etcd);
    let survivor = replica(&etcd);
    let (a, b) = (doomed.api(), survivor.api());

    let session_a = a.open_session(1_500).await.session_id;
    let grant_a = a.acquire_ok("moving", &session_a, 30_000).await;
    a.ledger_append("moving", grant_a.fencing_token, "from a")
        .await;
    doomed.kill9();

    // Nobody heartbeats session A any more: its lease ends and the lock with it.
    let session_b = b.open_session(15_000).await.session_id;
    let deadline = Instant::now() + EXPIRY_BOUND;
    let grant_b = loop {
        assert!(
            Instant::now() < deadline,
            "the dead replica's lock never expired"
        );
        let reply = b.acquire("moving", &session_b, Some(10_000), None).await;
        match reply.status {
            200 => break reply.parse::<LockGrant>(),
            409 => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => panic!("acquire answered {reply:?}"),
        }
    };
    assert!(grant_b.fencing_token > grant_a.fencing_token);
    assert_eq!(
        b.heartbeat(&session_a).await.status,
        404,
        "session A is gone"
    );
    let reply = b
        .ledger_append("moving", grant_b.fencing_token, "from b")
        .await;
    assert!(reply.status < 300, "{reply:?}");
    // The old holder waking up late is fenced out, through any replica.
    b.ledger_append("moving", grant_a.fencing_token, "stale a")
        .await
        .assert_error(409, "FENCED_OUT");
    // A session that heartbeats through the survivor only stays alive (no replica affinity).
    let session_c = a_session_kept_alive_elsewhere(&etcd, &b).await;
    assert_eq!(b.heartbeat(&session_c).await.status, 200);
}

/// Opens a session on a second short-lived replica, kills that replica, and keeps the
/// session alive through `other` for longer than its TTL.
async fn a_session_kept_alive_elsewhere(etcd: &EtcdCluster, other: &Api) -> String {
    let mut short_lived = replica(etcd);
    let session = short_lived.api().open_session(1_500).await.session_id;
    short_lived.kill9();
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert_eq!(other.heartbeat(&session).await.status, 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    session
}

/// A 503 while etcd elects a leader: STORE_UNAVAILABLE (`no_quorum` or `unreachable`: the
/// store cannot write) or NOT_LEADER (the replica lost too many races for the key), each
/// with its contract body.
fn assert_retry_later(reply: &lock_e2e::client::Reply) {
    if reply.code() == Some("NOT_LEADER") {
        reply.assert_not_leader();
    } else {
        reply.assert_store_unavailable();
    }
}
