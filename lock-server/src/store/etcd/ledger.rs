//! The demo ledgers on etcd, shared by all replicas. `g/<key>` holds the highest token
//! accepted and the entry count; an append is one transaction comparing `g/<key>`'s
//! `mod_revision` with what was read, so two replicas can never both accept on a stale head.
//!
//! The unfenced ledger, a demonstration of what fencing prevents, has the same shape under
//! `u/` (`u/g/<key>`, `u/e/<key>/<seq>`): it accepts a token below the head's highest too,
//! records it as stale and leaves the highest as it was.

use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use lock_api::{LedgerEntries, LedgerEntry};

use super::error::raced;
use super::records::LedgerHead;
use super::{decode, encode, prefix, EtcdStore, CAS_ATTEMPTS};
use crate::store::StoreError;

/// Which of the two ledgers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ledger {
    /// Refuses a token below the key's highest (409 FENCED_OUT).
    Fenced,
    /// Accepts it and marks the entry stale.
    Unfenced,
}

impl EtcdStore {
    fn head_key(&self, ledger: Ledger, key: &str) -> String {
        match ledger {
            Ledger::Fenced => self.keys.ledger_head(key),
            Ledger::Unfenced => self.keys.unfenced_head(key),
        }
    }

    fn entry_key(&self, ledger: Ledger, key: &str, seq: u64) -> String {
        match ledger {
            Ledger::Fenced => self.keys.ledger_entry(key, seq),
            Ledger::Unfenced => self.keys.unfenced_entry(key, seq),
        }
    }

    fn entries_prefix(&self, ledger: Ledger, key: &str) -> String {
        match ledger {
            Ledger::Fenced => self.keys.ledger_entries(key),
            Ledger::Unfenced => self.keys.unfenced_entries(key),
        }
    }

    /// Appends `entry` to `ledger`: the fenced one refuses a `token` below the highest seen
    /// for `key` ([`StoreError::FencedOut`]), the unfenced one accepts it. Returns whether it
    /// was stale (always false on the fenced ledger).
    pub(super) async fn append(
        &self,
        ledger: Ledger,
        key: &str,
        token: u64,
        entry: String,
    ) -> Result<bool, StoreError> {
        let head_key = self.head_key(ledger, key);
        for _ in 0..CAS_ATTEMPTS {
            let (reads, _) = self.read(vec![TxnOp::get(head_key.clone(), None)]).await?;
            let current = reads.into_iter().flatten().next();
            let (head, mod_revision) = match &current {
                Some(kv) => (Some(decode::<LedgerHead>(kv)?), kv.mod_revision()),
                None => (None, 0),
            };
            let stale = head.is_some_and(|h| token < h.highest);
            if stale && ledger == Ledger::Fenced {
                let highest = head.map_or(0, |h| h.highest);
                return Err(StoreError::FencedOut { highest });
            }
            let count = head.map_or(0, |h| h.count);
            let next = LedgerHead {
                highest: head.map_or(token, |h| h.highest.max(token)),
                count: count + 1,
            };
            let record = LedgerEntry {
                fencing_token: token,
                entry: entry.clone(),
                stale: (ledger == Ledger::Unfenced).then_some(stale),
            };
            let txn = Txn::new()
                .when(vec![Compare::mod_revision(
                    head_key.clone(),
                    CompareOp::Equal,
                    mod_revision,
                )])
                .and_then(vec![
                    TxnOp::put(head_key.clone(), encode(&next), None),
                    TxnOp::put(self.entry_key(ledger, key, count), encode(&record), None),
                ]);
            if self.txn(txn).await?.succeeded() {
                return Ok(stale);
            }
        }
        Err(raced("ledger append lost too many races; retry"))
    }

    /// Every entry of `key` in `ledger`, in acceptance order (zero-padded sequence keys).
    pub(super) async fn entries(
        &self,
        ledger: Ledger,
        key: &str,
    ) -> Result<LedgerEntries, StoreError> {
        let (mut reads, _) = self
            .read(vec![
                TxnOp::get(self.head_key(ledger, key), None),
                TxnOp::get(self.entries_prefix(ledger, key), prefix()),
            ])
            .await?;
        let entry_kvs = reads.pop().unwrap_or_default();
        let head = match reads.pop().unwrap_or_default().first() {
            Some(kv) => Some(decode::<LedgerHead>(kv)?),
            None => None,
        };
        let entries = entry_kvs
            .iter()
            .map(decode::<LedgerEntry>)
            .collect::<Result<_, _>>()?;
        Ok(LedgerEntries {
            key: key.to_owned(),
            highest_token: head.map(|h| h.highest),
            entries,
        })
    }
}
