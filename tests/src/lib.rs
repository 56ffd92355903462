//! End-to-end harness: a real `lock-server` process on 127.0.0.1 with a temp data dir.
//!
//! Layout:
//! - [`TestServer`] / [`ServerOptions`] (this file): a server for one test, on a temp data
//!   dir, with the admin token its [`Api`] needs.
//! - [`launcher`]: the one way anything in the workspace (tests, chaos runs) starts a
//!   lock-server process: spawn, `listening` line, `/healthz`, kill -9, SIGTERM, restart.
//! - [`client`]: [`client::Api`], a small typed async HTTP client for the surfaces of C3.
//! - [`auth_contract`]: the authentication and authorisation rules (auth file, key scopes,
//!   session ownership, holder ids, protected mode), likewise for any backend.
//! - [`tls`]: a test CA and server certificate, TLS clients that trust only it, raw
//!   connections (plain or TLS) for hand-written requests.
//! - [`raw_h2`]: HTTP/2 frames written and read by hand, for a client that breaks the
//!   rules a well-behaved HTTP/2 library keeps (more streams than allowed, unanswered pings).
//! - [`contract`]: the HTTP contract suite (every surface, every error code, the bad-input
//!   list) as functions taking a `&TestServer`, so any backend can run the same suite.
//! - [`heartbeat_versions`]: L2's versions (no list when nothing changed, the changes, or
//!   the full list; exact after every answer), likewise for any backend.
//! - [`queue`]: the wait queue's rules as functions over the replicas of one deployment, so
//!   every backend (and several etcd replicas) runs the same checks.
//! - [`shared_holds`]: shared holds (read-write locks, semaphores) on the same queue, as
//!   functions over the replicas of one deployment, like [`queue`].
//! - [`watch`]: L8 (a key's events, SSE and long poll) and L9 (a hold's value), as functions
//!   over a watching and a changing endpoint of one deployment, so every backend (and two
//!   etcd replicas) runs the same checks; the process-level ones take a [`TestServer`].
//! - [`store_faults`]: a disk that fills on demand (a tmpfs the test mounts, a ballast file).
//! - [`backup`]: the `lock-server` subcommands an operator runs around a server (`backup`,
//!   `restore`, `etcd-restored`), as processes, with their exit status and output.
//! - [`etcd`]: real etcd members/clusters for the etcd backend's tests (kill the leader, ...).
//! - [`etcd_faults`]: store faults of a real etcd on top of [`etcd`]: quorum lost and
//!   restored, a backend over its quota (NOSPACE) and the operator's fix.
//!
//! The binary is `LOCK_SERVER_BIN` when set, else `target/<profile>/lock-server` of the target
//! dir this test binary lives in, built first with `cargo build -p lock-server` only when it
//! is missing or older than its sources ([`launcher::server_binary`]).

pub mod auth_contract;
pub mod backup;
pub mod client;
pub mod contract;
pub mod etcd;
pub mod etcd_faults;
pub mod etcd_secure;
pub mod heartbeat_versions;
pub mod launcher;
pub mod nginx;
pub mod queue;
pub mod raw_h2;
pub mod shared_holds;
pub mod store_faults;
pub mod tls;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use client::Api;
use launcher::{server_binary, Launch, ServerProcess};
use tls::TestPki;

/// The certificate file `--tls-self-signed` writes into the data dir (C5).
pub const SELF_SIGNED_CERT_FILE: &str = "self-signed-cert.pem";

/// Plain HTTP, or TLS with which certificate.
#[derive(Debug, Clone, Default)]
pub enum Tls {
    #[default]
    Off,
    /// `--tls-cert`/`--tls-key` from a test CA.
    Pki(Arc<TestPki>),
    /// `--tls-self-signed`: the server's own certificate in its data dir is the CA.
    SelfSigned,
}

/// What to start: backend flags, admin token, TLS, extra environment.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// `--admin-token`; `None` leaves R1 disabled.
    pub admin_token: Option<String>,
    /// Extra CLI arguments, e.g. `["--backend", "etcd", "--etcd-endpoints", "..."]`.
    pub extra_args: Vec<String>,
    /// Extra environment variables for the child.
    pub env: Vec<(String, String)>,
    /// Plain HTTP (default) or TLS.
    pub tls: Tls,
    /// Restarts listen on the first start's port (a client with a fixed URL follows).
    pub keep_port: bool,
}

impl ServerOptions {
    /// Defaults: sqlite backend, no admin token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Restarts keep the first start's port.
    pub fn keep_port(mut self) -> Self {
        self.keep_port = true;
        self
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

    /// Serves TLS (see [`Tls`]).
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = tls;
        self
    }
}

/// A fresh temp directory for a server's data.
pub fn temp_data_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lock-e2e-")
        .tempdir()
        .expect("temp data dir")
}

/// A running lock-server for one test, on its own temp data dir (kept across restarts).
/// Dropping it kills the process (kill -9). Every start or restart that fails panics with
/// the server's output.
pub struct TestServer {
    options: ServerOptions,
    process: ServerProcess,
    // Dropped after the process: the directory outlives the server using it.
    data_dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` with a fresh temp data dir and waits for `/healthz`.
    pub fn start(options: ServerOptions) -> TestServer {
        TestServer::start_in(options, temp_data_dir())
    }

    /// Starts a server on a data dir prepared beforehand (e.g. by `lock-server restore`).
    pub fn start_in(options: ServerOptions, data_dir: tempfile::TempDir) -> TestServer {
        let mut launch = Launch::new(&server_binary(), data_dir.path());
        if let Some(token) = &options.admin_token {
            launch = launch.args(["--admin-token", token.as_str()]);
        }
        launch = match &options.tls {
            Tls::Off => launch,
            Tls::Pki(pki) => launch.args(pki.server_args()).tls_ca(&pki.ca),
            Tls::SelfSigned => launch
                .args(["--tls-self-signed"])
                .tls_ca(&data_dir.path().join(SELF_SIGNED_CERT_FILE)),
        };
        launch = launch.args(options.extra_args.iter().cloned());
        for (key, value) in &options.env {
            launch = launch.env(key.as_str(), value.as_str());
        }
        if options.keep_port {
            launch = launch.keep_port();
        }
        let process = launch.start().unwrap_or_else(|e| panic!("{e}"));
        TestServer {
            options,
            process,
            data_dir,
        }
    }

    /// `http://127.0.0.1:PORT`, or `https://` for TLS (no trailing slash).
    pub fn base_url(&self) -> String {
        self.process.base_url()
    }

    /// The bound `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        self.process.addr()
    }

    /// The data directory, kept across restarts.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// The options the server was started with.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// The CA a TLS server's certificate is checked against; `None` for plain HTTP.
    pub fn tls_ca(&self) -> Option<PathBuf> {
        self.process.tls_ca().map(Path::to_owned)
    }

    /// A reqwest client for this server (trusting its CA on TLS) keeping up to `idle` idle
    /// connections (see [`client::http_client`]).
    pub fn http(&self, idle: usize) -> reqwest::Client {
        client::http_client(self.tls_ca().as_deref(), idle)
    }

    /// A typed client for this server (admin token included when configured).
    pub fn api(&self) -> Api {
        self.api_with(self.http(client::POOL))
    }

    /// A typed client for this server over `http`.
    pub fn api_with(&self, http: reqwest::Client) -> Api {
        Api::with_client(self.base_url(), self.options.admin_token.clone(), http)
    }

    /// A blocking raw connection (TLS with ALPN `alpn` when the server serves TLS).
    pub fn connect_raw(&self, alpn: &[&[u8]]) -> std::io::Result<tls::RawConn> {
        tls::RawConn::connect(self.addr(), self.tls_ca().as_deref(), alpn)
    }

    /// Every stdout/stderr line the server printed so far, across restarts.
    pub fn logs(&self) -> Vec<String> {
        self.process.logs()
    }

    /// Sends SIGHUP: the server re-reads its auth file.
    pub fn hangup(&self) {
        self.process.hangup();
    }

    /// Kills the process with SIGKILL and reaps it (no clean-shutdown marker is written).
    pub fn kill9(&mut self) {
        self.process.kill9();
    }

    /// Sends SIGTERM and waits for a graceful exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        self.process.terminate()
    }

    /// Starts the process again on the same data dir (a new port), after [`kill9`] or
    /// [`terminate`]; kills a still-running child first.
    ///
    /// [`kill9`]: TestServer::kill9
    /// [`terminate`]: TestServer::terminate
    pub fn restart(&mut self) {
        self.process.restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Like [`TestServer::restart`] with extra arguments for this start only.
    pub fn restart_with(&mut self, extra: ServerOptions) {
        self.process
            .restart_with(&extra.extra_args, &extra.env)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
