//! Who owns the data directory: one `flock` on `lock-server.lock` inside it, held by a
//! serving store (and by `backup`/`restore` while they work offline) for its whole life.
//!
//! The kernel drops the lock when its holder exits, kill -9 included, so it never goes
//! stale. SQLite's exclusive locking mode already keeps a second server out of `lock.db`,
//! but only once the file is open, after the start has touched `fencing.json` and the clean
//! marker; this lock is taken before anything in the directory is read or written, so a
//! second server or a restore is refused before it changes anything.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The lock file's name inside the data dir.
pub const LOCK_FILE: &str = "lock-server.lock";

/// The data dir's lock, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock without waiting: `Ok(None)` when another process holds it.
    pub fn try_take(dir: &Path) -> io::Result<Option<DirLock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        // SAFETY: `flock` on a descriptor this function owns; no memory is passed.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if taken == 0 {
            return Ok(Some(DirLock { _file: file }));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::try_take(dir.path()).unwrap();
        assert!(first.is_some());
        // flock locks belong to the open file description: a second open is another owner,
        // as another process would be.
        assert!(DirLock::try_take(dir.path()).unwrap().is_none());
        drop(first);
        assert!(DirLock::try_take(dir.path()).unwrap().is_some());
    }
}
