//! The load-balancer guide (docs/load-balancer.md) proved with real processes: two
//! lock-server replicas over one etcd, behind a real nginx running the guide's own file
//! (docs/nginx/lock-server.conf), the native SDK talking only to nginx.
//!
//! Checked: many tasks of one session queue for a key through the proxy and take turns with
//! increasing tokens; an L8 event stream is not buffered by the proxy; the access log never
//! shows a session id; with one replica killed the proxy's next-upstream rule keeps every
//! call working; with every replica down nginx's own 502 page is a retryable answer to the
//! SDK, whose acquire succeeds once a replica is back within its budget; and the guide's read
//! timeout outlasts the longest server-side wait.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_api::limits::WAIT_MILLIS_MAX;
use lock_e2e::contract::eventually;
use lock_e2e::etcd::EtcdCluster;
use lock_e2e::nginx::{guide_conf, Nginx};
use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, LockClient, PolicySettings};

/// Bound on anything that should happen at once (an event through the proxy).
const PROMPTLY: Duration = Duration::from_secs(5);

fn replica(etcd: &EtcdCluster) -> TestServer {
    TestServer::start(
        ServerOptions::new()
            .keep_port()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([etcd.endpoints_arg()])
            .args(["--etcd-prefix", "/lb/", "--etcd-timeout-ms", "1000"]),
    )
}

fn policy(budget: Duration, wait_millis: u64) -> AcquirePolicy {
    AcquirePolicy::new(PolicySettings {
        total_budget: budget,
        wait_millis,
        ..AcquirePolicy::default().settings()
    })
    .expect("valid policy")
}

#[test]
fn the_guides_read_timeout_outlasts_the_longest_wait_and_keep_alive() {
    let conf = guide_conf();
    let seconds = |directive: &str| -> u64 {
        conf.lines()
            .find_map(|l| l.trim().strip_prefix(directive))
            .and_then(|v| {
                v.trim()
                    .trim_end_matches(';')
                    .trim_end_matches('s')
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{directive} in the guide's file"))
    };
    let read = seconds("proxy_read_timeout");
    assert!(
        read * 1000 > WAIT_MILLIS_MAX && read > 15,
        "proxy_read_timeout {read}s must outlast waitMillis ≤ {WAIT_MILLIS_MAX} ms and the 15 s keep-alive"
    );
    assert!(conf.contains("proxy_buffering off;"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_the_guides_nginx_serve_the_sdk_through_outages() {
    let etcd = EtcdCluster::single();
    let mut a = replica(&etcd);
    let mut b = replica(&etcd);
    let nginx = Nginx::start(&[a.addr().to_owned(), b.addr().to_owned()]);
    let client = LockClient::native(nginx.base_url());
    let session = client.open_session().await.expect("L1 through nginx");

    // Many tasks of one session queue for one key through the proxy.
    let key = "lb/queue";
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (session, tokens) = (session.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            let handle = session
                .acquire(
                    key,
                    Duration::from_secs(10),
                    &policy(Duration::from_secs(30), 5_000),
                )
                .await
                .expect("no error")
                .expect("granted within the budget");
            tokens.lock().unwrap().push(handle.fencing_token());
            tokio::time::sleep(Duration::from_millis(50)).await;
            session.release(&handle).await.expect("L6");
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 8);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "turns in token order: {tokens:?}"
    );

    // An L8 stream through the proxy: the grant's event arrives while the stream stays open
    // (a buffering proxy would hold it back).
    let http = reqwest::Client::new();
    let stream = http
        .get(format!(
            "{}{}",
            nginx.base_url(),
            lock_api::paths::events("lb/watched")
        ))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("L8 through nginx");
    assert_eq!(stream.status(), 200);
    let mut stream = stream;
    let held = session
        .acquire(
            "lb/watched",
            Duration::from_secs(10),
            &policy(Duration::from_secs(10), 0),
        )
        .await
        .expect("no error")
        .expect("granted");
    let mut seen = String::new();
    let arrived = tokio::time::timeout(PROMPTLY, async {
        while let Ok(Some(chunk)) = stream.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: granted") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        arrived,
        Ok(true),
        "the granted event through nginx:\n{seen}"
    );
    session.release(&held).await.expect("L6");

    // One replica down: the proxy passes every call to the other.
    a.kill9();
    for i in 0..6 {
        let handle = session
            .acquire(
                &format!("lb/one-down/{i}"),
                Duration::from_secs(10),
                &policy(Duration::from_secs(10), 0),
            )
            .await
            .expect("no error with one replica down")
            .expect("granted");
        session
            .release(&handle)
            .await
            .expect("L6 with one replica down");
    }

    // Every replica down: nginx answers its own 502 page, which the SDK retries within its
    // budget; a replica back within it serves the acquire.
    b.kill9();
    let waiting = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .acquire(
                    "lb/all-down",
                    Duration::from_secs(10),
                    &policy(Duration::from_secs(20), 0),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let gateway = http
        .post(format!("{}{}", nginx.base_url(), "/v1/sessions"))
        .body("{}")
        .send()
        .await
        .expect("an answer from nginx");
    assert_eq!(
        gateway.status(),
        502,
        "nginx's own answer while every replica is down"
    );
    b.restart();
    let granted = waiting.await.expect("task");
    let handle = granted
        .expect("a 502 from the proxy is retried, not an error")
        .expect("granted once a replica is back");
    session.release(&handle).await.expect("L6");

    // The access log has every request line, and no URL carries a session id: L3's names
    // the session by its holder id.
    let (id, holder_id) = (session.id().to_owned(), session.holder_id().to_owned());
    session.close().await.expect("L3 through nginx");
    // nginx writes a request's line once its answer is sent: the client may read it first.
    let l3 = format!("\"DELETE /v1/sessions/{holder_id} HTTP/1.1\"");
    eventually("L3 in the access log, by holder id", || async {
        nginx.access_log().contains(&l3)
    })
    .await;
    let log = nginx.access_log();
    assert!(!log.contains(&id), "a session id in the access log:\n{log}");
    drop(a);
}
