//! The demo fenced resource: it stands for any resource written under a lock, such as a
//! payment rail (`docs/fencing.md`).
//!
//! `POST /v1/demo/ledger/{key}` appends an entry only if its token is ≥ the highest token
//! the ledger has seen for that key; a lower token is 409 FENCED_OUT. Equal tokens are
//! accepted so one holder may write several entries under one grant.
//!
//! `POST /v1/demo/unfenced-ledger/{key}` is its unfenced twin, a demonstration only (the
//! dashboard's fault lab shows beside it what fencing prevents): it takes the same body and
//! accepts every valid write, answering whether it was stale ([`UnfencedAppended`]), and its
//! `GET` marks each entry's `stale`.

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
    /// The unfenced ledger only: whether the token was lower than the highest the ledger had
    /// accepted for the key before it (a write the fenced ledger refuses). Absent on the
    /// fenced ledger, which accepts no stale write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<bool>,
}

/// `POST /v1/demo/unfenced-ledger/{key}` answer: the write was accepted; `stale` when its
/// token was lower than the highest this ledger had already accepted for the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnfencedAppended {
    pub stale: bool,
}

/// `GET /v1/demo/ledger/{key}` and `GET /v1/demo/unfenced-ledger/{key}` answer, entries in
/// acceptance order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntries {
    pub key: String,
    pub highest_token: Option<u64>,
    pub entries: Vec<LedgerEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stale_is_absent_on_the_fenced_ledger_and_present_on_the_unfenced() {
        let fenced = LedgerEntry {
            fencing_token: 5,
            entry: "e".into(),
            stale: None,
        };
        let text = serde_json::to_value(&fenced).unwrap();
        assert_eq!(text, json!({ "fencingToken": 5, "entry": "e" }));
        assert_eq!(serde_json::from_value::<LedgerEntry>(text).unwrap(), fenced);
        let unfenced = LedgerEntry {
            stale: Some(true),
            ..fenced
        };
        let text = serde_json::to_value(&unfenced).unwrap();
        assert_eq!(
            text,
            json!({ "fencingToken": 5, "entry": "e", "stale": true })
        );
        assert_eq!(
            serde_json::from_value::<LedgerEntry>(text).unwrap(),
            unfenced
        );
        assert_eq!(
            serde_json::to_value(UnfencedAppended { stale: false }).unwrap(),
            json!({ "stale": false })
        );
    }
}
