//! L2's answer with many locks: one session holds `--heartbeat-locks` locks on the in-process
//! SQLite lock-server, and its heartbeat is answered as a full list (no `since`, as before
//! versions), as "unchanged" (`since` = the current version) and as a delta (one grant and
//! one release since the client's version). Bytes and time of each, side by side.

use std::time::{Duration, Instant};

use lock_api::{paths, HeartbeatResponse};
use serde_json::{json, Value};

use super::{Context, Measured, Section};
use crate::stats::quantile;
use crate::systems;

/// The section.
pub const SECTION: Section = Section {
    title: "Heartbeat answer with many locks (L2 versions)",
    measure,
};

/// Heartbeats timed per shape.
const ROUNDS: usize = 20;
/// L4s in flight while the session takes its locks.
const IN_FLIGHT: usize = 32;

/// One shape's figures: answer bytes, and the median and p90 time of a heartbeat.
struct Figures {
    bytes: usize,
    median: Duration,
    p90: Duration,
}

fn measure(ctx: &Context) -> Measured {
    let locks = ctx.settings.heartbeat_locks;
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = systems::runtime("lock-server");
    let client_rt = systems::runtime("client");
    let addr = systems::start_lock_server(&server_rt, dir.path());
    let base = format!("http://{addr}");
    let [full, unchanged, delta] = client_rt.block_on(run(&base, locks));
    let row = |name: &str, f: &Figures| {
        format!(
            "| {name} | {} | {:.2} | {:.2} | {:.4} | {:.4} |\n",
            f.bytes,
            ms(f.median),
            ms(f.p90),
            f.bytes as f64 / full.bytes as f64,
            ms(f.median) / ms(full.median),
        )
    };
    let mut body = format!(
        "One session holds {locks} locks on the SQLite backend (in process, loopback HTTP/1.1); \
         its L2 is sent {ROUNDS} times per shape, one at a time. Machine: {}.\n\n\
         | answer | bytes | median ms | p90 ms | bytes ÷ full | time ÷ full |\n\
         |---|---:|---:|---:|---:|---:|\n",
        ctx.machine
    );
    body.push_str(&row("full list (no `since`, as before versions)", &full));
    body.push_str(&row("unchanged (`since` = current version)", &unchanged));
    body.push_str(&row("delta (one grant, one release since)", &delta));
    body.push_str(
        "\nThe time left in the unchanged and delta answers is the renewal itself: every \
         heartbeat still moves the deadline of each of the session's locks (one indexed \
         UPDATE over its rows). On etcd only \"unchanged\" is small; every other answer is \
         the full list, and the heartbeat reads and rewrites every hold as before.\n",
    );
    println!("\n## {}\n{body}", SECTION.title);
    Measured {
        body,
        rows: Vec::new(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// Takes the locks, then times each shape.
async fn run(base: &str, locks: usize) -> [Figures; 3] {
    let http = reqwest::Client::new();
    let opened: Value = post(
        &http,
        &format!("{base}{}", paths::SESSIONS),
        json!({"ttlMillis": 300_000}),
    )
    .await
    .1;
    let id = opened["sessionId"].as_str().expect("sessionId").to_owned();
    let holder_id = opened["holderId"].as_str().expect("holderId");
    let mut takers = tokio::task::JoinSet::new();
    for worker in 0..IN_FLIGHT {
        let (http, id, base) = (http.clone(), id.clone(), base.to_owned());
        takers.spawn(async move {
            for n in (worker..locks).step_by(IN_FLIGHT) {
                let url = format!("{base}{}", paths::acquire(&format!("hb/{n}")));
                let body = json!({"sessionId": id, "ttlMillis": 300_000});
                let (status, _) = post(&http, &url, body).await;
                assert_eq!(status, 200, "L4 of hb/{n}");
            }
        });
    }
    while let Some(done) = takers.join_next().await {
        done.expect("a taker");
    }
    let beat_url = format!("{base}{}", paths::heartbeat(holder_id));
    let full = time(ROUNDS, || async {
        let (bytes, answer) = beat(&http, (&beat_url, &id), None).await;
        assert_eq!(answer.locks.map(|l| l.len()), Some(locks));
        bytes
    })
    .await;
    let (_, first) = beat(&http, (&beat_url, &id), None).await;
    let version = first.version.expect("a version");
    let unchanged = time(ROUNDS, || async {
        let (bytes, answer) = beat(&http, (&beat_url, &id), Some(&version)).await;
        assert!(answer.locks.is_none() && answer.changes.is_none());
        bytes
    })
    .await;
    let mut since = version;
    let mut delta = Vec::new();
    for round in 0..ROUNDS {
        // One grant and one release the client did not see since its version.
        let key = format!("hb/extra-{round}");
        let body = json!({"sessionId": id, "ttlMillis": 300_000});
        let (_, grant) = post(&http, &format!("{base}{}", paths::acquire(&key)), body).await;
        let token = grant["fencingToken"].as_u64().expect("token");
        let release = json!({"fencingToken": token});
        post(&http, &format!("{base}{}", paths::release(&key)), release).await;
        let start = Instant::now();
        let (bytes, answer) = beat(&http, (&beat_url, &id), Some(&since)).await;
        delta.push((start.elapsed(), bytes));
        assert_eq!(
            answer.changes.map(|c| c.len()),
            Some(1),
            "the key's latest state"
        );
        since = answer.version.expect("a version");
    }
    [full, unchanged, figures(delta)]
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let reply = http.post(url).json(&body).send().await.expect("request");
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

/// One L2 with `since`; the answer's size in bytes and the answer.
async fn beat(
    http: &reqwest::Client,
    (url, session_id): (&str, &str),
    since: Option<&str>,
) -> (usize, HeartbeatResponse) {
    let mut request = http.post(url).header(paths::SESSION_ID_HEADER, session_id);
    if let Some(since) = since {
        request = request.json(&json!({ "since": since }));
    }
    let reply = request.send().await.expect("L2");
    assert_eq!(reply.status().as_u16(), 200);
    let bytes = reply.bytes().await.expect("L2 body");
    (
        bytes.len(),
        serde_json::from_slice(&bytes).expect("L2 answer"),
    )
}

/// Runs `once` `rounds` times, timing each.
async fn time<F, Fut>(rounds: usize, mut once: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        let bytes = once().await;
        samples.push((start.elapsed(), bytes));
    }
    figures(samples)
}

fn figures(samples: Vec<(Duration, usize)>) -> Figures {
    let bytes = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let mut times: Vec<f64> = samples.iter().map(|s| ms(s.0)).collect();
    times.sort_by(f64::total_cmp);
    Figures {
        bytes,
        median: Duration::from_secs_f64(quantile(&times, 0.5).unwrap_or(0.0) / 1_000.0),
        p90: Duration::from_secs_f64(quantile(&times, 0.9).unwrap_or(0.0) / 1_000.0),
    }
}
