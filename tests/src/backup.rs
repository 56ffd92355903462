//! The `lock-server` subcommands an operator runs beside a server (`backup`, `restore`,
//! `etcd-restored`), run as processes of the real binary, with their exit status and output.

use std::process::Command;

use serde_json::Value;

use crate::launcher::server_binary;

/// One finished run of a subcommand.
#[derive(Debug)]
pub struct CliRun {
    /// The exit status (`-1`: killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// The run succeeded; its one JSON line on stdout.
    pub fn assert_ok(&self) -> Value {
        assert_eq!(self.code, 0, "expected success: {self:?}");
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// The run was refused as the operator should see it: exit 1, a message naming the
    /// reason on stderr, no panic, nothing on stdout.
    pub fn assert_refused(&self, reason: &str) {
        assert_eq!(self.code, 1, "expected a refusal: {self:?}");
        assert!(
            self.stderr.contains(reason),
            "expected {reason:?}: {self:?}"
        );
        assert!(!self.stderr.contains("panicked"), "{self:?}");
        assert!(self.stdout.trim().is_empty(), "{self:?}");
    }
}

/// Runs `lock-server <args>` to its end.
pub fn lock_server_cli<I, S>(args: I) -> CliRun
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = Command::new(server_binary())
        .args(args)
        .env_remove("LOCK_DATA_DIR")
        .output()
        .expect("run lock-server");
    CliRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// [`lock_server_cli`] off the async runtime's threads (a backup waits on the server those
/// threads serve requests to).
pub async fn lock_server_cli_async(args: Vec<String>) -> CliRun {
    tokio::task::spawn_blocking(move || lock_server_cli(args))
        .await
        .expect("cli task")
}

/// The first log line of `event` of `server`, waited for (log lines are written by a thread
/// of their own, so one may come after the answer that caused it).
pub async fn log_line(server: &crate::TestServer, event: &str) -> String {
    let needle = format!(r#""event":"{event}""#);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(line) = server.logs().into_iter().find(|l| l.contains(&needle)) {
            return line;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {event} line: {:?}",
            server.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// An L4 (TTL `ttl_millis`) re-sent every 100 ms while a restored store holds grants back
/// (503 NOT_LEADER) or, when `contended_ok`, while a hold copied with the backup has not run
/// out yet (409), until granted or `bound` passes; the grant.
pub async fn acquire_once_released(
    api: &crate::Api,
    key: &str,
    session_id: &str,
    ttl_millis: u64,
    bound: std::time::Duration,
    contended_ok: bool,
) -> lock_api::LockGrant {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let reply = api.acquire(key, session_id, Some(ttl_millis), None).await;
        if reply.status == 200 {
            return reply.parse();
        }
        if !(contended_ok && reply.status == 409) {
            reply.assert_not_leader();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused: {reply:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
