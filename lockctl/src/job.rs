//! The command `exec` runs under the lock: started in a process group of its own, signalled
//! as a group, and its end turned into lockctl's exit status.
//!
//! Why a group of its own: a job is often a shell script, and SIGTERM to the shell alone
//! leaves the program it is running alive, still writing, after the lock is gone. Signalling
//! the group reaches the script and everything it started (unless they moved to a group of
//! their own). The price, as with `timeout(1)`: the command is not in the terminal's
//! foreground group, so it cannot read from the terminal, and a Ctrl-C reaches it through
//! lockctl, which forwards it.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use crate::exit::{Failure, CANNOT_EXECUTE, NOT_FOUND};

/// A running command.
pub struct Job {
    child: tokio::process::Child,
    /// The command's process group: its own pid.
    group: libc::pid_t,
    /// Its end, once reaped.
    ended: Option<ExitStatus>,
}

impl Job {
    /// Starts `command` (program and arguments) with `env` added to lockctl's environment.
    /// A program that is missing or cannot be executed is a failure with the shell's status
    /// for it (127, 126).
    pub fn start(command: &[OsString], env: &[(&str, String)]) -> Result<Job, Failure> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| Failure::usage("exec needs a command after --"))?;
        let child = tokio::process::Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                let status = match e.kind() {
                    ErrorKind::NotFound => NOT_FOUND,
                    _ => CANNOT_EXECUTE,
                };
                Failure {
                    status,
                    message: format!("cannot run {}: {e}", program.to_string_lossy()),
                }
            })?;
        let group = child.id().expect("a child just spawned has a pid") as libc::pid_t;
        Ok(Job {
            child,
            group,
            ended: None,
        })
    }

    /// Waits for the command to end (cancel-safe: a later call answers the same end).
    pub async fn ended(&mut self) -> ExitStatus {
        if let Some(status) = self.ended {
            return status;
        }
        // `wait` fails only if the child was reaped elsewhere, which nothing here does.
        let status = self.child.wait().await.expect("wait for the command");
        self.ended = Some(status);
        status
    }

    /// Sends `signal` to the command's process group. A group that is gone already (every
    /// member ended) is not an error: there is nobody left to tell.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) with a negative pid signals that process group; the group is our
        // child's own and cannot be reused while the child is not reaped. After it was reaped
        // the group lives on only while a member does.
        unsafe {
            libc::kill(-self.group, signal);
        }
    }

    /// Stops the command because the lock is gone: SIGTERM to its group, and SIGKILL to the
    /// group when it has not ended after `grace` — or at once when its leader ended but
    /// others of the group are left, since nothing of the job may outlive the lock.
    pub async fn stop(&mut self, grace: Duration) -> ExitStatus {
        self.signal(libc::SIGTERM);
        let status = match tokio::time::timeout(grace, self.ended()).await {
            Ok(status) => status,
            Err(_) => {
                self.signal(libc::SIGKILL);
                self.ended().await
            }
        };
        self.signal(libc::SIGKILL);
        status
    }
}

/// The status a shell would report for a command that ended with `status`: its exit code,
/// or 128 + the signal that killed it.
pub fn shell_status(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.saturating_add(signal as u8),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_a_shell_reads_them() {
        assert_eq!(shell_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(shell_status(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }

    #[tokio::test]
    async fn a_missing_or_unrunnable_program_has_the_shells_status() {
        let missing = Job::start(&["/nonexistent/lockctl-test".into()], &[]);
        assert_eq!(missing.err().map(|f| f.status), Some(NOT_FOUND));
        let directory = Job::start(&["/".into()], &[]);
        assert_eq!(directory.err().map(|f| f.status), Some(CANNOT_EXECUTE));
    }

    #[tokio::test]
    async fn stop_kills_a_group_that_ignores_sigterm() {
        let ready = std::env::temp_dir().join(format!("lockctl-job-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        // The background sleep's pid lands in the file once the trap is set.
        let script = format!(
            "trap '' TERM; sleep 600 & echo $! > '{0}.tmp'; mv '{0}.tmp' '{0}'; wait",
            ready.display()
        );
        let mut job = Job::start(&["sh".into(), "-c".into(), script.into()], &[]).unwrap();
        let sleep_pid = eventually(|| std::fs::read_to_string(&ready).ok()).await;
        let status = job.stop(Duration::from_millis(200)).await;
        let _ = std::fs::remove_file(&ready);
        assert_eq!(
            shell_status(status),
            137,
            "SIGTERM was ignored, SIGKILL ended it"
        );
        let stat = format!("/proc/{}/stat", sleep_pid.trim());
        eventually(|| match std::fs::read_to_string(&stat) {
            // Gone, or a zombie waiting for its new parent to reap it: dead either way.
            Err(_) => Some(()),
            Ok(text) => text.rsplit(") ").next()?.starts_with('Z').then_some(()),
        })
        .await;
    }

    /// Polls `check` until it answers; the bound only stops a broken run from hanging.
    async fn eventually<T>(mut check: impl FnMut() -> Option<T>) -> T {
        for _ in 0..3000 {
            if let Some(value) = check() {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("still not so after 30 s");
    }
}
