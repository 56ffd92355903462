//! Bench (not a test): acquire+release cycles from 50 concurrent clients against the real
//! lock-server (SQLite store, in this process) and against a trivial axum handler serving the
//! same two routes, one after the other, on 127.0.0.1. Prints throughput, acquire p50/p99 and
//! the ratio. Run: `cargo bench -p lock-server --bench acquire` (`BENCH_SECONDS`, default 5).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use lock_server::config::Config;
use serde_json::{json, Value};
use tokio::runtime::Runtime;

const CLIENTS: usize = 50;

fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

fn start_lock_server(rt: &Runtime, dir: &std::path::Path) -> SocketAddr {
    let mut config = Config::parse_from(["lock-server", "--listen", "127.0.0.1:0"]);
    config.data_dir = dir.to_path_buf();
    rt.block_on(async move {
        let store = lock_server::store::open(&config).await.unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(false);
        std::mem::forget(_tx);
        let state = lock_server::server::app_state(&config, store, rx);
        let app = lock_server::routes::router(state, &config);
        let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    })
}

fn start_trivial(rt: &Runtime) -> SocketAddr {
    rt.block_on(async {
        let app = Router::new()
            .route(
                "/v1/sessions",
                post(|| async {
                    (
                        axum::http::StatusCode::CREATED,
                        Json(json!({"sessionId": "s", "ttlMillis": 15000, "heartbeatMillis": 5000})),
                    )
                }),
            )
            .route(
                "/v1/locks/{key}/acquire",
                post(|axum::extract::Path(key): axum::extract::Path<String>| async move {
                    Json(json!({"key": key, "sessionId": "s", "fencingToken": 1, "ttlMillis": 10000}))
                }),
            )
            .route(
                "/v1/locks/{key}/release",
                post(|| async { axum::http::StatusCode::NO_CONTENT }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    })
}

struct Result {
    cycles: usize,
    elapsed: Duration,
    acquire_latencies: Vec<Duration>,
}

async fn client(
    base: Arc<str>,
    http: reqwest::Client,
    n: usize,
    until: Instant,
) -> (usize, Vec<Duration>) {
    let session: Value = http
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"ttlMillis": 60000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    let key = format!("bench-{n}");
    let (mut cycles, mut lat) = (0, Vec::new());
    while Instant::now() < until {
        let t = Instant::now();
        let grant: Value = http
            .post(format!("{base}/v1/locks/{key}/acquire"))
            .json(&json!({"sessionId": id, "ttlMillis": 10000}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        lat.push(t.elapsed());
        let token = grant["fencingToken"].as_u64().expect("granted");
        let status = http
            .post(format!("{base}/v1/locks/{key}/release"))
            .json(&json!({"fencingToken": token}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 204);
        cycles += 1;
    }
    (cycles, lat)
}

fn drive(rt: &Runtime, addr: SocketAddr, seconds: u64) -> Result {
    rt.block_on(async move {
        let base: Arc<str> = Arc::from(format!("http://{addr}"));
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(CLIENTS)
            .build()
            .unwrap();
        let start = Instant::now();
        let until = start + Duration::from_secs(seconds);
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|n| tokio::spawn(client(base.clone(), http.clone(), n, until)))
            .collect();
        let mut result = Result {
            cycles: 0,
            elapsed: Duration::ZERO,
            acquire_latencies: Vec::new(),
        };
        for t in tasks {
            let (c, l) = t.await.unwrap();
            result.cycles += c;
            result.acquire_latencies.extend(l);
        }
        result.elapsed = start.elapsed();
        result
    })
}

fn report(name: &str, r: &mut Result) -> f64 {
    r.acquire_latencies.sort_unstable();
    let q = |p: f64| {
        let i = ((r.acquire_latencies.len() as f64 - 1.0) * p).round() as usize;
        r.acquire_latencies[i].as_secs_f64() * 1000.0
    };
    let rate = r.cycles as f64 / r.elapsed.as_secs_f64();
    println!(
        "{name:<14} {rate:>9.0} cycles/s  acquire p50 {:>6.2} ms  p99 {:>6.2} ms  ({} cycles)",
        q(0.50),
        q(0.99),
        r.cycles
    );
    rate
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    // Log as the binary does (JSON, info), into a sink, so formatting cost is counted.
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::sink)
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .init();
    let dir = tempfile::tempdir().unwrap();
    let server_rt = runtime("lock-server");
    let trivial_rt = runtime("trivial");
    let client_rt = runtime("client");
    let lock_addr = start_lock_server(&server_rt, dir.path());
    let trivial_addr = start_trivial(&trivial_rt);
    println!("{CLIENTS} clients, {seconds} s each, acquire+release cycles on 127.0.0.1");
    let mut trivial = drive(&client_rt, trivial_addr, seconds);
    let mut lock = drive(&client_rt, lock_addr, seconds);
    let base = report("trivial axum", &mut trivial);
    let real = report("lock-server", &mut lock);
    println!("ratio lock-server / trivial: {:.2}", real / base);
}
