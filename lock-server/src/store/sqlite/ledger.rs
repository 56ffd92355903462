//! The demo ledger: entries in insertion order, and per key the highest token accepted.

use lock_api::{LedgerEntries, LedgerEntry};
use rusqlite::{params, OptionalExtension};

use super::db::{sql, Db};
use crate::store::StoreError;

/// Appends if `token` ≥ the highest token accepted for `key`.
pub(super) fn append(db: &mut Db, key: &str, token: u64, entry: String) -> Result<(), StoreError> {
    if let Some(highest) = head(db, key)? {
        if token < highest {
            return Err(StoreError::FencedOut { highest });
        }
    }
    db.conn
        .prepare_cached("INSERT INTO ledger_entries (key, token, entry) VALUES (?1, ?2, ?3)")
        .map_err(sql)?
        .execute(params![key, token, entry])
        .map_err(sql)?;
    db.conn
        .prepare_cached("INSERT OR REPLACE INTO ledger_heads (key, highest) VALUES (?1, ?2)")
        .map_err(sql)?
        .execute(params![key, token])
        .map_err(sql)?;
    Ok(())
}

/// Every accepted entry of `key`, in order.
pub(super) fn read(db: &mut Db, key: &str) -> Result<LedgerEntries, StoreError> {
    let mut stmt = db
        .conn
        .prepare_cached("SELECT token, entry FROM ledger_entries WHERE key = ?1 ORDER BY seq")
        .map_err(sql)?;
    let entries = stmt
        .query_map([key], |r| {
            Ok(LedgerEntry {
                fencing_token: r.get(0)?,
                entry: r.get(1)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let highest_token = head(db, key)?;
    Ok(LedgerEntries {
        key: key.to_string(),
        highest_token,
        entries,
    })
}

/// The highest token the ledger of `key` has accepted, if any.
fn head(db: &Db, key: &str) -> Result<Option<u64>, StoreError> {
    db.conn
        .prepare_cached("SELECT highest FROM ledger_heads WHERE key = ?1")
        .map_err(sql)?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(sql)
}
