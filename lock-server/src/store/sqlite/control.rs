//! The data dir's control socket, `control.sock`: how `lock-server backup` asks the server
//! that owns a data dir for a consistent copy of its database.
//!
//! SQLite's exclusive locking mode (see `db`) keeps every other process out of `lock.db`
//! while a server runs, so only the server's own connection can copy it. The socket lives in
//! the data dir, so whoever may use it may read `lock.db` anyway (the Debian unit makes the
//! directory 0700); the socket itself is made 0600. One request per connection, one JSON
//! line each way: `{"op":"backup"}` → `{"file":"backup-<hex>.partial","reservedUpto":N}`
//! or `{"error":"..."}`. The copy is written inside the data dir (the only place the packaged
//! service may write) and moved out by the caller.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::db::Db;
use super::writer::Writer;
use crate::store::StoreError;

/// The socket's name inside the data dir.
pub const SOCKET_FILE: &str = "control.sock";

/// Prefix of the copies the server writes into its data dir; leftovers of an interrupted
/// backup are removed at the next start.
const COPY_PREFIX: &str = "backup-";
const COPY_SUFFIX: &str = ".partial";

/// A request line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum Request {
    Backup,
}

/// An answer line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Answer {
    Taken(Taken),
    Failed { error: String },
}

/// A copy the server took: its file name inside the data dir and the mark at the copy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Taken {
    pub file: String,
    pub reserved_upto: u64,
}

/// Binds the socket (the caller holds the data dir's lock, so an existing one is stale) and
/// serves it for the life of the process. A data dir whose path is too long for a socket
/// address still serves; only online backups are unavailable, which the log says.
pub(super) fn spawn(dir: &Path, writer: Writer) {
    remove_leftover_copies(dir);
    let path = dir.join(SOCKET_FILE);
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!(event = "control_socket_unavailable", path = %path.display(), error = %e);
            return;
        }
    };
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let dir = dir.to_path_buf();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_one(stream, dir.clone(), writer.clone()));
        }
    });
}

async fn serve_one(stream: UnixStream, dir: PathBuf, writer: Writer) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    // A request is a few bytes; a peer that sends more is not one of ours.
    let mut reader = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(read, 1024));
    let answer = match reader.read_line(&mut line).await {
        Ok(_) => match serde_json::from_str::<Request>(line.trim()) {
            Ok(Request::Backup) => take_copy(&dir, &writer).await,
            Err(e) => Answer::Failed {
                error: format!("bad request: {e}"),
            },
        },
        Err(e) => Answer::Failed {
            error: format!("unreadable request: {e}"),
        },
    };
    let mut bytes = serde_json::to_vec(&answer).expect("answer serialises");
    bytes.push(b'\n');
    let _ = write.write_all(&bytes).await;
}

/// `VACUUM INTO` a fresh file of the data dir on the writer thread, between two batches.
async fn take_copy(dir: &Path, writer: &Writer) -> Answer {
    let file = match random_hex() {
        Ok(hex) => format!("{COPY_PREFIX}{hex}{COPY_SUFFIX}"),
        Err(error) => return Answer::Failed { error },
    };
    let path = dir.join(&file);
    let target = path.clone();
    match writer.run_between(move |db| vacuum_into(db, &target)).await {
        Ok(reserved_upto) => {
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            tracing::info!(event = "backup_taken", reservedUpto = reserved_upto, bytes);
            Answer::Taken(Taken {
                file,
                reserved_upto,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            tracing::warn!(event = "backup_failed", error = %e);
            Answer::Failed {
                error: e.to_string(),
            }
        }
    }
}

/// On the writer thread, between batches: the committed database into `to` (a consistent
/// snapshot, without the TEMP wait queues), and the mark now: every token issued so far is
/// at or below it.
fn vacuum_into(db: &mut Db, to: &Path) -> Result<u64, StoreError> {
    let path = to.to_str().ok_or_else(|| {
        StoreError::Internal(format!("backup path {} is not UTF-8", to.display()))
    })?;
    db.conn
        .execute("VACUUM INTO ?1", [path])
        .map_err(|e| StoreError::Internal(format!("backup: {e}")))?;
    Ok(db.tokens.reserved_upto())
}

/// The client side, for `lock-server backup` (blocking: the command does nothing else).
pub(super) fn request_backup(dir: &Path) -> Result<Taken, String> {
    let path = dir.join(SOCKET_FILE);
    let mut stream = std::os::unix::net::UnixStream::connect(&path)
        .map_err(|e| format!("cannot reach its control socket {}: {e}", path.display()))?;
    let mut request = serde_json::to_vec(&Request::Backup).expect("request serialises");
    request.push(b'\n');
    stream
        .write_all(&request)
        .map_err(|e| format!("control socket: {e}"))?;
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(|e| format!("control socket: {e}"))?;
    match serde_json::from_str::<Answer>(&line) {
        Ok(Answer::Taken(taken)) if is_copy_name(&taken.file) => Ok(taken),
        Ok(Answer::Taken(taken)) => Err(format!("unexpected file name {:?}", taken.file)),
        Ok(Answer::Failed { error }) => Err(error),
        Err(_) if line.is_empty() => Err("the server closed the control socket".into()),
        Err(e) => Err(format!("unreadable answer: {e}")),
    }
}

/// Only names the server makes are read (and removed) by the client.
fn is_copy_name(name: &str) -> bool {
    name.strip_prefix(COPY_PREFIX)
        .and_then(|rest| rest.strip_suffix(COPY_SUFFIX))
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn remove_leftover_copies(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if is_copy_name(&entry.file_name().to_string_lossy()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_own_copy_names_are_accepted() {
        assert!(is_copy_name("backup-00ff.partial"));
        for bad in [
            "../lock.db",
            "backup-.partial",
            "backup-zz.partial",
            "lock.db",
            "backup-00/../x.partial",
        ] {
            assert!(!is_copy_name(bad), "{bad}");
        }
    }
}
