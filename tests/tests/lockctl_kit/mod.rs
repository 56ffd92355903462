//! What the lockctl suites share: the `lockctl` binary started as a shell would start it
//! (its own environment only, output to files), a job script's log read back, and bounded
//! waits for states. Every wait polls for a state (a log line, an L7 answer, an exit); its
//! bound only stops a broken run from hanging.

#![allow(dead_code)] // each suite uses a part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lock_e2e::launcher::binary;

/// Bound on every wait: generous for a loaded two-core machine.
pub const BOUND: Duration = Duration::from_secs(90);

/// lockctl's own statuses (README "lockctl").
pub const NOT_GRANTED: i32 = 112;
pub const LOST: i32 = 113;
pub const USAGE: i32 = 114;
pub const REFUSED: i32 = 115;

/// The variables lockctl reads: a test sets only those it means.
const LOCKCTL_ENV: [&str; 12] = [
    "LOCK_URL",
    "LOCK_TOKEN",
    "LOCK_CA_CERT",
    "LOCK_TTL_MS",
    "LOCK_WAIT_MS",
    "LOCK_NO_WAIT",
    "LOCK_SHARED",
    "LOCK_LIMIT",
    "LOCK_KILL_AFTER_MS",
    "LOCK_SESSION_TTL_MS",
    "LOCK_OWNER",
    "LOCK_KEY",
];

/// The `lockctl` binary: `LOCKCTL_BIN`, else built next to the test binaries.
pub fn lockctl_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| binary("lockctl", "lockctl", "LOCKCTL_BIN"))
        .clone()
}

/// A temp dir for one test's job files.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        Dir(tempfile::Builder::new()
            .prefix("lockctl-e2e-")
            .tempdir()
            .expect("temp dir"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// A file's lines (none while it does not exist).
    pub fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.path(name))
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

/// `lockctl ARGS` against `url` with `env`, stdout and stderr into `dir/<name>.out|.err`.
pub fn start(dir: &Dir, name: &str, url: &str, env: &[(&str, &str)], args: &[&str]) -> Lockctl {
    let mut command = Command::new(lockctl_bin());
    for var in LOCKCTL_ENV {
        command.env_remove(var);
    }
    command
        .env("LOCK_URL", url)
        .envs(env.iter().copied())
        .args(args)
        .current_dir(dir.0.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.path(&format!("{name}.out"))).unwrap())
        .stderr(std::fs::File::create(dir.path(&format!("{name}.err"))).unwrap());
    Lockctl {
        child: command.spawn().expect("spawn lockctl"),
        err: dir.path(&format!("{name}.err")),
        out: dir.path(&format!("{name}.out")),
    }
}

/// A running lockctl.
pub struct Lockctl {
    pub child: Child,
    err: PathBuf,
    out: PathBuf,
}

impl Lockctl {
    /// Waits for the exit, within [`BOUND`].
    pub async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + BOUND;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "lockctl still running after {BOUND:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the exit and answers its status code, which must be one.
    pub async fn code(&mut self) -> i32 {
        let status = self.exit().await;
        status
            .code()
            .unwrap_or_else(|| panic!("lockctl died by a signal: {status:?}; {}", self.stderr()))
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Sends `signal` to lockctl itself.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own unreaped child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// lockctl's stderr names no panic and ends in one `lockctl: ` line.
    pub fn assert_clear_failure(&self, words: &str) {
        let err = self.stderr();
        assert!(!err.contains("panicked"), "{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("lockctl: "), "{err}");
        assert!(last.contains(words), "expected {words:?} in: {err}");
    }
}

impl Drop for Lockctl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it answers `Some`, within [`BOUND`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `dir/name` has a line starting with `prefix`; answers it.
pub async fn line_in(dir: &Dir, name: &str, prefix: &str) -> String {
    eventually(&format!("a {prefix:?} line in {name}"), || {
        let found = dir.lines(name).into_iter().find(|l| l.starts_with(prefix));
        async move { found }
    })
    .await
}

/// Kills what is left of a job's process group (its leader's pid in `pid_file`), so a test
/// that leaves a command running on purpose leaves nothing behind.
pub fn kill_group(pid_file: &Path) {
    if let Ok(pid) = std::fs::read_to_string(pid_file) {
        if let Ok(pid) = pid.trim().parse::<libc::pid_t>() {
            // SAFETY: kill(2) of a process group the test's job created.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// Whether process `pid` has ended (gone, or a zombie not reaped yet).
pub fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z')),
    }
}
