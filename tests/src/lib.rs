//! End-to-end harness: a real `lock-server` process on 127.0.0.1 with a temp data dir.
//!
//! Layout:
//! - [`TestServer`] / [`ServerOptions`] (this file): spawn, kill -9, SIGTERM, restart.
//! - [`client`]: [`client::Api`], a small typed async HTTP client for the surfaces of C3.
//! - [`contract`]: the HTTP contract suite (every surface, every error code, the bad-input
//!   list) as functions taking a `&TestServer`, so any backend can run the same suite.
//! - [`etcd`]: real etcd members/clusters for the etcd backend's tests (kill the leader, ...).
//!
//! The binary is `LOCK_SERVER_BIN` when set, else built once per test process with
//! `cargo build -p lock-server` into the target dir this test binary lives in.

pub mod client;
pub mod contract;
pub mod etcd;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use client::Api;

/// How long a start may take before the harness gives up (generous: CI is slow).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start: backend flags, admin token, extra environment.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// `--admin-token`; `None` leaves R1 disabled.
    pub admin_token: Option<String>,
    /// Extra CLI arguments, e.g. `["--backend", "etcd", "--etcd-endpoints", "..."]`.
    pub extra_args: Vec<String>,
    /// Extra environment variables for the child.
    pub env: Vec<(String, String)>,
}

impl ServerOptions {
    /// Defaults: sqlite backend, no admin token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the admin bearer token.
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// Appends CLI arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds one environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A running lock-server child process. Dropping it kills the child (kill -9).
pub struct TestServer {
    options: ServerOptions,
    data_dir: tempfile::TempDir,
    child: Option<Child>,
    addr: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` with a fresh temp data dir and waits for `/healthz`.
    pub fn start(options: ServerOptions) -> TestServer {
        let data_dir = tempfile::Builder::new()
            .prefix("lock-e2e-")
            .tempdir()
            .expect("temp data dir");
        let mut server = TestServer {
            options,
            data_dir,
            child: None,
            addr: String::new(),
            logs: Arc::new(Mutex::new(Vec::new())),
        };
        server.spawn();
        server
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The data directory, kept across restarts.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// The options the server was started with.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// A typed client for this server (admin token included when configured).
    pub fn api(&self) -> Api {
        Api::new(self.base_url(), self.options.admin_token.clone())
    }

    /// Every stdout/stderr line the server printed so far, across restarts.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// Kills the process with SIGKILL and reaps it (no clean-shutdown marker is written).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits for a graceful exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: kill(2) with a pid we own and have not reaped yet.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the process again on the same data dir (a new port), after [`kill9`] or
    /// [`terminate`]; kills a still-running child first.
    ///
    /// [`kill9`]: TestServer::kill9
    /// [`terminate`]: TestServer::terminate
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Like [`TestServer::restart`] with extra arguments for this start only.
    pub fn restart_with(&mut self, extra: ServerOptions) {
        self.kill9();
        let saved = self.options.clone();
        self.options.extra_args.extend(extra.extra_args);
        self.options.env.extend(extra.env);
        self.spawn();
        self.options = saved;
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(server_binary());
        cmd.arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(token) = &self.options.admin_token {
            cmd.arg("--admin-token").arg(token);
        }
        cmd.args(&self.options.extra_args);
        for (k, v) in &self.options.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn lock-server");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        drain(stderr, self.logs.clone());
        let addr = read_listening_line(stdout, self.logs.clone());
        self.child = Some(child);
        match addr {
            Some(addr) => self.addr = addr,
            None => panic!(
                "lock-server exited before listening; output:\n{}",
                self.logs().join("\n")
            ),
        }
        wait_healthy(&self.addr);
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Reads stdout until the `{"event":"listening","addr":...}` line, then drains the rest in
/// a thread (a full pipe would block the server).
fn read_listening_line(
    stdout: impl Read + Send + 'static,
    logs: Arc<Mutex<Vec<String>>>,
) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut sent = false;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            let trimmed = line.trim_end().to_string();
            if !sent {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&trimmed) {
                    if v["event"] == "listening" {
                        let _ = tx.send(v["addr"].as_str().map(str::to_string));
                        sent = true;
                    }
                }
            }
            logs.lock().unwrap().push(trimmed);
            line.clear();
        }
        if !sent {
            let _ = tx.send(None);
        }
    });
    rx.recv_timeout(START_TIMEOUT).ok().flatten()
}

fn drain(stream: impl Read + Send + 'static, logs: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(line) => logs.lock().unwrap().push(line),
                Err(_) => break,
            }
        }
    });
}

/// Polls `GET /healthz` with a plain std socket (usable from sync and async tests alike).
fn wait_healthy(addr: &str) {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(mut stream) = TcpStream::connect(addr) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            if stream.write_all(req.as_bytes()).is_ok() {
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer);
                if answer.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("lock-server at {addr} never became healthy");
}

/// The lock-server binary: `LOCK_SERVER_BIN`, else `cargo build -p lock-server` once.
pub fn server_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = std::env::var("LOCK_SERVER_BIN") {
            return PathBuf::from(bin);
        }
        // The test binary lives in <target>/<profile>/deps/; the server goes to
        // <target>/<profile>/lock-server.
        let exe = std::env::current_exe().expect("current exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile> dir")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let profile = profile_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "lock-server", "--bin", "lock-server"])
            .env("CARGO_TARGET_DIR", &target_dir);
        if profile == "release" {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "cargo build -p lock-server failed");
        profile_dir.join("lock-server")
    })
    .clone()
}
