//! A disk that fills on demand, for the store-fault tests: a small tmpfs mounted by the test
//! (the machines run as root), unmounted when its guard drops, and a ballast file that takes
//! every free byte of it and gives them back when removed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a fresh temp directory; unmounted (lazily, so a process still holding
/// a file in it does not keep it busy) when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=`, e.g. `"16m"`); `Err` with the reason
    /// when mounting is impossible here (not root, no mount namespace).
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::Builder::new()
            .prefix("lock-e2e-tmpfs-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A file that filled its file system: every write to it went on until ENOSPC.
pub struct Ballast {
    path: PathBuf,
    /// Bytes it took.
    pub bytes: u64,
}

impl Ballast {
    /// Writes `dir/ballast` until the file system has no byte left.
    ///
    /// # Panics
    /// On any write error other than ENOSPC.
    pub fn fill(dir: &Path) -> Ballast {
        let path = dir.join("ballast");
        let mut file = File::create(&path).expect("ballast file");
        let chunk = vec![0xA5u8; 64 * 1024];
        let mut bytes = 0u64;
        // Large chunks first, then single bytes, so the last partial block is taken too.
        for size in [chunk.len(), 4096, 1] {
            loop {
                match file.write(&chunk[..size]) {
                    Ok(0) => break,
                    Ok(n) => bytes += n as u64,
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => panic!("ballast write: {e}"),
                }
            }
        }
        let _ = file.sync_all();
        Ballast { path, bytes }
    }

    /// Deletes the file: its space is free again.
    pub fn remove(self) {
        std::fs::remove_file(&self.path).expect("remove ballast");
    }
}
