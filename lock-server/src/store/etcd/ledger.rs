//! The demo ledger on etcd, shared by all replicas. `g/<key>` holds the highest token
//! accepted and the entry count; an append is one transaction comparing `g/<key>`'s
//! `mod_revision` with what was read, so two replicas can never both accept on a stale head.

use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use lock_api::{LedgerEntries, LedgerEntry};

use super::error::raced;
use super::records::LedgerHead;
use super::{decode, encode, prefix, EtcdStore, CAS_ATTEMPTS};
use crate::store::StoreError;

impl EtcdStore {
    /// Appends if `token` ≥ the highest token seen for `key`.
    pub(super) async fn append(
        &self,
        key: &str,
        token: u64,
        entry: String,
    ) -> Result<(), StoreError> {
        let head_key = self.keys.ledger_head(key);
        for _ in 0..CAS_ATTEMPTS {
            let (reads, _) = self.read(vec![TxnOp::get(head_key.clone(), None)]).await?;
            let current = reads.into_iter().flatten().next();
            let (head, mod_revision) = match &current {
                Some(kv) => (decode::<LedgerHead>(kv)?, kv.mod_revision()),
                None => (
                    LedgerHead {
                        highest: 0,
                        count: 0,
                    },
                    0,
                ),
            };
            if current.is_some() && token < head.highest {
                return Err(StoreError::FencedOut {
                    highest: head.highest,
                });
            }
            let next = LedgerHead {
                highest: token,
                count: head.count + 1,
            };
            let record = LedgerEntry {
                fencing_token: token,
                entry: entry.clone(),
            };
            let txn = Txn::new()
                .when(vec![Compare::mod_revision(
                    head_key.clone(),
                    CompareOp::Equal,
                    mod_revision,
                )])
                .and_then(vec![
                    TxnOp::put(head_key.clone(), encode(&next), None),
                    TxnOp::put(
                        self.keys.ledger_entry(key, head.count),
                        encode(&record),
                        None,
                    ),
                ]);
            if self.txn(txn).await?.succeeded() {
                return Ok(());
            }
        }
        Err(raced("ledger append lost too many races; retry"))
    }

    /// Every accepted entry of `key`, in acceptance order (zero-padded sequence keys).
    pub(super) async fn entries(&self, key: &str) -> Result<LedgerEntries, StoreError> {
        let (mut reads, _) = self
            .read(vec![
                TxnOp::get(self.keys.ledger_head(key), None),
                TxnOp::get(self.keys.ledger_entries(key), prefix()),
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
