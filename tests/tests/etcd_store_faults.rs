//! etcd outages seen through a real lock-server on the etcd backend (the store-unavailable
//! rules of C3 and C4): quorum lost and restored, and etcd over its backend quota (NOSPACE)
//! until the operator's fix (docs/etcd.md, "etcd over quota"). While the store takes no
//! writes, every route whose store call failed answers 503 STORE_UNAVAILABLE with the reason
//! (never 500, never NOT_LEADER), `/readyz` answers 503 with that reason while `/healthz`
//! stays 200, `lock_store_errors_total` counts by route and reason, `lock_store_ready` is 0,
//! the hold gauges stay in `/metrics`, and exactly one log line marks each readiness
//! transition. Once the fault is cleared, readiness returns within a bounded poll and
//! grants resume with higher tokens than before the outage.
//!
//! Time: no fixed sleeps; every wait is a poll with a bound (about 20 s on a 2-core machine
//! for both tests together).

use std::time::{Duration, Instant};

use lock_api::LockGrant;
use lock_e2e::client::Reply;
use lock_e2e::contract::unique_key;
use lock_e2e::etcd_faults::{QuorumCluster, QuotaMember};
use lock_e2e::{Api, ServerOptions, TestServer};
use serde_json::{json, Value};

/// Upper bound of every poll: readiness coming back after the fault is cleared (the
/// server's probe runs every second), a log line reaching the forwarded output.
const POLL_BOUND: Duration = Duration::from_secs(20);
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What a replica may say while two of three members are down: the member left answers
/// without a leader or times out (`no_quorum`), the dead ones refuse connections
/// (`unreachable`).
const NO_QUORUM: &[&str] = &["no_quorum", "unreachable"];
/// What it says while etcd is over its quota.
const OVER_QUOTA: &[&str] = &["space_exceeded"];

/// A replica on `endpoints` with a 1 s etcd timeout, so an outage answers within seconds.
fn replica(endpoints: String) -> TestServer {
    TestServer::start(
        ServerOptions::new()
            .args(["--backend", "etcd", "--etcd-endpoints"])
            .args([endpoints])
            .args(["--etcd-prefix", "/faults/", "--etcd-timeout-ms", "1000"]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_lost_is_store_unavailable_and_readiness_returns_with_it() {
    let mut etcd = QuorumCluster::start();
    let server = replica(etcd.endpoints_arg());
    let api = server.api();
    let key = unique_key("quorum");
    let held_key = unique_key("quorum-held");
    assert_ready(&readyz_until(&api, 200).await);
    let session = api.open_session(60_000).await.session_id;
    let before = api.acquire_ok(&key, &session, 30_000).await;
    assert_eq!(
        api.release(&key, before.fencing_token, Some(&session))
            .await
            .status,
        204
    );
    let held = api.acquire_ok(&held_key, &session, 60_000).await;
    let l4_errors_before = store_errors(&api.metrics().await, "L4");

    etcd.lose_quorum();
    assert_healthy(&api).await;
    let l4 = api.acquire(&key, &session, Some(30_000), None).await;
    assert_store_unavailable(&l4, NO_QUORUM);
    let l1 = api.open_session_with(json!({ "ttlMillis": 60_000 })).await;
    assert_store_unavailable(&l1, NO_QUORUM);
    let l6 = api
        .release(&held_key, held.fencing_token, Some(&session))
        .await;
    assert_store_unavailable(&l6, NO_QUORUM);
    assert_unready(&readyz(&api).await, NO_QUORUM);
    let metrics = api.metrics().await;
    assert!(
        store_errors(&metrics, "L4") > l4_errors_before,
        "lock_store_errors_total{{route=\"L4\"}} did not rise:\n{metrics}"
    );
    assert_outage_gauges(&metrics);
    log_events_at_least(&server, "store_unavailable", 1).await;
    assert_healthy(&api).await;

    etcd.restore_quorum();
    assert_recovered(&server, &key, &session, before.fencing_token, NO_QUORUM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_quota_is_store_unavailable_until_the_operators_fix() {
    let etcd = QuotaMember::start();
    let server = replica(etcd.endpoints_arg());
    let api = server.api();
    let key = unique_key("quota");
    assert_ready(&readyz_until(&api, 200).await);
    let session = api.open_session(60_000).await.session_id;
    let before = api.acquire_ok(&key, &session, 30_000).await;
    assert_eq!(
        api.release(&key, before.fencing_token, Some(&session))
            .await
            .status,
        204
    );

    etcd.fill();
    assert_healthy(&api).await;
    let l4 = api.acquire(&key, &session, Some(30_000), None).await;
    assert_store_unavailable(&l4, OVER_QUOTA);
    let l1 = api.open_session_with(json!({ "ttlMillis": 60_000 })).await;
    assert_store_unavailable(&l1, OVER_QUOTA);
    // A real write that failed marks the replica unready at once, before any probe.
    assert_unready(&readyz(&api).await, OVER_QUOTA);
    let metrics = api.metrics().await;
    for route in ["L4", "L1"] {
        let counted = sample_sum(
            &metrics,
            "lock_store_errors_total",
            &[("route", route), ("reason", "space_exceeded")],
        );
        assert!(
            counted.is_some_and(|n| n >= 1.0),
            "{route} space_exceeded not counted:\n{metrics}"
        );
    }
    assert_outage_gauges(&metrics);
    log_events_at_least(&server, "store_unavailable", 1).await;
    assert_healthy(&api).await;

    etcd.clear();
    assert_recovered(&server, &key, &session, before.fencing_token, OVER_QUOTA).await;
}

/// Once the fault is gone, by itself: ready again (`/readyz`, the gauge, one `store_ready`
/// line after the one `store_unavailable` line with one of `reasons`), `/healthz` 200, and
/// writes accepted again, the key's next token above `before`.
async fn assert_recovered(
    server: &TestServer,
    key: &str,
    session: &str,
    before: u64,
    reasons: &[&str],
) {
    let api = server.api();
    assert_ready(&readyz_until(&api, 200).await);
    assert_healthy(&api).await;
    log_events_at_least(server, "store_ready", 1).await;
    assert_transition_lines(server, reasons);
    let after = granted(&api, key, session).await;
    assert!(
        after.fencing_token > before,
        "token {} after the fault, {before} before",
        after.fencing_token
    );
    assert_eq!(
        api.open_session_with(json!({ "ttlMillis": 60_000 }))
            .await
            .status,
        201
    );
    assert_eq!(gauge(&api.metrics().await, "lock_store_ready"), Some(1.0));
}

/// A well-formed 503 STORE_UNAVAILABLE: a reason from `reasons`, a retry hint in the body
/// and the header, and a message naming no internal address or path.
fn assert_store_unavailable(reply: &Reply, reasons: &[&str]) {
    // Raw JSON, not `Reply::assert_error`'s typed body: the checks stand on the wire format.
    assert_eq!(
        (reply.status, reply.code()),
        (503, Some("STORE_UNAVAILABLE")),
        "{reply:?}"
    );
    let json = reply.content_type.as_deref().unwrap_or_default();
    assert!(json.starts_with("application/json"), "{reply:?}");
    let reason = reply.body["reason"].as_str().unwrap_or_default();
    assert!(
        reasons.contains(&reason),
        "reason not in {reasons:?}: {reply:?}"
    );
    let retry = reply.body["retryAfterMillis"].as_u64();
    assert!(retry.is_some_and(|m| m > 0), "retryAfterMillis: {reply:?}");
    assert!(reply.retry_after.is_some(), "retry-after header: {reply:?}");
    let message = reply.body["message"].as_str().unwrap_or_default();
    for secret in ["127.0.0.1", "://", "/dev/shm", "/tmp"] {
        assert!(
            !message.contains(secret),
            "message names {secret}: {reply:?}"
        );
    }
}

async fn readyz(api: &Api) -> Reply {
    api.raw("GET", "/readyz", None, &[]).await
}

/// Polls `/readyz` until it answers `status`; panics with the last answer after the bound.
async fn readyz_until(api: &Api, status: u16) -> Reply {
    let deadline = Instant::now() + POLL_BOUND;
    loop {
        let reply = readyz(api).await;
        if reply.status == status || Instant::now() > deadline {
            assert_eq!(
                reply.status, status,
                "/readyz after {POLL_BOUND:?}: {reply:?}"
            );
            return reply;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

fn assert_ready(reply: &Reply) {
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body, json!({ "status": "ready" }), "{reply:?}");
}

/// `/readyz` 503 `{"status":"unavailable","reason":…,"sinceMillis":…}`.
fn assert_unready(reply: &Reply, reasons: &[&str]) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.body["status"], "unavailable", "{reply:?}");
    let reason = reply.body["reason"].as_str().unwrap_or_default();
    assert!(
        reasons.contains(&reason),
        "reason not in {reasons:?}: {reply:?}"
    );
    let since = reply.body["sinceMillis"].as_u64();
    assert!(since.is_some_and(|ms| ms > 0), "sinceMillis: {reply:?}");
}

/// Liveness is not readiness: `/healthz` answers 200 whatever the store does.
async fn assert_healthy(api: &Api) {
    let reply = api.raw("GET", "/healthz", None, &[]).await;
    assert_eq!(reply.status, 200, "/healthz: {reply:?}");
}

/// During an outage: not ready, and the hold gauges still printed (their last values).
fn assert_outage_gauges(metrics: &str) {
    assert_eq!(gauge(metrics, "lock_store_ready"), Some(0.0), "{metrics}");
    for name in ["lock_sessions", "lock_locks"] {
        assert!(gauge(metrics, name).is_some(), "{name} missing:\n{metrics}");
    }
}

/// L4 until granted. Right after readiness returns, a request may still meet the store's
/// last failure; every refusal on the way must be a well-formed 503, and the bound holds.
async fn granted(api: &Api, key: &str, session: &str) -> LockGrant {
    let deadline = Instant::now() + POLL_BOUND;
    loop {
        let reply = api.acquire(key, session, Some(30_000), None).await;
        match reply.status {
            200 => return reply.parse(),
            503 if Instant::now() < deadline => {
                assert!(
                    matches!(reply.code(), Some("STORE_UNAVAILABLE" | "NOT_LEADER")),
                    "{reply:?}"
                );
                tokio::time::sleep(POLL_EVERY).await;
            }
            _ => panic!("acquire after the fault was cleared: {reply:?}"),
        }
    }
}

/// One line per readiness transition, no more: one `store_unavailable` at warn with a
/// reason from `reasons`, one `store_ready` at info with how long the store was unavailable.
fn assert_transition_lines(server: &TestServer, reasons: &[&str]) {
    let down = log_events(server, "store_unavailable");
    let up = log_events(server, "store_ready");
    assert_eq!((down.len(), up.len()), (1, 1), "{:#?}", server.logs());
    assert_eq!(down[0]["level"], "WARN", "{down:?}");
    let reason = down[0]["reason"].as_str().unwrap_or_default();
    assert!(reasons.contains(&reason), "{down:?}");
    assert_eq!(up[0]["level"], "INFO", "{up:?}");
    assert!(up[0]["unavailableMillis"].is_u64(), "{up:?}");
}

/// The server's JSON log lines whose `event` is `event`.
fn log_events(server: &TestServer, event: &str) -> Vec<Value> {
    server
        .logs()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == event)
        .collect()
}

/// [`log_events`] once at least `count` are printed (the launcher forwards the server's
/// output on a thread, so a line may trail the answer that caused it).
async fn log_events_at_least(server: &TestServer, event: &str, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + POLL_BOUND;
    loop {
        let lines = log_events(server, event);
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "no {event} line: {:#?}",
            server.logs()
        );
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// `lock_store_errors_total` of `route`, every reason (0 before the first error).
fn store_errors(metrics: &str, route: &str) -> f64 {
    sample_sum(metrics, "lock_store_errors_total", &[("route", route)]).unwrap_or(0.0)
}

/// An unlabelled sample's value.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    sample_sum(metrics, name, &[])
}

/// The sum of `name`'s samples whose labels include every pair of `labels`; `None` when no
/// sample matches.
fn sample_sum(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut sum = None;
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let wanted = labels.iter().all(|(k, v)| {
            series_labels
                .split(',')
                .any(|pair| pair == format!("{k}=\"{v}\""))
        });
        if series_name == name && wanted {
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("sample: {line}"));
            sum = Some(sum.unwrap_or(0.0) + value);
        }
    }
    sum
}

/// The exposition reader the checks above rely on, on a fixed text: a labelled counter
/// summed over the labels not asked for, an unlabelled gauge, a series that is absent.
#[test]
fn sample_sum_reads_labelled_and_plain_series() {
    let text = "# TYPE lock_store_errors_total counter\n\
        lock_store_errors_total{route=\"L4\",reason=\"no_quorum\"} 3\n\
        lock_store_errors_total{route=\"L4\",reason=\"unreachable\"} 2\n\
        lock_store_errors_total{route=\"L1\",reason=\"no_quorum\"} 7\n\
        lock_store_ready 0\n\
        lock_store_ready_other 5\n";
    assert_eq!(store_errors(text, "L4"), 5.0);
    assert_eq!(store_errors(text, "L6"), 0.0);
    let l1 = [("route", "L1"), ("reason", "no_quorum")];
    assert_eq!(sample_sum(text, "lock_store_errors_total", &l1), Some(7.0));
    assert_eq!(gauge(text, "lock_store_ready"), Some(0.0));
    assert_eq!(gauge(text, "lock_sessions"), None);
}
