//! Shared holds (C3, "Shared holds") on etcd: two lock-server replicas over one etcd member,
//! the sessions of each check spread over both, so the grant rules, the limit and the queue
//! are kept across replicas; and replicas racing to grant shared holds under a limit.

use std::sync::{Arc, Mutex};

use lock_api::{LockGrant, LockMode};
use lock_e2e::client::Api;
use lock_e2e::contract::unique_key;
use lock_e2e::etcd::EtcdCluster;
use lock_e2e::{shared_holds, TestServer};

fn replica(etcd: &EtcdCluster, prefix: &str) -> TestServer {
    TestServer::start(
        shared_holds::options()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", prefix]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_etcd_replicas_serve_shared_holds() {
    let etcd = EtcdCluster::single();
    let (a, b) = (replica(&etcd, "/shared/"), replica(&etcd, "/shared/"));
    shared_holds::run_all(&[a.api(), b.api()]).await;
}

/// Holds counted between a grant's answer and its release's request, so never more than the
/// server's holders at any instant: a count past the limit, or an exclusive hold counted
/// beside any other, is a double grant.
#[derive(Default)]
struct Tally {
    shared: u32,
    exclusive: u32,
    most_shared: u32,
    tokens: Vec<u64>,
    violations: Vec<String>,
}

/// Many shared L4s with a limit and a few exclusive ones, from sessions spread over two
/// replicas, in rounds that start together: rounds without a wait (each replica sees the same
/// `limit − 1` holders and sends its grant at once) and rounds that queue. Neither the
/// tally of grants nor L7 through the other replica ever shows more than the limit, or an
/// exclusive hold beside another; every grant has its own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_racing_for_a_semaphore_never_exceed_its_limit() {
    const LIMIT: u32 = 3;
    const READERS: usize = 12;
    const WRITERS: usize = 2;
    const ROUNDS: usize = 6;
    let etcd = EtcdCluster::single();
    let servers = [replica(&etcd, "/race/"), replica(&etcd, "/race/")];
    let key = unique_key("semaphore race");
    let tally = Arc::new(Mutex::new(Tally::default()));
    let gate = Arc::new(tokio::sync::Barrier::new(READERS + WRITERS));
    let mut tasks = Vec::new();
    for n in 0..READERS + WRITERS {
        let (api, observer) = (servers[n % 2].api(), servers[(n + 1) % 2].api());
        let (tally, gate, key) = (tally.clone(), gate.clone(), key.clone());
        let writer = n < WRITERS;
        tasks.push(tokio::spawn(async move {
            let session = api.open_session(60_000).await.session_id;
            for round in 0..ROUNDS {
                gate.wait().await;
                let wait = (round % 2 == 1).then_some(lock_api::limits::WAIT_MILLIS_MAX);
                let reply = match writer {
                    true => api.acquire(&key, &session, Some(30_000), wait).await,
                    false => api.acquire_shared(&key, &session, Some(LIMIT), wait).await,
                };
                if reply.status == 409 && reply.code() == Some("LOCK_CONTENDED") {
                    continue;
                }
                if reply.status != 200 {
                    // Noted, not panicked: a panicking contender would leave the others
                    // waiting at the gate.
                    let seen = format!("contender {n}, round {round}: {reply:?}");
                    tally.lock().unwrap().violations.push(seen);
                    continue;
                }
                let grant: LockGrant = reply.parse();
                count_in(&tally, &grant, writer, LIMIT);
                check_l7(&observer, &key, &tally, LIMIT).await;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                {
                    let tally = &mut *tally.lock().unwrap();
                    match writer {
                        true => tally.exclusive -= 1,
                        false => tally.shared -= 1,
                    }
                }
                let released = api.release(&key, grant.fencing_token, Some(&session)).await;
                if released.status != 204 {
                    let seen = format!("release of {grant:?}: {released:?}");
                    tally.lock().unwrap().violations.push(seen);
                }
            }
            api.close_session(&session).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let tally = tally.lock().unwrap();
    assert_eq!(tally.violations, Vec::<String>::new());
    let distinct: std::collections::BTreeSet<_> = tally.tokens.iter().collect();
    assert_eq!(distinct.len(), tally.tokens.len(), "a token granted twice");
    // The race did happen: shared holders overlapped (a queued round serves readers in batches).
    assert!(tally.most_shared >= 2, "never two shared holders at once");
}

/// Counts a grant in, noting it if it was made beside what it must not be.
fn count_in(tally: &Mutex<Tally>, grant: &LockGrant, writer: bool, limit: u32) {
    let tally = &mut *tally.lock().unwrap();
    let (mode, clash) = match writer {
        true => (LockMode::Exclusive, tally.shared + tally.exclusive > 0),
        false => (
            LockMode::Shared,
            tally.exclusive > 0 || tally.shared >= limit,
        ),
    };
    let limit_ok = writer || grant.limit == Some(limit);
    if clash || grant.mode != mode || !limit_ok {
        tally.violations.push(format!(
            "{grant:?} granted beside {} shared and {} exclusive",
            tally.shared, tally.exclusive
        ));
    }
    match writer {
        true => tally.exclusive += 1,
        false => tally.shared += 1,
    }
    tally.most_shared = tally.most_shared.max(tally.shared);
    tally.tokens.push(grant.fencing_token);
}

/// L7 through another replica: at most `limit` holders, and an exclusive hold alone.
async fn check_l7(observer: &Api, key: &str, tally: &Mutex<Tally>, limit: u32) {
    let state = observer.lock_state(key).await;
    let holders = state.holders.len();
    let bad = match state.mode {
        Some(LockMode::Exclusive) => holders != 1 || state.holder.is_none(),
        Some(LockMode::Shared) => holders > limit as usize || state.limit != Some(limit),
        None => holders != 0,
    };
    if bad {
        tally
            .lock()
            .unwrap()
            .violations
            .push(format!("L7: {state:?}"));
    }
}
