//! Start-up classification: was the last stop clean, and could writes have been lost?
//!
//! SQLite runs in WAL mode with `synchronous=NORMAL`: a committed transaction is in the OS
//! page cache, so it survives kill -9 of the process, but an OS crash or power loss may drop
//! the last commits. Two facts decide what a start must do:
//! - the clean-shutdown marker (written after a WAL checkpoint on graceful shutdown,
//!   removed durably at start): present → nothing can be lost;
//! - the kernel boot id, stored with the token reservation: unchanged → the OS did not
//!   restart, so every commit made it to the page cache and from there to disk.
//!
//! Unclean *and* a different (or unknown) boot: lock rows may be missing while their holders
//! still believe in them, so grants are held back until every lease that could still be
//! live has expired: `holdback` (the largest TTL) after this start. The deadline is persisted
//! so a crash during the hold-back does not shorten it. Tokens need no hold-back: `fencing`
//! already guarantees they never repeat.

use std::fs;
use std::path::Path;

use super::fencing::{self, FencingError, Reservation};

/// Marker file written by a graceful shutdown.
pub const CLEAN_MARKER: &str = "clean-shutdown";

/// What the start found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartState {
    /// The last stop was graceful.
    pub clean: bool,
    /// The data dir was empty (first start).
    pub fresh: bool,
    /// The machine may have rebooted since the last write.
    pub rebooted: bool,
    /// The kernel boot id now.
    pub boot_id: String,
    /// Grants are refused until this wall-clock millisecond (0: no hold-back).
    pub holdback_until_millis: u64,
    /// The reservation read from disk.
    pub previous: Option<Reservation>,
}

/// Classifies the start and consumes the clean marker (durably) so a later crash is seen
/// as unclean.
pub fn begin(
    dir: &Path,
    db_file: &Path,
    boot_id_path: &Path,
    holdback_millis: u64,
    now_millis: u64,
) -> Result<StartState, FencingError> {
    let previous = fencing::load(dir)?;
    if previous.is_none() && db_file.exists() {
        // Grants exist but their high-water mark is gone: issuing tokens from 1 again would
        // break the one promise that matters. Refuse to start instead.
        return Err(FencingError::Corrupt {
            path: dir.join(fencing::FILE_NAME),
            message: "missing while the database exists".into(),
        });
    }
    let marker = dir.join(CLEAN_MARKER);
    let clean = marker.exists();
    if clean {
        let io = |source| FencingError::Io {
            path: marker.clone(),
            source,
        };
        fs::remove_file(&marker).map_err(io)?;
        fencing::sync_dir(dir).map_err(io)?;
    }
    let boot_id = read_boot_id(boot_id_path);
    let fresh = previous.is_none();
    let rebooted = match &previous {
        Some(p) => p.boot_id.is_empty() || boot_id.is_empty() || p.boot_id != boot_id,
        None => false,
    };
    let carried = previous
        .as_ref()
        .map(|p| p.holdback_until_millis)
        .unwrap_or(0);
    let holdback_until_millis = if !fresh && !clean && rebooted {
        carried.max(now_millis + holdback_millis)
    } else {
        carried
    };
    Ok(StartState {
        clean,
        fresh,
        rebooted,
        boot_id,
        holdback_until_millis,
        previous,
    })
}

/// Writes the clean-shutdown marker durably. Call only after the database is checkpointed
/// and closed.
pub fn mark_clean(dir: &Path) -> std::io::Result<()> {
    let marker = dir.join(CLEAN_MARKER);
    let file = fs::File::create(&marker)?;
    file.sync_all()?;
    fencing::sync_dir(dir)
}

fn read_boot_id(path: &Path) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(boot: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let boot_path = dir.path().join("boot_id");
        fs::write(&boot_path, boot).unwrap();
        (dir, boot_path)
    }

    fn start(dir: &Path, boot: &Path, now: u64) -> StartState {
        let st = begin(dir, &dir.join("lock.db"), boot, 1000, now).unwrap();
        fencing::store(
            dir,
            &Reservation {
                reserved_upto: 10,
                boot_id: st.boot_id.clone(),
                holdback_until_millis: st.holdback_until_millis,
            },
        )
        .unwrap();
        st
    }

    #[test]
    fn crash_on_same_boot_needs_no_holdback() {
        let (dir, boot) = setup("A");
        assert!(start(dir.path(), &boot, 0).fresh);
        let st = start(dir.path(), &boot, 5);
        assert!(!st.clean && !st.rebooted);
        assert_eq!(st.holdback_until_millis, 0);
    }

    #[test]
    fn crash_across_reboot_holds_back_and_persists_it() {
        let (dir, boot) = setup("A");
        start(dir.path(), &boot, 0);
        fs::write(&boot, "B").unwrap();
        let st = start(dir.path(), &boot, 100);
        assert!(st.rebooted);
        assert_eq!(st.holdback_until_millis, 1100);
        // A second crash on the same boot during the hold-back keeps the deadline.
        let st = start(dir.path(), &boot, 200);
        assert_eq!(st.holdback_until_millis, 1100);
    }

    #[test]
    fn clean_shutdown_then_reboot_needs_no_holdback() {
        let (dir, boot) = setup("A");
        start(dir.path(), &boot, 0);
        mark_clean(dir.path()).unwrap();
        fs::write(&boot, "B").unwrap();
        let st = start(dir.path(), &boot, 100);
        assert!(st.clean);
        assert_eq!(st.holdback_until_millis, 0);
        assert!(!dir.path().join(CLEAN_MARKER).exists());
    }

    #[test]
    fn database_without_reservation_refuses_to_start() {
        let (dir, boot) = setup("A");
        fs::write(dir.path().join("lock.db"), b"").unwrap();
        assert!(begin(dir.path(), &dir.path().join("lock.db"), &boot, 1000, 0).is_err());
    }
}
