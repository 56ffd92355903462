//! The demo fenced resource: it stands for any resource written under a lock, such as a
//! payment rail (`docs/fencing.md`).
//!
//! `POST /v1/demo/ledger/{key}` appends an entry only if its token is ≥ the highest token
//! the ledger has seen for that key; a lower token is 409 FENCED_OUT. Equal tokens are
//! accepted so one holder may write several entries under one grant.

use serde::{Deserialize, Serialize};

/// `POST /v1/demo/ledger/{key}` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LedgerAppend {
    pub fencing_token: u64,
    pub entry: String,
}

/// One accepted entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    pub fencing_token: u64,
    pub entry: String,
}

/// `GET /v1/demo/ledger/{key}` answer, entries in acceptance order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntries {
    pub key: String,
    pub highest_token: Option<u64>,
    pub entries: Vec<LedgerEntry>,
}
