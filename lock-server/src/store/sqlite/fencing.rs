//! Fencing-token allocation that never repeats a token, without an fsync per grant.
//!
//! Tokens come from one global counter (so they strictly increase per key as well). Before
//! the counter passes the durable high-water mark `reservedUpto`, a new mark one block
//! higher is written to `fencing.json` with fsync (write a temp file, fsync it, rename over,
//! fsync the directory). Every start resumes *above* the persisted mark and reserves a fresh
//! block, so whatever was lost (un-fsynced SQLite pages, the whole WAL), no token issued
//! before can be issued again. The cost is one fsync per [`BLOCK`] grants plus one per start,
//! and a gap of up to one block in the token sequence per restart.
//!
//! The same file carries the boot id and the hold-back deadline (see `recovery`), because
//! they need the same durability and are written at the same moments.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use lock_api::limits::MAX_FENCING_TOKEN;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// Tokens reserved per fsync (ASSUMPTION: 65 536; at 20k grants/s that is one fsync every
/// ~3 s, and 2^53 / 2^16 leaves 1.4e11 restarts before the space runs out).
pub const BLOCK: u64 = 65_536;

/// File name inside the data dir.
pub const FILE_NAME: &str = "fencing.json";

/// The durable record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// No token above this has been issued; every token up to it may have been.
    pub reserved_upto: u64,
    /// Kernel boot id at the last write (empty when unknown).
    #[serde(default)]
    pub boot_id: String,
    /// Wall-clock millis until which grants are held back (0: none).
    #[serde(default)]
    pub holdback_until_millis: u64,
}

/// Errors of the reservation file: all fatal for the store (better 503 than a repeated token).
#[derive(Debug, thiserror::Error)]
pub enum FencingError {
    #[error("reservation file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reservation file {path} is corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("fencing token space exhausted")]
    Exhausted,
}

/// A reservation that could not be written: the disk's cause (STORE_UNAVAILABLE: the token
/// stays unissued and the mark where it was, so a later try reserves from the same point),
/// else 500.
pub(super) fn into_store_error(err: FencingError) -> StoreError {
    match &err {
        FencingError::Io { source, .. } => {
            super::faults::unavailable(super::faults::cause_of_io(source))
        }
        _ => StoreError::Internal(err.to_string()),
    }
}

/// Reads the persisted reservation; a missing file is a fresh data dir.
pub fn load(dir: &Path) -> Result<Option<Reservation>, FencingError> {
    let path = dir.join(FILE_NAME);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| FencingError::Corrupt {
                path,
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FencingError::Io { path, source }),
    }
}

/// Writes the reservation atomically and durably: temp file, fsync, rename, fsync dir.
pub fn store(dir: &Path, reservation: &Reservation) -> Result<(), FencingError> {
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let io = |source| FencingError::Io {
        path: path.clone(),
        source,
    };
    let bytes = serde_json::to_vec(reservation).expect("reservation serialises");
    let mut file = File::create(&tmp).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    fs::rename(&tmp, &path).map_err(io)?;
    sync_dir(dir).map_err(io)
}

/// fsync a directory so a rename or delete in it is durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The in-memory counter plus its durable mark. Lives on the store's writer thread only, so
/// it needs no lock.
#[derive(Debug)]
pub struct TokenAllocator {
    dir: PathBuf,
    record: Reservation,
    /// The next token to hand out.
    next: u64,
}

impl TokenAllocator {
    /// Resumes above the persisted mark and durably reserves a fresh block before any token
    /// is issued. `update` may adjust the boot id / hold-back fields written with it.
    pub fn open(
        dir: &Path,
        previous: Option<Reservation>,
        boot_id: String,
        holdback_until_millis: u64,
    ) -> Result<TokenAllocator, FencingError> {
        let previous_mark = previous.map(|r| r.reserved_upto).unwrap_or(0);
        let next = previous_mark + 1;
        let mut allocator = TokenAllocator {
            dir: dir.to_path_buf(),
            record: Reservation {
                reserved_upto: previous_mark,
                boot_id,
                holdback_until_millis,
            },
            next,
        };
        allocator.reserve_block()?;
        Ok(allocator)
    }

    /// The next token; fsyncs a new block first when the current one is used up.
    pub fn next_token(&mut self) -> Result<u64, FencingError> {
        if self.next > self.record.reserved_upto {
            self.reserve_block()?;
        }
        let token = self.next;
        self.next += 1;
        Ok(token)
    }

    /// The durable mark now: every token issued so far is at or below it (a backup records
    /// it, see `backup`).
    pub fn reserved_upto(&self) -> u64 {
        self.record.reserved_upto
    }

    fn reserve_block(&mut self) -> Result<(), FencingError> {
        let mark = self.record.reserved_upto.max(self.next - 1) + BLOCK;
        if mark > MAX_FENCING_TOKEN {
            return Err(FencingError::Exhausted);
        }
        let record = Reservation {
            reserved_upto: mark,
            ..self.record.clone()
        };
        // Persist first, then believe it: a crash between leaves the old, lower mark, and
        // no token above it was issued.
        store(&self.dir, &record)?;
        self.record = record;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_never_repeat_across_reopen_even_unused() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TokenAllocator::open(dir.path(), None, "b".into(), 0).unwrap();
        let first = a.next_token().unwrap();
        let second = a.next_token().unwrap();
        assert!(second > first);
        // Simulate a crash: the in-memory counter is gone, only the file remains.
        drop(a);
        let loaded = load(dir.path()).unwrap();
        let mut b = TokenAllocator::open(dir.path(), loaded, "b".into(), 0).unwrap();
        assert!(b.next_token().unwrap() > second);
    }

    #[test]
    fn a_new_block_is_reserved_before_it_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TokenAllocator::open(dir.path(), None, String::new(), 0).unwrap();
        for _ in 0..BLOCK {
            a.next_token().unwrap();
        }
        let token = a.next_token().unwrap();
        assert_eq!(token, BLOCK + 1);
        let on_disk = load(dir.path()).unwrap().unwrap().reserved_upto;
        assert!(
            on_disk >= token,
            "issued {token} above the durable mark {on_disk}"
        );
    }
}
