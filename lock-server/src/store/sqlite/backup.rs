//! `lock-server backup` and `lock-server restore`: a consistent copy of the store, and a
//! restore that never re-issues a fencing token.
//!
//! A backup is one SQLite file: `VACUUM INTO` of `lock.db` (a consistent snapshot, compacted,
//! without the TEMP wait queues) plus one row in [`META_TABLE`] holding the token reservation
//! mark (`reservedUpto` of `fencing.json`) at the moment of the copy: every token the copied
//! database knows of is at or below it. While a server runs on the data dir, SQLite's
//! exclusive locking mode keeps every other process out of `lock.db`, so the copy is made by
//! that server's writer thread, between two batches (see `control`); otherwise `backup`
//! holds the data dir's lock and copies the file itself.
//!
//! A restore cannot know how many tokens the old server issued after the copy, so it starts
//! the new one at the next token epoch above the larger of the backup's mark and the target
//! directory's own (`store::epoch::floor_above`). It writes `fencing.json` first (a raised
//! mark is safe whatever follows), then puts the database in place. The restored directory
//! starts as after a crash across a reboot (no clean marker, unknown boot id), so grants
//! are held back for the largest TTL: holders of grants made after the backup may still
//! believe in them, and those rows are not in the copy.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::db::DB_FILE;
use super::dir_lock::{DirLock, LOCK_FILE};
use super::fencing::{self, FencingError, Reservation};
use super::recovery::CLEAN_MARKER;
use crate::store::epoch::{self, EpochsExhausted};
use crate::store::lease::now_millis;

/// The table a backup carries its record in (dropped again by a restore).
pub const META_TABLE: &str = "lock_server_backup";

/// Why a backup or a restore did nothing (each leaves the data dir as it was).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("nothing to back up in {0}: no {DB_FILE} with its {file}", file = fencing::FILE_NAME)]
    NoStore(PathBuf),
    #[error("a lock-server is running on {0}; stop it before restoring into it")]
    ServerRunning(PathBuf),
    #[error("{dir} is not empty ({entries}); pass --force to replace its store")]
    NotEmpty { dir: PathBuf, entries: String },
    #[error("{path} is not a usable lock-server backup: {reason}")]
    NotABackup { path: PathBuf, reason: String },
    #[error("the lock-server running on {dir} did not take the backup: {reason}")]
    Server { dir: PathBuf, reason: String },
    #[error("{0}")]
    Fencing(#[from] FencingError),
    #[error("{0}")]
    Exhausted(#[from] EpochsExhausted),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// What `backup` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// Every token the copy knows of is at or below this.
    pub reserved_upto: u64,
    /// Taken by a running server (else from a stopped data dir).
    pub online: bool,
    /// Size of the backup file.
    pub bytes: u64,
}

/// What `restore` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The backup's mark.
    pub backup_reserved_upto: u64,
    /// The target directory's mark before the restore, if it had one.
    pub previous_reserved_upto: Option<u64>,
    /// The first token the restored store may issue.
    pub floor: u64,
}

/// `lock-server backup --data-dir D --to FILE`: a consistent copy of `D`'s store in `to`
/// (written beside it, fsynced, then renamed into place), checked before it is reported.
pub fn backup(data_dir: &Path, to: &Path) -> Result<BackupReport, BackupError> {
    if !data_dir.join(DB_FILE).exists() {
        return Err(BackupError::NoStore(data_dir.to_path_buf()));
    }
    let partial = partial_beside(to);
    remove_if_present(&partial)?;
    let lock = DirLock::try_take(data_dir).map_err(io_err("cannot lock", data_dir))?;
    let (mark, online) = match lock {
        Some(_held) => (copy_stopped(data_dir, &partial)?, false),
        None => (copy_from_server(data_dir, &partial)?, true),
    };
    seal(&partial, mark)?;
    let checked = verify(&partial)?;
    debug_assert_eq!(checked, mark);
    fs::rename(&partial, to).map_err(io_err("cannot rename into", to))?;
    sync_parent(to)?;
    let bytes = fs::metadata(to).map_err(io_err("cannot read", to))?.len();
    Ok(BackupReport {
        reserved_upto: mark,
        online,
        bytes,
    })
}

/// `lock-server restore --from FILE --data-dir D [--force]`.
pub fn restore(from: &Path, data_dir: &Path, force: bool) -> Result<RestoreReport, BackupError> {
    fs::create_dir_all(data_dir).map_err(io_err("cannot create", data_dir))?;
    let Some(_lock) = DirLock::try_take(data_dir).map_err(io_err("cannot lock", data_dir))? else {
        return Err(BackupError::ServerRunning(data_dir.to_path_buf()));
    };
    let entries = other_entries(data_dir)?;
    if !entries.is_empty() && !force {
        return Err(BackupError::NotEmpty {
            dir: data_dir.to_path_buf(),
            entries: entries.join(", "),
        });
    }
    // What is installed is what was checked: the copy inside the target directory.
    let restoring = data_dir.join(format!("{DB_FILE}.restoring"));
    fs::copy(from, &restoring).map_err(io_err("cannot read", from))?;
    let backup_mark = match verify(&restoring).and_then(|mark| unseal(&restoring).map(|_| mark)) {
        Ok(mark) => mark,
        Err(e) => {
            let _ = fs::remove_file(&restoring);
            return Err(match e {
                BackupError::NotABackup { reason, .. } => BackupError::NotABackup {
                    path: from.to_path_buf(),
                    reason,
                },
                other => other,
            });
        }
    };
    let previous = fencing::load(data_dir)?;
    let previous_mark = previous.as_ref().map(|p| p.reserved_upto);
    let floor = epoch::floor_above(backup_mark.max(previous_mark.unwrap_or(0)))?;
    // The mark first: once it is durable, whatever is (or is not yet) beside it, no start
    // issues a token below the floor.
    let record = Reservation {
        reserved_upto: floor - 1,
        // Unknown: the start treats the restored directory as after a crash across a reboot.
        boot_id: String::new(),
        holdback_until_millis: previous.map(|p| p.holdback_until_millis).unwrap_or(0),
    };
    fencing::store(data_dir, &record)?;
    for stale in [
        format!("{DB_FILE}-wal"),
        format!("{DB_FILE}-shm"),
        CLEAN_MARKER.to_string(),
    ] {
        remove_if_present(&data_dir.join(stale))?;
    }
    let db_file = data_dir.join(DB_FILE);
    fs::rename(&restoring, &db_file).map_err(io_err("cannot rename into", &db_file))?;
    fencing::sync_dir(data_dir).map_err(io_err("cannot sync", data_dir))?;
    Ok(RestoreReport {
        backup_reserved_upto: backup_mark,
        previous_reserved_upto: previous_mark,
        floor,
    })
}

/// The file a backup is written to before it is renamed to `to`.
fn partial_beside(to: &Path) -> PathBuf {
    let mut name = to.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    to.with_file_name(name)
}

/// A stopped data dir (its lock held): its mark from `fencing.json` (at or above every
/// token ever issued) and `VACUUM INTO` on a connection of our own.
fn copy_stopped(data_dir: &Path, to: &Path) -> Result<u64, BackupError> {
    let mark = fencing::load(data_dir)?
        .ok_or_else(|| BackupError::NoStore(data_dir.to_path_buf()))?
        .reserved_upto;
    let conn = Connection::open(data_dir.join(DB_FILE))?;
    let path = to.to_str().ok_or_else(|| BackupError::Io {
        what: "not a UTF-8 path:",
        path: to.to_path_buf(),
        source: io::ErrorKind::InvalidInput.into(),
    })?;
    conn.execute("VACUUM INTO ?1", [path])?;
    Ok(mark)
}

/// A running server copies into its data dir; the copy is moved to `to` from there.
fn copy_from_server(data_dir: &Path, to: &Path) -> Result<u64, BackupError> {
    let taken = super::control::request_backup(data_dir).map_err(|reason| BackupError::Server {
        dir: data_dir.to_path_buf(),
        reason,
    })?;
    let inside = data_dir.join(&taken.file);
    let copied = fs::copy(&inside, to).map_err(io_err("cannot copy", &inside));
    let _ = fs::remove_file(&inside);
    copied?;
    Ok(taken.reserved_upto)
}

/// Adds the record and makes the file self-contained (no WAL) and durable.
fn seal(path: &Path, mark: u64) -> Result<(), BackupError> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "DELETE")?;
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS {META_TABLE};
         CREATE TABLE {META_TABLE} (
             reserved_upto INTEGER NOT NULL,
             taken_at_millis INTEGER NOT NULL,
             epoch_bits INTEGER NOT NULL
         );"
    ))?;
    conn.execute(
        &format!(
            "INSERT INTO {META_TABLE} (reserved_upto, taken_at_millis, epoch_bits)
             VALUES (?1, ?2, ?3)"
        ),
        rusqlite::params![mark, now_millis(), epoch::EPOCH_BITS],
    )?;
    conn.close().map_err(|(_, e)| e)?;
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io_err("cannot sync", path))
}

/// The backup's mark, once the file is whole (its length is what its header says), SQLite
/// finds it intact, and it is a lock-server database with a backup record.
fn verify(path: &Path) -> Result<u64, BackupError> {
    let not = |reason: String| BackupError::NotABackup {
        path: path.to_path_buf(),
        reason,
    };
    check_length(path).map_err(not)?;
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| not(e.to_string()))?;
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| not(e.to_string()))?;
    if integrity != "ok" {
        return Err(not(format!("integrity check: {integrity}")));
    }
    let tables: u32 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'
             AND name IN ('sessions', 'locks', 'ledger_entries')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| not(e.to_string()))?;
    if tables != 3 {
        return Err(not("not a lock-server database".into()));
    }
    let mark: Option<u64> = conn
        .query_row(
            &format!("SELECT reserved_upto FROM {META_TABLE}"),
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|_| not("no backup record: not written by `lock-server backup`".into()))?;
    mark.ok_or_else(|| not("its backup record is empty".into()))
}

/// A torn copy is shorter than its header says: bytes 16–17 are the page size (1 meaning
/// 65,536), bytes 28–31 the page count.
fn check_length(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 100];
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    file.read_exact(&mut header)
        .map_err(|_| format!("only {len} bytes, shorter than an SQLite header"))?;
    if &header[..16] != b"SQLite format 3\0" {
        return Err("not an SQLite database".into());
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    let pages = u64::from(u32::from_be_bytes([
        header[28], header[29], header[30], header[31],
    ]));
    if pages * page_size != len {
        return Err(format!(
            "torn: {len} bytes where its header promises {pages} pages of {page_size}"
        ));
    }
    Ok(())
}

/// Drops the backup record from the copy being restored (a later backup adds its own).
fn unseal(path: &Path) -> Result<(), BackupError> {
    let conn = Connection::open(path)?;
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {META_TABLE};"))?;
    conn.close().map_err(|(_, e)| e)?;
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io_err("cannot sync", path))
}

/// The data dir's entries besides its lock file, by name.
fn other_entries(dir: &Path) -> Result<Vec<String>, BackupError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(io_err("cannot list", dir))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != LOCK_FILE)
        .collect();
    names.sort();
    Ok(names)
}

fn remove_if_present(path: &Path) -> Result<(), BackupError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(BackupError::Io {
            what: "cannot remove",
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn sync_parent(path: &Path) -> Result<(), BackupError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fencing::sync_dir(parent).map_err(io_err("cannot sync", parent))
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl Fn(io::Error) -> BackupError + 'a {
    move |source| BackupError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stopped data dir as a server leaves it: a database and its mark.
    fn stopped_dir(mark: u64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let conn = super::super::db::open_connection(&dir.path().join(DB_FILE)).unwrap();
        conn.execute(
            "INSERT INTO ledger_entries (key, token, entry) VALUES ('k', 7, 'before')",
            [],
        )
        .unwrap();
        drop(conn);
        let record = Reservation {
            reserved_upto: mark,
            boot_id: "b".into(),
            holdback_until_millis: 0,
        };
        fencing::store(dir.path(), &record).unwrap();
        dir
    }

    #[test]
    fn a_restore_starts_at_the_next_epoch_above_both_marks() {
        let source = stopped_dir(65_536);
        let out = tempfile::tempdir().unwrap();
        let file = out.path().join("b.db");
        let report = backup(source.path(), &file).unwrap();
        assert_eq!((report.reserved_upto, report.online), (65_536, false));

        let target = tempfile::tempdir().unwrap();
        let restored = restore(&file, target.path(), false).unwrap();
        assert_eq!(restored.floor, 1 << 40);
        let mark = fencing::load(target.path()).unwrap().unwrap();
        assert_eq!(mark.reserved_upto, (1 << 40) - 1);
        assert!(
            mark.boot_id.is_empty(),
            "restored dirs start as after a reboot"
        );

        // A target that had gone further keeps its own, higher mark as the base.
        let ahead = stopped_dir((3 << 40) + 9);
        let again = restore(&file, ahead.path(), true).unwrap();
        assert_eq!(again.previous_reserved_upto, Some((3 << 40) + 9));
        assert_eq!(again.floor, 4 << 40);
        let conn = Connection::open(ahead.path().join(DB_FILE)).unwrap();
        let entry: String = conn
            .query_row("SELECT entry FROM ledger_entries", [], |r| r.get(0))
            .unwrap();
        assert_eq!(entry, "before");
        let meta: u32 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = ?1",
                [META_TABLE],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(meta, 0, "the backup record is not carried into the store");
    }

    #[test]
    fn a_non_empty_dir_needs_force_and_a_held_dir_is_refused() {
        let source = stopped_dir(10);
        let file = source.path().join("copy.db");
        backup(source.path(), &file).unwrap();
        let target = stopped_dir(5);
        assert!(matches!(
            restore(&file, target.path(), false),
            Err(BackupError::NotEmpty { .. })
        ));
        assert_eq!(
            fencing::load(target.path()).unwrap().unwrap().reserved_upto,
            5
        );
        let _server = DirLock::try_take(target.path()).unwrap().unwrap();
        assert!(matches!(
            restore(&file, target.path(), true),
            Err(BackupError::ServerRunning(_))
        ));
    }

    #[test]
    fn garbage_torn_and_foreign_files_are_refused() {
        let source = stopped_dir(10);
        let good = source.path().join("copy.db");
        backup(source.path(), &good).unwrap();
        let bytes = fs::read(&good).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("garbage", b"not a database at all, clearly".repeat(200)),
            ("torn", bytes[..bytes.len() - 1000].to_vec()),
            ("empty", Vec::new()),
        ];
        for (name, content) in cases {
            let path = dir.path().join(name);
            fs::write(&path, content).unwrap();
            let target = tempfile::tempdir().unwrap();
            let err = restore(&path, target.path(), false).unwrap_err();
            assert!(
                matches!(err, BackupError::NotABackup { .. }),
                "{name}: {err}"
            );
            assert!(fencing::load(target.path()).unwrap().is_none(), "{name}");
            assert!(!target.path().join(DB_FILE).exists(), "{name}");
        }
        // A whole SQLite database that no backup sealed.
        let foreign = dir.path().join("foreign.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let target = tempfile::tempdir().unwrap();
        assert!(matches!(
            restore(&foreign, target.path(), false),
            Err(BackupError::NotABackup { .. })
        ));
    }
}
