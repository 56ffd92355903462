//! Benchmark (not a test): acquire+release cycles through a lock-server replica on the etcd
//! backend vs raw etcd-client txn+delete cycles on the same etcd member, same run,
//! alternating rounds so drift hits both sides alike.
//!
//! `cargo bench -p lock-server --bench etcd_vs_raw` (env `BENCH_SECS`, default 5 s per
//! window; `BENCH_ROUNDS`, default 3; `BENCH_CONCURRENCY`, default 16). Prints a Markdown
//! table for docs/BENCHMARKS.md. etcd's data dir is on the real disk (the system temp dir),
//! as in production: fsync is what an etcd write costs.

#[allow(dead_code)]
#[path = "../../tests/src/etcd.rs"]
mod etcd_harness;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use etcd_harness::EtcdCluster;
use serde_json::{json, Value};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A lock-server replica on the etcd member; killed on drop.
struct Replica {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_replica(endpoints: &str) -> Replica {
    let data = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lock-server"))
        .args(["--listen", "127.0.0.1:0", "--backend", "etcd"])
        .arg("--data-dir")
        .arg(data.path())
        .args(["--etcd-endpoints", endpoints, "--etcd-prefix", "/bench/"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn lock-server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("listening line").expect("stdout");
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if v["event"] == "listening" {
                break v["addr"].as_str().unwrap().to_owned();
            }
        }
    };
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Replica {
        child,
        base: format!("http://{addr}"),
        _data: data,
    }
}

/// One raw cycle: the same shape as L4+L6 minus everything lock-server adds: a txn that puts
/// the key with a lease if absent, then a delete.
async fn raw_cycles(mut client: Client, key: String, lease: i64, until: Instant) -> u64 {
    let mut cycles = 0;
    while Instant::now() < until {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                key.clone(),
                "holder",
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let response = client.txn(txn).await.expect("raw txn");
        assert!(response.succeeded());
        client.delete(key.clone(), None).await.expect("raw delete");
        cycles += 1;
    }
    cycles
}

/// One server cycle: L4 acquire then L6 release, over HTTP.
async fn server_cycles(
    http: reqwest::Client,
    base: Arc<String>,
    key: String,
    until: Instant,
) -> u64 {
    let opened: Value = http
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"ttlMillis": 60_000}))
        .send()
        .await
        .expect("L1")
        .json()
        .await
        .expect("L1 body");
    let session = opened["sessionId"].as_str().unwrap().to_owned();
    let mut cycles = 0;
    while Instant::now() < until {
        let grant: Value = http
            .post(format!("{base}/v1/locks/{key}/acquire"))
            .json(&json!({"sessionId": session, "ttlMillis": 10_000}))
            .send()
            .await
            .expect("L4")
            .json()
            .await
            .expect("L4 body");
        let token = grant["fencingToken"].as_u64().expect("granted");
        let status = http
            .post(format!("{base}/v1/locks/{key}/release"))
            .json(&json!({"fencingToken": token, "sessionId": session}))
            .send()
            .await
            .expect("L6")
            .status();
        assert_eq!(status.as_u16(), 204);
        cycles += 1;
    }
    cycles
}

async fn measure_raw(client: &Client, lease: i64, clients: usize, window: Duration) -> f64 {
    let until = Instant::now() + window;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            tokio::spawn(raw_cycles(
                client.clone(),
                format!("/raw/k{i}"),
                lease,
                until,
            ))
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / window.as_secs_f64()
}

async fn measure_server(base: &str, clients: usize, window: Duration) -> f64 {
    let http = reqwest::Client::new();
    let base = Arc::new(base.to_owned());
    let until = Instant::now() + window;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            tokio::spawn(server_cycles(
                http.clone(),
                base.clone(),
                format!("k{i}"),
                until,
            ))
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / window.as_secs_f64()
}

fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let window = Duration::from_secs(env_or("BENCH_SECS", 5));
    let rounds = env_or("BENCH_ROUNDS", 3) as usize;
    let concurrency = env_or("BENCH_CONCURRENCY", 16) as usize;
    let etcd = EtcdCluster::start_in(1, &std::env::temp_dir());
    let replica = start_replica(&etcd.endpoints_arg());
    let client = Client::connect(etcd.endpoints(), None)
        .await
        .expect("raw client");
    let lease = client
        .clone()
        .lease_grant(600, None)
        .await
        .expect("lease")
        .id();

    println!("| clients | raw etcd cycles/s (median, min–max) | via lock-server cycles/s (median, min–max) | ratio (median) |");
    println!("|---|---|---|---|");
    for clients in [1, concurrency] {
        let (mut raw, mut server) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            raw.push(measure_raw(&client, lease, clients, window).await);
            server.push(measure_server(&replica.base, clients, window).await);
        }
        let (r, r_min, r_max) = spread(&raw);
        let (s, s_min, s_max) = spread(&server);
        println!(
            "| {clients} | {r:.0} ({r_min:.0}–{r_max:.0}) | {s:.0} ({s_min:.0}–{s_max:.0}) | {:.2}× |",
            s / r
        );
    }
}
