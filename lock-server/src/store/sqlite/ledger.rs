//! The demo ledgers: entries in insertion order, and per key the highest token accepted.
//!
//! Two ledgers of the same shape in tables of their own: the fenced one (`ledger_entries`,
//! `ledger_heads`) refuses a token below the key's highest; the unfenced one
//! (`unfenced_entries`, `unfenced_heads`), a demonstration of what that prevents, accepts it
//! and records it as stale.

use lock_api::{LedgerEntries, LedgerEntry};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use crate::store::StoreError;

/// One ledger's statements. `entries` selects `token, entry, stale` in order (`stale` NULL
/// on the fenced ledger, which stores no stale entry).
struct Tables {
    insert: &'static str,
    set_head: &'static str,
    entries: &'static str,
    head: &'static str,
}

const FENCED: Tables = Tables {
    insert: "INSERT INTO ledger_entries (key, token, entry) VALUES (?1, ?2, ?3)",
    set_head: "INSERT OR REPLACE INTO ledger_heads (key, highest) VALUES (?1, ?2)",
    entries: "SELECT token, entry, NULL FROM ledger_entries WHERE key = ?1 ORDER BY seq",
    head: "SELECT highest FROM ledger_heads WHERE key = ?1",
};

const UNFENCED: Tables = Tables {
    insert: "INSERT INTO unfenced_entries (key, token, entry, stale) VALUES (?1, ?2, ?3, ?4)",
    set_head: "INSERT OR REPLACE INTO unfenced_heads (key, highest) VALUES (?1, ?2)",
    entries: "SELECT token, entry, stale FROM unfenced_entries WHERE key = ?1 ORDER BY seq",
    head: "SELECT highest FROM unfenced_heads WHERE key = ?1",
};

/// Appends to the fenced ledger if `token` ≥ the highest token accepted for `key`.
pub(super) fn append(db: &mut Db, key: &str, token: u64, entry: String) -> Result<(), StoreError> {
    if let Some(highest) = head(db, &FENCED, key)? {
        if token < highest {
            return Err(StoreError::FencedOut { highest });
        }
    }
    db.conn
        .prepare_cached(FENCED.insert)
        .map_err(sql)?
        .execute(params![key, token, entry])
        .map_err(sql)?;
    set_head(db, &FENCED, key, token)
}

/// Appends to the unfenced ledger whatever the token; true when it was stale (below the
/// highest token accepted for `key`, which then stays the highest).
pub(super) fn append_unfenced(
    db: &mut Db,
    key: &str,
    token: u64,
    entry: String,
) -> Result<bool, StoreError> {
    let highest = head(db, &UNFENCED, key)?;
    let stale = highest.is_some_and(|highest| token < highest);
    db.conn
        .prepare_cached(UNFENCED.insert)
        .map_err(sql)?
        .execute(params![key, token, entry, stale])
        .map_err(sql)?;
    if !stale {
        set_head(db, &UNFENCED, key, token)?;
    }
    Ok(stale)
}

/// Every accepted entry of `key` in the fenced ledger, in order.
pub(super) fn read(db: &mut Db, key: &str) -> Result<LedgerEntries, StoreError> {
    entries(db, &FENCED, key)
}

/// Every entry of `key` in the unfenced ledger, in order, each with its `stale`.
pub(super) fn read_unfenced(db: &mut Db, key: &str) -> Result<LedgerEntries, StoreError> {
    entries(db, &UNFENCED, key)
}

fn entries(db: &Db, tables: &Tables, key: &str) -> Result<LedgerEntries, StoreError> {
    let mut stmt = db.conn.prepare_cached(tables.entries).map_err(sql)?;
    let entries = stmt
        .query_map([key], |r| {
            Ok(LedgerEntry {
                fencing_token: r.get(0)?,
                entry: r.get(1)?,
                stale: r.get(2)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let highest_token = head(db, tables, key)?;
    Ok(LedgerEntries {
        key: key.to_string(),
        highest_token,
        entries,
    })
}

fn set_head(db: &Db, tables: &Tables, key: &str, highest: u64) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(tables.set_head)
        .map_err(sql)?
        .execute(params![key, highest])
        .map_err(sql)?;
    Ok(())
}

/// The highest token the ledger of `key` has accepted, if any.
fn head(db: &Db, tables: &Tables, key: &str) -> Result<Option<u64>, StoreError> {
    db.conn
        .prepare_cached(tables.head)
        .map_err(sql)?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(sql)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lock_api::Unavailability;

    use crate::store::sqlite::test_store::{cap_pages, open};
    use crate::store::sqlite::SqliteStore;
    use crate::store::{Store, StoreError};

    /// `(token, entry, stale)` of every entry of the unfenced ledger of `key`.
    async fn unfenced(store: &Arc<SqliteStore>, key: &str) -> Vec<(u64, String, Option<bool>)> {
        let read = store.unfenced_read(key).await.unwrap();
        assert_eq!(read.key, key);
        read.entries
            .into_iter()
            .map(|e| (e.fencing_token, e.entry, e.stale))
            .collect()
    }

    /// The unfenced ledger takes every token, marks those below the key's highest stale
    /// (the highest stays), shares nothing with the fenced ledger, and survives a restart.
    #[tokio::test]
    async fn the_unfenced_ledger_accepts_stale_tokens_and_marks_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let empty = store.unfenced_read("k").await.unwrap();
        assert_eq!((empty.highest_token, empty.entries.len()), (None, 0));
        assert!(!store.unfenced_append("k", 5, "five".into()).await.unwrap());
        assert!(!store
            .unfenced_append("k", 5, "five again".into())
            .await
            .unwrap());
        assert!(store.unfenced_append("k", 3, "stale".into()).await.unwrap());
        assert!(store
            .unfenced_append("k", 4, "stale too".into())
            .await
            .unwrap());
        assert!(!store.unfenced_append("k", 9, "nine".into()).await.unwrap());
        assert!(!store
            .unfenced_append("other", 1, "low".into())
            .await
            .unwrap());
        // The fenced ledger saw none of it, and its writes do not reach the unfenced one.
        assert_eq!(store.ledger_read("k").await.unwrap().highest_token, None);
        store.ledger_append("k", 20, "fenced".into()).await.unwrap();
        assert!(store
            .unfenced_append("k", 8, "still stale".into())
            .await
            .unwrap());
        assert_eq!(
            store.ledger_append("k", 8, "refused".into()).await,
            Err(StoreError::FencedOut { highest: 20 })
        );
        let expected = vec![
            (5, "five".to_string(), Some(false)),
            (5, "five again".into(), Some(false)),
            (3, "stale".into(), Some(true)),
            (4, "stale too".into(), Some(true)),
            (9, "nine".into(), Some(false)),
            (8, "still stale".into(), Some(true)),
        ];
        assert_eq!(unfenced(&store, "k").await, expected);
        assert_eq!(
            store.unfenced_read("k").await.unwrap().highest_token,
            Some(9)
        );
        let fenced = store.ledger_read("k").await.unwrap();
        assert_eq!(fenced.entries.len(), 1);
        assert_eq!(fenced.entries[0].stale, None);
        store.close().await.unwrap();
        drop(store);

        let store = open(dir.path());
        assert_eq!(unfenced(&store, "k").await, expected);
        assert!(store.unfenced_append("k", 2, "after".into()).await.unwrap());
    }

    /// A database that cannot grow answers STORE_UNAVAILABLE disk_full on an unfenced append
    /// and stores nothing of it.
    #[tokio::test]
    async fn a_full_database_refuses_unfenced_appends() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.unfenced_append("k", 1, "warm".into()).await.unwrap();
        cap_pages(&store, None).await;
        let mut accepted = 1;
        let refused = loop {
            match store.unfenced_append("k", 1, "e".repeat(1000)).await {
                Ok(_) if accepted < 1000 => accepted += 1,
                other => break other,
            }
        };
        assert!(
            matches!(
                refused,
                Err(StoreError::StoreUnavailable {
                    cause: Unavailability::DiskFull,
                    ..
                })
            ),
            "{refused:?}"
        );
        assert_eq!(unfenced(&store, "k").await.len(), accepted);
    }
}
