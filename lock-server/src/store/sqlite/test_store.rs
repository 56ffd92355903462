//! What the SQLite store's unit tests share: a store in a scratch dir, and a database that
//! cannot grow (`max_page_count` stands in for a full disk: SQLite answers it with
//! SQLITE_FULL, as it does ENOSPC).

use std::path::Path;
use std::sync::Arc;

use super::{SqliteOptions, SqliteStore};
use crate::store::StoreError;

/// A test's own SQLite failure (not through `faults`, which tests with this module).
fn sql(err: rusqlite::Error) -> StoreError {
    StoreError::Internal(err.to_string())
}

/// A store in `dir`, after a clean start (no hold-back).
pub(super) fn open(dir: &Path) -> Arc<SqliteStore> {
    let boot_id = dir.join("boot_id");
    std::fs::write(&boot_id, "boot\n").unwrap();
    SqliteStore::open(&SqliteOptions {
        data_dir: dir.to_path_buf(),
        boot_id_path: boot_id,
        unclean_holdback_millis: 0,
        feed_limits: Default::default(),
    })
    .unwrap()
}

/// Caps the database at `pages` pages, or at its current size with `None`: past it every
/// write that needs a new page fails as on a full disk.
pub(super) async fn cap_pages(store: &SqliteStore, pages: Option<u64>) {
    store
        .writer
        .run(move |db| {
            let pages = match pages {
                Some(pages) => pages,
                None => db
                    .conn
                    .pragma_query_value(None, "page_count", |r| r.get(0))
                    .map_err(sql)?,
            };
            db.conn
                .pragma_update(None, "max_page_count", pages)
                .map_err(sql)
        })
        .await
        .unwrap();
}
