//! The compared systems, each started for the bench only on 127.0.0.1 and stopped when its
//! guard drops: lock-server (SQLite or etcd backend, in this process; or the release binary
//! as a child process, for the memory soak), a trivial axum handler
//! serving the same routes (the HTTP ceiling), a thin HTTP proxy over etcd (the ceiling of any
//! HTTP service in front of etcd), `redis-server` in two persistence modes, and a single-node
//! `etcd`.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use serde_json::json;
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;

/// A 2-worker runtime for one in-process server, so each server gets the same threads the
/// real binary would on this 2-core machine.
pub fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Starts lock-server with the SQLite store in `dir` on `rt`; returns its address.
pub fn start_lock_server(rt: &Runtime, dir: &Path) -> SocketAddr {
    start_lock_server_with(rt, dir, &[], None)
}

/// Starts lock-server with the SQLite store in `dir` on `rt`, serving TLS (ALPN `h2` and
/// `http/1.1`) with a self-signed certificate made in `dir`, as `--tls-self-signed` does;
/// returns its address and the certificate (PEM) a client must trust.
pub fn start_lock_server_tls(rt: &Runtime, dir: &Path) -> (SocketAddr, Vec<u8>) {
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let own = lock_server::tls::self_signed(dir, listen).expect("self-signed certificate");
    let acceptor = lock_server::tls::acceptor(&own.cert, &own.key).expect("TLS acceptor");
    let addr = start_lock_server_with(rt, dir, &[], Some(acceptor));
    (
        addr,
        std::fs::read(&own.cert).expect("read the certificate"),
    )
}

/// Starts a lock-server replica on the etcd backend (etcd client at `etcd`) on `rt`.
pub fn start_lock_server_on_etcd(rt: &Runtime, dir: &Path, etcd: SocketAddr) -> SocketAddr {
    let endpoint = format!("http://{etcd}");
    let args = ["--backend", "etcd", "--etcd-endpoints", &endpoint];
    start_lock_server_with(rt, dir, &args, None)
}

fn start_lock_server_with(
    rt: &Runtime,
    dir: &Path,
    extra: &[&str],
    tls: Option<TlsAcceptor>,
) -> SocketAddr {
    // No `--listen`: `spawn_serve` binds a fresh port of its own.
    let mut config =
        lock_server::config::Config::parse_from(std::iter::once(&"lock-server").chain(extra));
    config.data_dir = dir.to_path_buf();
    rt.block_on(async move {
        let store = lock_server::server::open_store(&config)
            .await
            .expect("open store");
        // The shutdown signal never fires: the server lives as long as the bench.
        let (tx, rx) = tokio::sync::watch::channel(false);
        std::mem::forget(tx);
        let state = lock_server::server::app_state(&config, store, rx).expect("app state");
        spawn_serve(lock_server::routes::router(state, &config), tls).await
    })
}

/// Serves as the lock-server binary does (its accept loop, connection bounds, NODELAY), so
/// the two HTTP systems differ only in what their handlers do.
async fn serve(listener: tokio::net::TcpListener, app: Router, tls: Option<TlsAcceptor>) {
    let limits = lock_server::connections::Limits::default();
    lock_server::connections::serve(listener, tls, app, limits, std::future::pending()).await
}

/// Starts a handler that answers L1, L4 and L6 with fixed bodies and does nothing else:
/// the most any HTTP lock service on this stack could do.
pub fn start_trivial(rt: &Runtime) -> SocketAddr {
    rt.block_on(async {
        let app = Router::new()
            .route("/v1/sessions", post(session_opened))
            .route(
                "/v1/locks/{key}/acquire",
                post(
                    |axum::extract::Path(key): axum::extract::Path<String>| async move {
                        Json(json!({"key": key, "sessionId": "s", "fencingToken": 1, "ttlMillis": 10000}))
                    },
                ),
            )
            .route(
                "/v1/locks/{key}/release",
                post(|| async { axum::http::StatusCode::NO_CONTENT }),
            );
        spawn_serve(app, None).await
    })
}

/// Starts the thinnest HTTP lock service over etcd there can be, on `rt`: L1 answers a fixed
/// body, L4 is one put-if-absent txn on a shared lease (token: the txn's revision), L6 one
/// compare-and-delete on that token. No sessions, hints, index or checks: what is left is the
/// HTTP hop, so a replica's throughput over this one's is how close it comes to the best any
/// HTTP front for etcd could do on this stack.
pub fn start_etcd_proxy(rt: &Runtime, etcd: SocketAddr) -> SocketAddr {
    use crate::cycles::{delete_if_token, etcd_with_lease, put_if_absent};
    use axum::extract::{Path as UrlPath, State};

    async fn acquire(
        State((client, lease)): State<(etcd_client::Client, i64)>,
        UrlPath(key): UrlPath<String>,
    ) -> Json<serde_json::Value> {
        let response = client
            .clone()
            .txn(put_if_absent(&key, lease))
            .await
            .expect("proxy txn");
        assert!(response.succeeded(), "proxy put-if-absent");
        let token = response.header().expect("header").revision();
        Json(json!({"key": key, "sessionId": "s", "fencingToken": token, "ttlMillis": 10000}))
    }

    async fn release(
        State((client, _)): State<(etcd_client::Client, i64)>,
        UrlPath(key): UrlPath<String>,
        Json(body): Json<serde_json::Value>,
    ) -> axum::http::StatusCode {
        let token = body["fencingToken"].as_i64().expect("fencingToken");
        let response = client
            .clone()
            .txn(delete_if_token(&key, token))
            .await
            .expect("proxy delete");
        if response.succeeded() {
            axum::http::StatusCode::NO_CONTENT
        } else {
            axum::http::StatusCode::CONFLICT
        }
    }

    rt.block_on(async {
        let (client, lease) = etcd_with_lease(etcd).await;
        let app = Router::new()
            .route("/v1/sessions", post(session_opened))
            .route("/v1/locks/{key}/acquire", post(acquire))
            .route("/v1/locks/{key}/release", post(release))
            .with_state((client, lease));
        spawn_serve(app, None).await
    })
}

/// L1's answer for the trivial handler and the proxy: neither keeps sessions.
async fn session_opened() -> (axum::http::StatusCode, Json<serde_json::Value>) {
    (
        axum::http::StatusCode::CREATED,
        Json(json!({"sessionId": "s", "ttlMillis": 15000, "heartbeatMillis": 5000})),
    )
}

/// Serves `app` on a fresh port of 127.0.0.1 (over TLS with `tls`); returns the address.
async fn spawn_serve(app: Router, tls: Option<TlsAcceptor>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve(listener, app, tls));
    addr
}

/// A child process killed (by its own pid) when dropped.
pub struct Process {
    child: Child,
    /// Where it listens for clients.
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Process {
    /// Its process id (for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1 (bound, read, released; a race with another process taking it
/// in between is possible but harmless: the start then fails loudly).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// Starts the lock-server binary at `binary` as a child process with the SQLite store in a
/// temp dir, on a random 127.0.0.1 port; its logs go nowhere (stderr is kept, so a failed
/// start says why).
pub fn start_lock_server_process(binary: &Path) -> Process {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let child = Command::new(binary)
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
    wait_for_port(addr);
    Process {
        child,
        addr,
        _dir: dir,
    }
}

/// Redis persistence mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisMode {
    /// No RDB snapshots, no AOF: memory only.
    NoPersistence,
    /// AOF with `appendfsync always`: an fsync before every write is acknowledged.
    FsyncAlways,
}

/// Starts `redis-server` on a random 127.0.0.1 port in a temp dir.
pub fn start_redis(mode: RedisMode) -> Process {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--protected-mode", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir.path());
    match mode {
        RedisMode::NoPersistence => cmd.args(["--appendonly", "no"]),
        RedisMode::FsyncAlways => cmd.args(["--appendonly", "yes", "--appendfsync", "always"]),
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server (apt-get install -y redis-server)");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_for_port(addr);
    Process {
        child,
        addr,
        _dir: dir,
    }
}

/// Starts a single-node `/usr/bin/etcd` on random 127.0.0.1 ports in a temp dir.
pub fn start_etcd() -> Process {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, peer) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log");
    let child = Command::new("/usr/bin/etcd")
        .args(["--name", "bench"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("bench={peer_url}")])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log)
        .spawn()
        .expect("spawn /usr/bin/etcd");
    let addr = SocketAddr::from(([127, 0, 0, 1], client));
    wait_for_port(addr);
    Process {
        child,
        addr,
        _dir: dir,
    }
}

fn wait_for_port(addr: SocketAddr) {
    let until = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < until, "{addr} did not open within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}
