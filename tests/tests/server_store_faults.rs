//! A store that cannot write, with real processes: the SQLite data dir on a small tmpfs the
//! test mounts and fills with a ballast file while acquires and releases run. Every answer is
//! 2xx, 409 or 503 STORE_UNAVAILABLE (never a 500, never a dropped connection), `/readyz`
//! turns 503 `disk_full` and back, the metrics and the transition log lines say so, a
//! kill -9 while full loses nothing and invents nothing, and the native SDK rides out a
//! short fault within its acquire budget. (The etcd outages have their own `etcd_*` tests.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::{paths, Unavailability};
use lock_e2e::launcher::{server_binary, Launch, ServerProcess};
use lock_e2e::store_faults::{Ballast, Tmpfs};
use lock_e2e::Api;
use lock_wasm::{AcquirePolicy, LockClient};
use serde_json::json;

/// The tmpfs: a few MiB, so a fill is quick, with room for the database and its WAL.
const TMPFS_SIZE: &str = "16m";
const TASKS: usize = 6;
const KEYS: usize = 3;
/// Bound on waiting for a state the server must reach (readiness, a log line).
const STATE_TIMEOUT: Duration = Duration::from_secs(20);

/// What the load saw: every answer's status and code, and every grant.
#[derive(Default)]
struct Seen {
    /// `(status, code)` of every answer, counted.
    answers: BTreeMap<(u16, String), usize>,
    /// Requests that got no answer (a dropped connection).
    unanswered: Vec<String>,
    /// Per key, every token answered 200 on L4.
    granted: BTreeMap<String, BTreeSet<u64>>,
    /// STORE_UNAVAILABLE answers whose reason was not `disk_full`, or malformed.
    bad_store_answers: Vec<String>,
}

impl Seen {
    fn note(&mut self, reply: &lock_e2e::client::Reply) {
        let code = reply.body["code"].as_str().unwrap_or("").to_owned();
        if reply.status == 503 && code == "STORE_UNAVAILABLE" {
            let reason = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                reply.assert_store_unavailable()
            }));
            if !matches!(reason, Ok(Unavailability::DiskFull)) {
                self.bad_store_answers.push(reply.text.clone());
            }
        }
        *self.answers.entry((reply.status, code)).or_default() += 1;
    }

    fn store_unavailable(&self) -> usize {
        self.answers
            .get(&(503, "STORE_UNAVAILABLE".to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

/// One worker: a session, then acquire / release of its key in turn until `stop`. Every
/// answer goes into `seen`.
async fn worker(n: usize, api: Api, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let key = format!("fault-{}", n % KEYS);
    let session = api.open_session(120_000).await.session_id;
    let mut held: Option<u64> = None;
    while !stop.load(Ordering::Relaxed) {
        let (what, reply) = match held {
            None => {
                let body = json!({"sessionId": session, "ttlMillis": 60_000});
                (
                    "L4",
                    api.try_json("POST", &paths::acquire(&key), &body).await,
                )
            }
            Some(token) => {
                let body = json!({"sessionId": session, "fencingToken": token});
                (
                    "L6",
                    api.try_json("POST", &paths::release(&key), &body).await,
                )
            }
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                seen.lock().unwrap().unanswered.push(format!("{what}: {e}"));
                continue;
            }
        };
        {
            let mut seen = seen.lock().unwrap();
            seen.note(&reply);
            match (what, reply.status) {
                ("L4", 200) => {
                    let token = reply.body["fencingToken"].as_u64().expect("token");
                    seen.granted.entry(key.clone()).or_default().insert(token);
                    held = Some(token);
                }
                // Released, or gone (LOCK_LOST): either way it is no longer ours.
                ("L6", 204 | 409) => held = None,
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts the load; returns its stop flag and tasks.
fn start_load(
    api: &Api,
    seen: &Arc<Mutex<Seen>>,
) -> (Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = (0..TASKS)
        .map(|n| tokio::spawn(worker(n, api.clone(), stop.clone(), seen.clone())))
        .collect();
    (stop, tasks)
}

async fn stop_load(stop: Arc<AtomicBool>, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("worker");
    }
}

/// Polls `/readyz` until its status is `want`; its body then.
async fn wait_readyz(api: &Api, want: u16) -> serde_json::Value {
    let give_up = tokio::time::Instant::now() + STATE_TIMEOUT;
    loop {
        let reply = api.raw("GET", "/readyz", None, &[]).await;
        if reply.status == want {
            return reply.body;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "/readyz never answered {want}: {} {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `/metrics` until `lock_sessions` counts at least `want`.
async fn wait_sessions(api: &Api, want: usize) {
    let give_up = tokio::time::Instant::now() + STATE_TIMEOUT;
    loop {
        let sessions = metric(&api.metrics().await, "lock_sessions");
        if sessions >= want as f64 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "only {sessions} sessions open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the metric line starting with `series` (labels included).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in /metrics"))
}

/// Log lines of the server whose `event` is `name`.
fn events(server: &ServerProcess, name: &str) -> Vec<serde_json::Value> {
    server
        .logs()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == name || v["fields"]["event"] == name)
        .collect()
}

/// The tmpfs, or `None` (with the reason printed) where mounting is impossible.
fn tmpfs() -> Option<Tmpfs> {
    match Tmpfs::mount(TMPFS_SIZE) {
        Ok(mount) => Some(mount),
        Err(reason) => {
            eprintln!("SKIPPED: cannot mount a tmpfs here ({reason}); this test needs root");
            None
        }
    }
}

fn start_server(data_dir: &Path) -> ServerProcess {
    Launch::new(&server_binary(), data_dir)
        .start()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_answers_store_unavailable_and_loses_nothing() {
    let Some(mount) = tmpfs() else { return };
    let data_dir = mount.path().join("data");
    let mut server = start_server(&data_dir);
    let api = Api::new(server.base_url(), None);
    wait_readyz(&api, 200).await;
    let seen = Arc::new(Mutex::new(Seen::default()));

    // The disk fills under load: answers turn 503 STORE_UNAVAILABLE disk_full.
    let (stop, tasks) = start_load(&api, &seen);
    // Every worker's session is open, and `/metrics` has read the counts once: what the
    // gauges must keep if a read fails while the disk is full.
    wait_sessions(&api, TASKS).await;
    let ballast = Ballast::fill(mount.path());
    let not_ready = wait_readyz(&api, 503).await;
    assert_eq!(not_ready["status"], "unavailable");
    assert_eq!(not_ready["reason"], "disk_full", "{not_ready}");
    assert!(not_ready["sinceMillis"].as_u64().is_some_and(|m| m > 0));
    let healthz = api.raw("GET", "/healthz", None, &[]).await;
    assert_eq!(healthz.status, 200, "liveness is not readiness");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let metrics = api.metrics().await;
    let l4_errors = metric(
        &metrics,
        "lock_store_errors_total{route=\"L4\",reason=\"disk_full\"}",
    );
    assert!(l4_errors > 0.0, "no L4 store error counted");
    assert_eq!(metric(&metrics, "lock_store_ready"), 0.0);
    assert!(
        metric(&metrics, "lock_sessions") >= TASKS as f64,
        "counts kept"
    );
    stop_load(stop, tasks).await;
    {
        let seen = seen.lock().unwrap();
        println!("answers while full: {:?}", seen.answers);
        assert!(seen.unanswered.is_empty(), "dropped: {:?}", seen.unanswered);
        assert!(
            seen.bad_store_answers.is_empty(),
            "{:?}",
            seen.bad_store_answers
        );
        assert!(seen.store_unavailable() > 0, "{:?}", seen.answers);
        for (status, code) in seen.answers.keys() {
            let allowed = (200..300).contains(status)
                || *status == 409
                || (*status == 503 && code == "STORE_UNAVAILABLE");
            assert!(allowed, "answered {status} {code}");
        }
    }
    let unavailable = events(&server, "store_unavailable");
    assert_eq!(
        unavailable.len(),
        1,
        "one line per transition: {unavailable:?}"
    );

    // Room again: the live server turns ready by itself, one store_ready line.
    ballast.remove();
    wait_readyz(&api, 200).await;
    let give_up = tokio::time::Instant::now() + STATE_TIMEOUT;
    while events(&server, "store_ready").is_empty() {
        assert!(tokio::time::Instant::now() < give_up, "no store_ready line");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(events(&server, "store_ready").len(), 1);
    assert_eq!(events(&server, "store_unavailable").len(), 1);
    assert_eq!(metric(&api.metrics().await, "lock_store_ready"), 1.0);

    // Full again, killed -9 while full, restarted after the ballast is gone.
    let (stop, tasks) = start_load(&api, &seen);
    let ballast = Ballast::fill(mount.path());
    wait_readyz(&api, 503).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_load(stop, tasks).await;
    server.kill9();
    ballast.remove();
    server.restart().unwrap_or_else(|e| panic!("{e}"));
    let api = Api::new(server.base_url(), None);
    wait_readyz(&api, 200).await;
    let (unanswered, granted_by_key) = {
        let seen = seen.lock().unwrap();
        (seen.unanswered.clone(), seen.granted.clone())
    };
    assert!(unanswered.is_empty(), "dropped: {unanswered:?}");
    let fresh = api.open_session(60_000).await.session_id;
    for n in 0..KEYS {
        let key = format!("fault-{n}");
        let granted = granted_by_key.get(&key).cloned().unwrap_or_default();
        // L7: every live hold is one a client was granted; no ticket survives.
        let state = api.lock_state(&key).await;
        for holder in &state.holders {
            assert!(
                granted.contains(&holder.fencing_token),
                "{key}: a hold nobody was granted: {state:?}"
            );
        }
        assert_eq!(state.waiter_count, 0);
        // Tokens of the key go on strictly above every token answered before.
        for holder in &state.holders {
            let body = json!({"fencingToken": holder.fencing_token});
            let _ = api.json("POST", &paths::release(&key), &body).await;
        }
        let after = api.acquire_ok(&key, &fresh, 10_000).await.fencing_token;
        let before = granted.iter().max().copied().unwrap_or(0);
        assert!(after > before, "{key}: token {after} after {before}");
    }
}

/// A native SDK acquire started during a short fault (the ballast removed after about a
/// second) is granted within its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sdk_rides_out_a_short_disk_full() {
    let Some(mount) = tmpfs() else { return };
    let data_dir = mount.path().join("data");
    let server = start_server(&data_dir);
    let api = Api::new(server.base_url(), None);
    wait_readyz(&api, 200).await;
    let client = LockClient::native(server.base_url());
    let session = client.open_session().await.expect("session");
    let ballast = Ballast::fill(mount.path());
    wait_readyz(&api, 503).await;
    let before = metric(
        &api.metrics().await,
        "lock_acquire_total{outcome=\"store_unavailable\"}",
    );
    let freed = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        ballast.remove();
    });
    let policy = AcquirePolicy::default();
    let handle = session
        .acquire("sdk-fault", Duration::from_secs(10), &policy)
        .await
        .expect("no error within the budget")
        .expect("granted within the budget");
    freed.await.unwrap();
    assert!(handle.fencing_token() > 0);
    let after = metric(
        &api.metrics().await,
        "lock_acquire_total{outcome=\"store_unavailable\"}",
    );
    assert!(after > before, "the acquire never met the fault");
    session.release(&handle).await.expect("release");
    session.close().await.expect("close");
}
