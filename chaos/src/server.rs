//! A lock-server child process on a FIXED port, so contender processes keep one base URL
//! across kill -9 restarts (the e2e harness picks a new port per start, which suits tests
//! but not a fleet of separate processes).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a (re)start may take before giving up (generous: 2 cores, many processes).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running lock-server. Dropping it kills the child.
pub struct ServerProcess {
    bin: PathBuf,
    port: u16,
    data_dir: PathBuf,
    extra_args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    /// Number of kill -9 restarts so far.
    pub restarts: usize,
}

impl ServerProcess {
    /// Starts `bin` on a free 127.0.0.1 port with `data_dir`; output is appended to `log`.
    pub fn start(
        bin: &Path,
        data_dir: &Path,
        extra_args: Vec<String>,
        log: &Path,
    ) -> std::io::Result<ServerProcess> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = ServerProcess {
            bin: bin.to_owned(),
            port,
            data_dir: data_dir.to_owned(),
            extra_args,
            log: log.to_owned(),
            child: None,
            restarts: 0,
        };
        server.spawn()?;
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The child's pid, if running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Resident set size of the child in KiB (from `/proc/PID/status`).
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid()?)
    }

    /// SIGKILL, reap, start again on the same port and data dir, wait until healthy.
    pub fn kill9_and_restart(&mut self) -> std::io::Result<()> {
        self.kill9();
        self.restarts += 1;
        self.spawn()
    }

    /// SIGKILL and reap (no clean-shutdown marker).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.bin)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.extra_args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        self.wait_healthy()
    }

    fn wait_healthy(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(std::io::Error::other(format!(
                    "lock-server exited with {status}; see {}",
                    self.log.display()
                )));
            }
            if http_get_status(&format!("127.0.0.1:{}", self.port), "/healthz") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::other("lock-server never became healthy"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `VmRSS` of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A plain-socket `GET` returning the status code (None if the server is not answering).
pub fn http_get_status(addr: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).ok()?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.get(9..12)?.parse().ok()
}

/// The lock-server binary: `LOCK_SERVER_BIN`, else next to the running executable (or one
/// directory up, for test binaries in `deps/`), else built with `cargo build -p lock-server`.
pub fn server_binary() -> PathBuf {
    binary_named("lock-server", "lock-server")
}

/// The contender binary: `CHAOS_CONTENDER_BIN`, else next to the running executable, else
/// built with `cargo build -p lock-chaos --bin contender`.
pub fn contender_binary() -> PathBuf {
    binary_named("contender", "lock-chaos")
}

fn binary_named(name: &str, package: &str) -> PathBuf {
    let var = match name {
        "lock-server" => "LOCK_SERVER_BIN",
        _ => "CHAOS_CONTENDER_BIN",
    };
    if let Ok(bin) = std::env::var(var) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("exe dir");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().expect("profile dir")
    } else {
        dir
    };
    let candidate = profile_dir.join(name);
    // Test binaries always rebuild, so a stale sibling binary is never used by tests.
    if candidate.exists() && !dir.ends_with("deps") {
        return candidate;
    }
    let target_dir = profile_dir.parent().expect("target dir");
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name])
        .env("CARGO_TARGET_DIR", target_dir);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {name} failed"
    );
    candidate
}
