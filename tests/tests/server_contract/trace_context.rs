//! A request's W3C `traceparent` reaches the server's JSON log lines for that request as
//! `traceId` (C4), against a real server process whose stdout the launcher collects; a
//! request without one, or with a malformed, oversized or repeated one, logs no `traceId`
//! and gets its ordinary answer, and no log line repeats the header.

use std::time::{Duration, Instant};

use lock_api::paths;
use lock_e2e::{ServerOptions, TestServer};
use serde_json::{json, Value};

const TRACE_A: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACE_B: &str = "0af7651916cd43dd8448eb211c80319c";

fn traceparent(trace_id: &str) -> String {
    format!("00-{trace_id}-00f067aa0ba902b7-01")
}

/// The server's JSON log lines with `event` for `key`, once `count` of them are printed
/// (the launcher forwards stdout on a thread, so a line may trail its answer).
fn lines_for(server: &TestServer, event: &str, key: &str, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines: Vec<Value> = server
            .logs()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["event"] == event && line["key"] == key)
            .collect();
        if lines.len() >= count || Instant::now() > deadline {
            assert_eq!(lines.len(), count, "{event} lines for {key}: {lines:?}");
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_puts_its_trace_id_into_that_requests_log_lines() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let holder = api.open_session(60_000).await.session_id;
    let waiter = api.open_session(60_000).await.session_id;
    let key = "traced/ü key";
    let acquire = |session: &str| {
        Some(
            json!({ "sessionId": session, "ttlMillis": 60_000 })
                .to_string()
                .into_bytes(),
        )
    };
    let (tp_a, tp_b) = (traceparent(TRACE_A), traceparent(TRACE_B));
    // 8 KiB: a valid start, then a tail version 00 forbids; it must not reach the log.
    let oversized = format!("{tp_b}-{}", "x".repeat(8 * 1024));

    let granted = api
        .raw(
            "POST",
            &paths::acquire(key),
            acquire(&holder),
            &[("traceparent", tp_a.as_str())],
        )
        .await;
    assert_eq!(granted.status, 200, "{granted:?}");
    // The same key refused five times: traced by B, then untraced, malformed, oversized,
    // repeated.
    let refusals: [&[(&str, &str)]; 5] = [
        &[("traceparent", tp_b.as_str())],
        &[],
        &[("traceparent", "00-not-a-trace-01\"}")],
        &[("traceparent", oversized.as_str())],
        &[
            ("traceparent", tp_b.as_str()),
            ("traceparent", tp_a.as_str()),
        ],
    ];
    for headers in refusals {
        let refused = api
            .raw("POST", &paths::acquire(key), acquire(&waiter), headers)
            .await;
        assert_eq!(refused.status, 409, "{refused:?}");
    }

    let granted = lines_for(&server, "lock_granted", key, 1);
    assert_eq!(granted[0]["traceId"], TRACE_A, "{granted:?}");
    let contention = lines_for(&server, "contention", key, 5);
    assert_eq!(contention[0]["traceId"], TRACE_B, "{contention:?}");
    for line in &contention[1..] {
        assert!(
            line.get("traceId").is_none(),
            "no valid traceparent: {line}"
        );
    }
    // Lines of other requests (the sessions opened untraced, start-up) carry none.
    let traced = server
        .logs()
        .iter()
        .filter(|line| line.contains("\"traceId\""))
        .count();
    assert_eq!(traced, 2, "{:#?}", server.logs());
    let echoed = server
        .logs()
        .iter()
        .filter(|line| line.contains("xxxxxxxx") || line.contains("not-a-trace"))
        .count();
    assert_eq!(echoed, 0, "a traceparent value is never logged");
}
