//! The one way tests, chaos runs and tools start a real `lock-server` process: spawn the
//! binary on 127.0.0.1 (or [`Launch::host`]), read its `{"event":"listening","addr":...}`
//! line, wait for `/healthz`; then kill -9, SIGTERM, SIGHUP or restart it on the same data
//! directory.
//!
//! The first start always listens on port 0, so the kernel picks a free port and no other
//! process can take it first. A restart takes a new port, unless [`Launch::keep_port`] asked
//! to keep the first one (separate processes that only know the base URL, as a chaos run's
//! contenders, must find the server again).
//!
//! Output (stdout and stderr, one entry per line) is kept in memory for [`ServerProcess::logs`],
//! or appended to a file with [`Launch::log_file`] (long runs, where memory would grow).
//!
//! Every wait here has a bound (start, health probe, SIGTERM, reaping after SIGKILL, a
//! fallback build): a process that never answers or never dies fails the caller with a
//! message instead of hanging the suite.
//!
//! A server started with TLS flags says `"scheme":"https"` in its `listening` line; the
//! health check then goes over TLS and trusts only [`Launch::tls_ca`].

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a start may take before the launcher gives up (generous: 2 cores, many
/// processes, debug builds).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a graceful stop (SIGTERM) may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a process may take to end after SIGKILL. It cannot refuse the signal, but one in
/// uninterruptible I/O ends only when that I/O returns.
const REAP_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound on a fallback `cargo build` (a cold build of the chaos binaries on 2 cores takes
/// several minutes; a build waiting on another cargo's lock would otherwise wait forever).
const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How often the bounded waits poll a child process.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// What to start: the binary, its data dir, flags and environment, port and output policy.
#[derive(Debug, Clone)]
pub struct Launch {
    bin: PathBuf,
    data_dir: PathBuf,
    host: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    keep_port: bool,
    log_file: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
}

impl Launch {
    /// `bin` with `--data-dir data_dir`, logs at `info`, output kept in memory.
    pub fn new(bin: &Path, data_dir: &Path) -> Launch {
        Launch {
            bin: bin.to_owned(),
            data_dir: data_dir.to_owned(),
            host: "127.0.0.1".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            keep_port: false,
            log_file: None,
            tls_ca: None,
        }
    }

    /// The CA certificate (PEM) a TLS server's certificate is checked against; it may be
    /// written by the server itself (`--tls-self-signed`) before it listens.
    pub fn tls_ca(mut self, path: &Path) -> Launch {
        self.tls_ca = Some(path.to_owned());
        self
    }

    /// Appends command-line arguments.
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable of the child (`RUST_LOG` overrides the default `info`).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Launch {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Listens on `host` (an IP address) instead of 127.0.0.1; the port is still picked by
    /// the kernel.
    pub fn host(mut self, host: &str) -> Launch {
        self.host = host.to_owned();
        self
    }

    /// Restarts listen on the port the first start got.
    pub fn keep_port(mut self) -> Launch {
        self.keep_port = true;
        self
    }

    /// Appends the output to `path` instead of keeping it in memory.
    pub fn log_file(mut self, path: &Path) -> Launch {
        self.log_file = Some(path.to_owned());
        self
    }

    /// Starts the process and waits until it is healthy.
    pub fn start(self) -> std::io::Result<ServerProcess> {
        let mut server = ServerProcess {
            launch: self,
            child: None,
            addr: String::new(),
            scheme: Scheme::Http,
            lines: Arc::new(Mutex::new(Vec::new())),
            restarts: 0,
        };
        server.spawn(&[], &[])?;
        Ok(server)
    }
}

/// A running lock-server. Dropping it kills the process (kill -9).
pub struct ServerProcess {
    launch: Launch,
    child: Option<Child>,
    /// `127.0.0.1:PORT` of the current (or last) start.
    addr: String,
    scheme: Scheme,
    lines: Arc<Mutex<Vec<String>>>,
    restarts: usize,
}

impl ServerProcess {
    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://…` for a TLS server (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.addr)
    }

    /// The CA to trust for a TLS server ([`Launch::tls_ca`]); `None` for plain HTTP.
    pub fn tls_ca(&self) -> Option<&Path> {
        match self.scheme {
            Scheme::Http => None,
            Scheme::Https => self.launch.tls_ca.as_deref(),
        }
    }

    /// The child's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Resident set size of the child in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid()?)
    }

    /// Every output line so far, across restarts (empty when the output goes to a file).
    pub fn logs(&self) -> Vec<String> {
        lock(&self.lines).clone()
    }

    /// Restarts so far.
    pub fn restarts(&self) -> usize {
        self.restarts
    }

    /// SIGKILL and reap: no clean-shutdown marker is written.
    ///
    /// # Panics
    /// When the process is still there [`REAP_TIMEOUT`] after the signal.
    pub fn kill9(&mut self) {
        self.try_kill9().unwrap_or_else(|e| panic!("{e}"));
    }

    /// SIGHUP (the server re-reads its auth file).
    pub fn hangup(&self) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on a pid we own and have not reaped yet.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGHUP);
            }
        }
    }

    /// SIGTERM, then waits for the graceful exit; whether it exited successfully. A process
    /// still running after the stop timeout is killed (and `false` returned).
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: kill(2) on a pid we own and have not reaped yet.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        match wait_exit(&mut child, STOP_TIMEOUT) {
            Ok(status) => status.success(),
            Err(_) => {
                let _ = kill_and_reap(&mut child);
                false
            }
        }
    }

    /// Kills a still-running process (kill -9) and starts it again on the same data dir.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.restart_with(&[], &[])
    }

    /// Like [`ServerProcess::restart`], with extra arguments and environment for this start
    /// only.
    pub fn restart_with(
        &mut self,
        args: &[String],
        env: &[(String, String)],
    ) -> std::io::Result<()> {
        self.try_kill9()?;
        self.restarts += 1;
        self.spawn(args, env)
    }

    /// [`ServerProcess::kill9`] with the reaping failure as an error.
    fn try_kill9(&mut self) -> std::io::Result<()> {
        match self.child.take() {
            Some(mut child) => kill_and_reap(&mut child).map(drop),
            None => Ok(()),
        }
    }

    fn spawn(
        &mut self,
        extra_args: &[String],
        extra_env: &[(String, String)],
    ) -> std::io::Result<()> {
        let port = match (self.launch.keep_port, self.addr.rsplit_once(':')) {
            (true, Some((_, port))) => port.to_owned(),
            _ => "0".to_owned(),
        };
        let launch = &self.launch;
        // Opened before the spawn: a failure here must not leave a process nobody owns.
        let sink = match &launch.log_file {
            Some(path) => Sink::File(Arc::new(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            ))),
            None => Sink::Memory(self.lines.clone()),
        };
        let mut child = Command::new(&launch.bin)
            .arg("--listen")
            .arg(format!("{}:{port}", launch.host))
            .arg("--data-dir")
            .arg(&launch.data_dir)
            .args(&launch.args)
            .args(extra_args)
            .env("RUST_LOG", "info")
            .envs(launch.env.iter().chain(extra_env).map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        forward(stderr, sink.clone());
        let listening = listening_addr(stdout, sink);
        self.child = Some(child);
        let Some((addr, scheme)) = listening else {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            let _ = self.try_kill9();
            return Err(std::io::Error::other(format!(
                "lock-server did not report listening ({}); {}",
                exited.map_or("no line in time".to_owned(), |s| format!("exited: {s}")),
                self.output_hint()
            )));
        };
        self.addr = addr;
        self.scheme = scheme;
        if scheme == Scheme::Https && self.launch.tls_ca.is_none() {
            return Err(std::io::Error::other(
                "lock-server serves TLS: give Launch::tls_ca to check its health",
            ));
        }
        self.wait_healthy()
    }

    fn wait_healthy(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(std::io::Error::other(format!(
                    "lock-server exited with {status}; {}",
                    self.output_hint()
                )));
            }
            if crate::tls::get_status(&self.addr, "/healthz", self.tls_ca()) == Some(200) {
                return Ok(());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Err(std::io::Error::other(format!(
            "lock-server at {} never became healthy; {}",
            self.addr,
            self.output_hint()
        )))
    }

    /// Where to read what the process printed, for an error message.
    fn output_hint(&self) -> String {
        match &self.launch.log_file {
            Some(path) => format!("see {}", path.display()),
            None => format!("output:\n{}", self.logs().join("\n")),
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Never panics: a drop may run while a failed test unwinds.
        let _ = self.try_kill9();
    }
}

/// Waits for `child` to exit, for at most `bound`.
fn wait_exit(child: &mut Child, bound: Duration) -> std::io::Result<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("process {} still running after {bound:?}", child.id()),
            ));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// SIGKILL, then reap within [`REAP_TIMEOUT`].
fn kill_and_reap(child: &mut Child) -> std::io::Result<ExitStatus> {
    child.kill()?;
    wait_exit(child, REAP_TIMEOUT)
}

/// Where output lines go.
#[derive(Clone)]
enum Sink {
    Memory(Arc<Mutex<Vec<String>>>),
    File(Arc<Mutex<File>>),
}

impl Sink {
    fn push(&self, line: String) {
        match self {
            Sink::Memory(lines) => lock(lines).push(line),
            Sink::File(file) => {
                let _ = writeln!(lock(file), "{line}");
            }
        }
    }
}

/// Forwards every line of `stream` to `sink` in a thread (a full pipe would block the server).
fn forward(stream: impl Read + Send + 'static, sink: Sink) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(line) => sink.push(line),
                Err(_) => break,
            }
        }
    });
}

/// Plain HTTP or TLS, as the `listening` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Forwards stdout like [`forward`] and returns the address and scheme of its `listening`
/// line, or `None` when the stream ends first or the start timeout passes.
fn listening_addr(stdout: impl Read + Send + 'static, sink: Sink) -> Option<(String, Scheme)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = tx.as_ref().and_then(|_| listening_line(&line)) {
                let _ = tx.take().expect("sender").send(addr);
            }
            sink.push(line);
        }
    });
    rx.recv_timeout(START_TIMEOUT).ok()
}

/// The address and scheme in `{"event":"listening","addr":"...","scheme":"https"}` (no
/// scheme: plain HTTP).
fn listening_line(line: &str) -> Option<(String, Scheme)> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    if value["event"] != "listening" {
        return None;
    }
    let scheme = match value["scheme"].as_str() {
        Some("https") => Scheme::Https,
        _ => Scheme::Http,
    };
    Some((value["addr"].as_str()?.to_owned(), scheme))
}

/// A plain-socket `GET` returning the status code (`None` when nothing answers in time),
/// usable from sync and async code alike. Connecting, sending and each read of the status
/// line are bounded by [`PROBE_TIMEOUT`].
pub fn http_get_status(addr: &str, path: &str) -> Option<u16> {
    crate::tls::get_status(addr, path, None)
}

/// `VmRSS` of `pid` in KiB (from `/proc/PID/status`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The lock-server binary: `LOCK_SERVER_BIN`, else found or built by [`binary`].
pub fn server_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| binary("lock-server", "lock-server", "LOCK_SERVER_BIN"))
        .clone()
}

/// A workspace binary: `$env_var` when set; else `<name>` in the profile dir of the running
/// executable (`target/<profile>/`, where a test binary's dir is `target/<profile>/deps/`):
/// for a tool run from there, when it exists (it was built with the tool); for a test, when
/// it is also up to date with its sources (cargo does not rebuild another package's binary
/// for a test). Otherwise it is built with `cargo build -p package --bin name` into that
/// target dir and profile.
///
/// The suite builds every binary its tests spawn before the tests run (`scripts/test.sh`, and
/// `cargo test` builds the binaries of a package with integration tests), so the build here
/// is for a test run by hand after an edit. Within a `cargo test --workspace` run it would
/// resolve features for one package only and could rewrite artifacts that crates compiled
/// earlier in the run depend on (a cdylib's file name carries no hash, so cargo cannot keep
/// two builds of it apart).
pub fn binary(name: &str, package: &str, env_var: &str) -> PathBuf {
    if let Ok(bin) = std::env::var(env_var) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("exe dir");
    let in_deps = dir.ends_with("deps");
    let profile_dir = if in_deps {
        dir.parent().expect("profile dir")
    } else {
        dir
    };
    let candidate = profile_dir.join(name);
    let usable = if in_deps {
        up_to_date(&candidate)
    } else {
        candidate.exists()
    };
    if !usable {
        cargo_build(package, name, profile_dir);
    }
    candidate
}

/// Whether `bin` exists and no source file cargo built it from (listed in its dep-info file,
/// `<bin>.d`, next to it) changed since. Without a dep-info file it counts as stale.
fn up_to_date(bin: &Path) -> bool {
    let Ok(built) = bin.metadata().and_then(|m| m.modified()) else {
        return false;
    };
    let Some(sources) = std::fs::read_to_string(bin.with_extension("d"))
        .ok()
        .and_then(|text| dep_info_sources(&text))
    else {
        return false;
    };
    sources.iter().all(|source| {
        source
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|changed| changed <= built)
    })
}

/// The prerequisites of the first rule of a Makefile-style dep-info file
/// (`target: a.rs b\ c.rs`, a space in a path escaped with a backslash).
fn dep_info_sources(text: &str) -> Option<Vec<PathBuf>> {
    let (_, prerequisites) = text.lines().next()?.split_once(": ")?;
    let mut sources = Vec::new();
    let mut path = String::new();
    let mut chars = prerequisites.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => path.extend(chars.next()),
            ' ' => {
                if !path.is_empty() {
                    sources.push(PathBuf::from(std::mem::take(&mut path)));
                }
            }
            c => path.push(c),
        }
    }
    if !path.is_empty() {
        sources.push(PathBuf::from(path));
    }
    Some(sources)
}

/// `cargo build -p package --bin name` into the target dir and profile of `profile_dir`,
/// within [`BUILD_TIMEOUT`].
fn cargo_build(package: &str, name: &str, profile_dir: &Path) {
    let target_dir = profile_dir.parent().expect("target dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name])
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let mut child = cmd.spawn().expect("run cargo build");
    let status = wait_exit(&mut child, BUILD_TIMEOUT).unwrap_or_else(|e| {
        let _ = kill_and_reap(&mut child);
        panic!("cargo build -p {package} --bin {name}: {e}")
    });
    assert!(
        status.success(),
        "cargo build -p {package} --bin {name} failed"
    );
}

/// A poisoned log is still a log.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listening_event_names_the_address() {
        assert_eq!(
            listening_line(r#"{"event":"listening","addr":"127.0.0.1:5"}"#),
            Some(("127.0.0.1:5".into(), Scheme::Http))
        );
        assert_eq!(
            listening_line(r#"{"event":"listening","addr":"127.0.0.1:5","scheme":"https"}"#),
            Some(("127.0.0.1:5".into(), Scheme::Https))
        );
        assert_eq!(listening_line(r#"{"event":"store_opened"}"#), None);
        assert_eq!(listening_line("lock-server: cannot listen"), None);
    }

    #[test]
    fn dep_info_lists_every_source_and_unescapes_spaces() {
        let text = "/t/debug/lock-server: /w/a.rs /w/my\\ dir/b.rs\n\n/w/a.rs:\n";
        assert_eq!(
            dep_info_sources(text),
            Some(vec![
                PathBuf::from("/w/a.rs"),
                PathBuf::from("/w/my dir/b.rs")
            ])
        );
        assert_eq!(dep_info_sources("not a rule"), None);
    }

    #[test]
    fn a_binary_older_than_a_source_or_without_dep_info_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("tool");
        let source = dir.path().join("main.rs");
        std::fs::write(&source, "fn main() {}").unwrap();
        std::fs::write(&bin, "").unwrap();
        assert!(!up_to_date(&bin), "no dep-info file");
        let dep_info = format!("{}: {}\n", bin.display(), source.display());
        std::fs::write(bin.with_extension("d"), dep_info).unwrap();
        assert!(up_to_date(&bin));
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&source)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!up_to_date(&bin), "a source changed after the build");
        assert!(!up_to_date(&dir.path().join("missing")));
    }
}
