//! The lock-server of a chaos run, started by the shared launcher (`lock_e2e::launcher`): on a
//! port kept across kill -9 restarts, so contender processes keep one base URL, with its
//! output appended to a file (runs are long) and logs at `warn`.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use lock_e2e::launcher::{self, Launch};

pub use lock_e2e::launcher::{http_get_status, server_binary};

/// A running lock-server; everything but the start is the launcher's
/// [`launcher::ServerProcess`]. Dropping it kills the child.
pub struct ServerProcess(launcher::ServerProcess);

impl ServerProcess {
    /// Starts `bin` on a free 127.0.0.1 port with `data_dir`; output is appended to `log`.
    pub fn start(
        bin: &Path,
        data_dir: &Path,
        extra_args: Vec<String>,
        log: &Path,
    ) -> std::io::Result<ServerProcess> {
        ServerProcess::start_on(bin, data_dir, extra_args, log, "127.0.0.1")
    }

    /// [`ServerProcess::start`] listening on `host` (an address of this machine, or of the
    /// network namespace `bin` runs in).
    pub fn start_on(
        bin: &Path,
        data_dir: &Path,
        extra_args: Vec<String>,
        log: &Path,
        host: &str,
    ) -> std::io::Result<ServerProcess> {
        Launch::new(bin, data_dir)
            .host(host)
            .args(extra_args)
            .env("RUST_LOG", "warn")
            .keep_port()
            .log_file(log)
            .start()
            .map(ServerProcess)
    }
}

impl Deref for ServerProcess {
    type Target = launcher::ServerProcess;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for ServerProcess {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The contender binary: `CHAOS_CONTENDER_BIN`, else the one in the running executable's
/// `target/<profile>/` (for a test, only when up to date), else built with
/// `cargo build -p lock-chaos --bin contender` ([`launcher::binary`]).
pub fn contender_binary() -> PathBuf {
    launcher::binary("contender", "lock-chaos", "CHAOS_CONTENDER_BIN")
}
