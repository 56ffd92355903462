//! `lockctl exec KEY -- COMMAND…`: a session, the lock, the command under it, the release.
//!
//! The order of things, each step for a reason:
//! 1. Signals are caught first, so an interrupt while waiting for the lock closes the
//!    session (its queue ticket and any grant go with it) instead of leaving them to TTLs.
//! 2. One session (L1), kept alive by the SDK's heartbeats for as long as lockctl runs.
//! 3. The acquire, queued in the server's FIFO by default ([`crate::wait`]).
//! 4. The command, in a process group of its own ([`crate::job`]), with the key, the fencing
//!    token and the holder id in its environment.
//! 5. Whichever comes first: the command ends (release, exit with its status); the lock is
//!    lost (stop the command, exit [`exit::LOST`]); a signal (passed on, keep waiting).
//! 6. The release (L6), and the session's close (L3) whatever happened.

use std::ffi::OsString;
use std::process::ExitStatus;
use std::time::Duration;

use lock_api::HoldKind;
use lock_wasm::{LockClientSession, LockHandle, LostReason};

use crate::endpoint::Endpoint;
use crate::exit::{self, Failure};
use crate::job::{shell_status, Job};
use crate::signals::Signals;
use crate::wait::Wait;

/// What to run and how to hold the lock, checked.
pub struct Exec {
    pub key: String,
    pub hold: HoldKind,
    pub ttl: Duration,
    pub wait: Wait,
    pub kill_after: Duration,
    pub command: Vec<OsString>,
}

/// Runs `exec` and answers the status lockctl exits with (the command's, or 128 + the
/// signal that interrupted the wait), or why it stopped with one of its own.
pub async fn run(
    endpoint: &Endpoint,
    config: lock_wasm::ClientConfig,
    exec: &Exec,
) -> Result<u8, Failure> {
    let request_timeout = config.request_timeout;
    let mut signals =
        Signals::catch().map_err(|e| Failure::usage(format!("cannot catch signals: {e}")))?;
    let session = endpoint
        .client(config)?
        .open_session()
        .await
        .map_err(|e| Failure::refused("opening a session", endpoint.url(), &e))?;
    let result = under_session(endpoint, &session, exec, request_timeout, &mut signals).await;
    // Ends at once what the session still has (nothing after a release; a queue ticket or a
    // grant after an interrupt), instead of at its TTL. An unreachable server lets the TTL
    // do it.
    let _ = session.close().await;
    result
}

/// How the wait for the lock ended.
enum Turn {
    Granted(LockHandle),
    NotGranted,
    Interrupted(libc::c_int),
}

/// How the command's run ended.
enum Supervised {
    Ended(ExitStatus),
    Lost(LostReason),
}

async fn under_session(
    endpoint: &Endpoint,
    session: &LockClientSession,
    exec: &Exec,
    request_timeout: Duration,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let handle = match wait_for_lock(endpoint, session, exec, request_timeout, signals).await? {
        Turn::Granted(handle) => handle,
        Turn::NotGranted => return Err(not_granted(endpoint, exec).await),
        Turn::Interrupted(signal) => return Ok(128 + signal as u8),
    };
    let env = [
        ("LOCK_KEY", exec.key.clone()),
        ("LOCK_FENCING_TOKEN", handle.fencing_token().to_string()),
        ("LOCK_HOLDER_ID", session.holder_id().to_owned()),
    ];
    let supervised = match Job::start(&exec.command, &env) {
        Ok(mut job) => supervise(&mut job, &handle, exec.kill_after, signals).await,
        Err(failure) => {
            let _ = session.release(&handle).await;
            return Err(failure);
        }
    };
    // A lost handle's release is quiet; it still ends a hold the server may have kept.
    let released = session.release(&handle).await;
    match supervised {
        Supervised::Lost(reason) => Err(lost(exec, &handle, reason)),
        Supervised::Ended(status) => {
            if let Err(e) = released {
                eprintln!(
                    "lockctl: releasing {} failed ({e}); the lock ends with its TTL",
                    exec.key
                );
            }
            Ok(shell_status(status))
        }
    }
}

/// Acquires in rounds while the wait goes on; an interrupt ends the wait.
async fn wait_for_lock(
    endpoint: &Endpoint,
    session: &LockClientSession,
    exec: &Exec,
    request_timeout: Duration,
    signals: &mut Signals,
) -> Result<Turn, Failure> {
    let policy = exec.wait.policy(request_timeout);
    loop {
        let acquired = tokio::select! {
            acquired = session.acquire_hold(&exec.key, exec.hold, exec.ttl, &policy) => acquired,
            signal = signals.next() => return Ok(Turn::Interrupted(signal)),
        };
        match acquired {
            Ok(Some(handle)) => return Ok(Turn::Granted(handle)),
            Ok(None) if exec.wait.goes_on() => continue,
            Ok(None) => return Ok(Turn::NotGranted),
            Err(e) => {
                let doing = format!("acquiring {}", exec.key);
                return Err(Failure::refused(&doing, endpoint.url(), &e));
            }
        }
    }
}

/// Waits for the command to end, stopping it if the lock is lost first and passing on the
/// signals lockctl gets meanwhile.
async fn supervise(
    job: &mut Job,
    handle: &LockHandle,
    kill_after: Duration,
    signals: &mut Signals,
) -> Supervised {
    let lost = handle.lost();
    tokio::pin!(lost);
    loop {
        tokio::select! {
            // A loss reported together with the end still counts: the command may have
            // written after it.
            biased;
            reason = &mut lost => {
                eprintln!(
                    "lockctl: lock on {} lost ({}): stopping the command (SIGTERM, SIGKILL after {} ms)",
                    handle.key(),
                    lost_words(reason),
                    kill_after.as_millis()
                );
                job.stop(kill_after).await;
                return Supervised::Lost(reason);
            }
            status = job.ended() => {
                // A deadline that passed before anything reported it is a loss too.
                if handle.is_lost() {
                    let reason = handle.lost_reason().unwrap_or(LostReason::DeadlinePassed);
                    return Supervised::Lost(reason);
                }
                return Supervised::Ended(status);
            }
            signal = signals.next() => job.signal(signal),
        }
    }
}

/// The not-granted failure, naming the holder (L7) so the line says who has the key.
async fn not_granted(endpoint: &Endpoint, exec: &Exec) -> Failure {
    let within = match exec.wait {
        Wait::UpTo(wait) => format!("within {} ms", wait.as_millis()),
        Wait::No | Wait::Forever => "at once (--no-wait)".to_owned(),
    };
    let holder = match crate::status::read(endpoint, &exec.key).await {
        Ok(state) => crate::status::holders_line(&state),
        Err(failure) => format!("holder unknown: {}", failure.message),
    };
    Failure {
        status: exit::NOT_GRANTED,
        message: format!("{} not granted {within}: {holder}", exec.key),
    }
}

/// The lost failure.
fn lost(exec: &Exec, handle: &LockHandle, reason: LostReason) -> Failure {
    Failure {
        status: exit::LOST,
        message: format!(
            "lock on {} (token {}) was lost while the command ran: {}",
            exec.key,
            handle.fencing_token(),
            lost_words(reason)
        ),
    }
}

fn lost_words(reason: LostReason) -> &'static str {
    match reason {
        LostReason::DeadlinePassed => "its deadline passed without a renewal",
        LostReason::NotInHeartbeat => "the server dropped it (revoked, or expired)",
        LostReason::SessionLost => "the session was lost",
        LostReason::SessionClosed | LostReason::Released => "it was released",
    }
}
