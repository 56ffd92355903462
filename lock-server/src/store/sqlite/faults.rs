//! SQLite and file-system failures → [`StoreError`]. A failure that means "this data
//! directory cannot take writes now" is [`StoreError::StoreUnavailable`] with its cause, so
//! routes answer 503 STORE_UNAVAILABLE and clients retry; anything else is a bug or
//! corruption, [`StoreError::Internal`] (500). The writer rolls the whole batch back on
//! either, so nothing of a failed write is left behind.

use lock_api::Unavailability;
use rusqlite::ErrorCode;

use crate::store::StoreError;

/// `retryAfterMillis` by cause (ASSUMPTION: a full, failing or read-only disk needs an
/// operator, so clients look again each second, the readiness probe's interval; a database
/// locked past the 5 s busy timeout by another process is worth a sooner look).
fn retry_after_millis(cause: Unavailability) -> u64 {
    match cause {
        Unavailability::Busy => 200,
        _ => 1_000,
    }
}

/// STORE_UNAVAILABLE for `cause`.
pub(super) fn unavailable(cause: Unavailability) -> StoreError {
    StoreError::StoreUnavailable {
        cause,
        retry_after_millis: retry_after_millis(cause),
    }
}

/// The cause an SQLite result code stands for, when it is one: SQLITE_FULL, SQLITE_IOERR*,
/// SQLITE_READONLY* and SQLITE_BUSY/SQLITE_LOCKED (rusqlite sets a 5 s busy timeout, so
/// these arrive only after it ran out). Extended codes share their primary code's
/// [`ErrorCode`].
pub(super) fn cause_of_code(code: ErrorCode) -> Option<Unavailability> {
    match code {
        ErrorCode::DiskFull => Some(Unavailability::DiskFull),
        ErrorCode::SystemIoFailure => Some(Unavailability::IoError),
        ErrorCode::ReadOnly => Some(Unavailability::ReadOnly),
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => Some(Unavailability::Busy),
        _ => None,
    }
}

/// Classifies an SQLite error.
pub(super) fn from_sqlite(err: rusqlite::Error) -> StoreError {
    match err.sqlite_error_code().and_then(cause_of_code) {
        Some(cause) => unavailable(cause),
        None => StoreError::Internal(format!("sqlite: {err}")),
    }
}

/// The cause of a failed file write outside SQLite (the token reservation, the markers):
/// no space (ENOSPC, EDQUOT), a read-only file system or file (EROFS, EACCES, EPERM), else
/// an I/O error.
pub(super) fn cause_of_io(err: &std::io::Error) -> Unavailability {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    const EROFS: i32 = 30;
    const EACCES: i32 = 13;
    const EPERM: i32 = 1;
    match err.raw_os_error() {
        Some(ENOSPC | EDQUOT) => Unavailability::DiskFull,
        Some(EROFS | EACCES | EPERM) => Unavailability::ReadOnly,
        _ => Unavailability::IoError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn sqlite_codes_are_classified_by_their_primary_code() {
        use rusqlite::ffi;
        let cases = [
            (ffi::SQLITE_FULL, Unavailability::DiskFull),
            (ffi::SQLITE_IOERR, Unavailability::IoError),
            (ffi::SQLITE_IOERR_WRITE, Unavailability::IoError),
            (ffi::SQLITE_IOERR_FSYNC, Unavailability::IoError),
            (ffi::SQLITE_READONLY, Unavailability::ReadOnly),
            (ffi::SQLITE_READONLY_DBMOVED, Unavailability::ReadOnly),
            (ffi::SQLITE_BUSY, Unavailability::Busy),
            (ffi::SQLITE_BUSY_SNAPSHOT, Unavailability::Busy),
            (ffi::SQLITE_LOCKED, Unavailability::Busy),
        ];
        for (code, cause) in cases {
            match from_sqlite(failure(code)) {
                StoreError::StoreUnavailable {
                    cause: got,
                    retry_after_millis,
                } => {
                    assert_eq!(got, cause, "code {code}");
                    assert!(retry_after_millis > 0);
                }
                other => panic!("code {code}: {other:?}"),
            }
        }
        for code in [
            ffi::SQLITE_CORRUPT,
            ffi::SQLITE_CONSTRAINT,
            ffi::SQLITE_MISUSE,
        ] {
            assert!(matches!(
                from_sqlite(failure(code)),
                StoreError::Internal(_)
            ));
        }
        assert!(matches!(
            from_sqlite(rusqlite::Error::QueryReturnedNoRows),
            StoreError::Internal(_)
        ));
    }

    /// A database that cannot grow (`max_page_count` stands in for a full disk: SQLite answers
    /// it with SQLITE_FULL, as it does ENOSPC) answers STORE_UNAVAILABLE disk_full, and a
    /// batch that failed leaves nothing behind: every acquire answered with the error has no
    /// hold, every granted one has its hold with its token, and the tokens after the fault
    /// are above every token before it.
    #[tokio::test]
    async fn a_full_database_leaves_nothing_half_applied() {
        use std::sync::Arc;

        use lock_api::HoldKind;

        use crate::store::sqlite::test_store::{cap_pages, open};
        use crate::store::sqlite::SqliteStore;
        use crate::store::{AcquireCall, Acquired, NewSession, Store};

        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let session = store
            .open_session(NewSession::with_ttl(60_000))
            .await
            .unwrap()
            .session_id;
        let acquire = |store: Arc<SqliteStore>, key: String, session: String| async move {
            let value = "v".repeat(1000);
            let call = AcquireCall {
                key: &key,
                session_id: &session,
                client: None,
                ttl_millis: 60_000,
                hold: HoldKind::Exclusive,
                value: Some(&value),
                queue: None,
            };
            (key.clone(), store.acquire(call).await)
        };
        let mut before = 0;
        for i in 0..5 {
            let (_, result) = acquire(store.clone(), format!("warm-{i}"), session.clone()).await;
            let Ok(Acquired::Granted(grant)) = result else {
                panic!("{result:?}")
            };
            before = before.max(grant.grant.fencing_token);
        }
        cap_pages(&store, None).await;
        let tasks: Vec<_> = (0..200)
            .map(|i| tokio::spawn(acquire(store.clone(), format!("k-{i}"), session.clone())))
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        // Room again: the reads below must not share a batch with a failing write.
        cap_pages(&store, Some(1_000_000_000)).await;
        let (mut refused, mut granted) = (0, 0);
        for (key, result) in results {
            let state = store.lock_state(&key).await.unwrap();
            match result {
                Ok(Acquired::Granted(grant)) => {
                    granted += 1;
                    let tokens: Vec<u64> = state.holders.iter().map(|h| h.fencing_token).collect();
                    assert_eq!(tokens, [grant.grant.fencing_token], "{key}");
                }
                Err(StoreError::StoreUnavailable {
                    cause: Unavailability::DiskFull,
                    ..
                }) => {
                    refused += 1;
                    assert!(state.holders.is_empty(), "{key}: half-applied {state:?}");
                }
                other => panic!("{key}: {other:?}"),
            }
        }
        assert!(refused > 0, "the database never filled ({granted} granted)");
        store.probe().await.unwrap();
        let (_, result) = acquire(store.clone(), "after".into(), session.clone()).await;
        let Ok(Acquired::Granted(after)) = result else {
            panic!("{result:?}")
        };
        assert!(after.grant.fencing_token > before);
    }

    #[test]
    fn file_errors_are_classified_by_errno() {
        let of = |errno| cause_of_io(&std::io::Error::from_raw_os_error(errno));
        assert_eq!(of(28), Unavailability::DiskFull);
        assert_eq!(of(30), Unavailability::ReadOnly);
        assert_eq!(of(5), Unavailability::IoError);
    }
}
