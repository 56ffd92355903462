//! The signals lockctl catches instead of dying by them, so that it can pass them to the
//! command and release the lock after the command ended (dying at once would leave the lock
//! held until its TTL and the command running on without it).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// SIGINT, SIGTERM and SIGHUP, caught from [`Signals::catch`] on.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    /// Catches the three signals from now on (before anything is sent to the server: an
    /// interrupt during the wait for the lock must close the session, not kill lockctl).
    pub fn catch() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal caught, as its number. Cancel-safe: a signal that arrives while
    /// nobody waits is answered by the next call.
    pub async fn next(&mut self) -> libc::c_int {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => libc::SIGHUP,
        }
    }
}
