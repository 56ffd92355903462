//! Locks: L4 acquire, L6 release, L7 read, R1 revoke, and the watch behind `waitMillis`.
//!
//! `l/<key>` holds the live lock, on its session's lease; its `create_revision` is the
//! fencing token. Every transaction that creates, renews or deletes `l/<key>` does the same
//! to the holder's index entry `h/<session>/<key>`, so the two always exist together and
//! carry the same record.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp, WatchOptions};
use lock_api::limits::MAX_FENCING_TOKEN;
use lock_api::{Holder, LockGrant};

use super::error::{from_etcd, is_lease_gone, unavailable};
use super::records::LockRecord;
use super::session::LiveSession;
use super::{decode, encode, EtcdStore, CAS_ATTEMPTS};
use crate::store::lease::now_millis;
use crate::store::wakeup::until_expiry;
use crate::store::{session, Acquired, StoreError};

impl EtcdStore {
    /// L4, one attempt. With a session hint from this replica it is one transaction:
    /// create if the key is free and the session unchanged, else read both back. Loops to
    /// renew the lock when this session already holds it, to take over a lock whose TTL ran
    /// out (deleting it first, so the new grant gets a new `create_revision`) or after losing
    /// a race.
    pub(super) async fn acquire_once(
        &self,
        key: &str,
        session_id: &str,
        client: Option<&str>,
        ttl_millis: u64,
    ) -> Result<Acquired, StoreError> {
        if !session::is_id(session_id) {
            return Err(StoreError::SessionNotFound);
        }
        let mut session = self.hinted_session(session_id, client);
        let mut current: Option<(KeyValue, LockRecord)> = None;
        for _ in 0..CAS_ATTEMPTS {
            let live = match session.take() {
                Some(live) => live,
                None => {
                    let lock_read = TxnOp::get(self.keys.lock(key), None);
                    let (live, kvs, _) =
                        self.read_session_and(session_id, client, lock_read).await?;
                    current = decode_lock(kvs.into_iter().next())?;
                    live
                }
            };
            let now = now_millis();
            let lock_key = self.keys.lock(key);
            let (lock, unchanged) = match current.take() {
                None => (
                    LockRecord {
                        key: key.to_owned(),
                        session_id: session_id.to_owned(),
                        ttl_millis,
                        deadline_ms: now + ttl_millis,
                        session_deadline_ms: live.record.deadline_ms,
                        owner: live.record.owner.clone(),
                    },
                    Compare::create_revision(lock_key, CompareOp::Equal, 0),
                ),
                Some((kv, lock)) => {
                    self.hints
                        .remember_holder(key, kv.create_revision() as u64, &lock.session_id);
                    match lock.remaining(now) {
                        // Idempotent L4: the same grant (same token, the lock's own TTL),
                        // renewed from now, so every answered L4 is a lease from its arrival.
                        Some(_) if lock.session_id == session_id => (
                            LockRecord {
                                deadline_ms: now + lock.ttl_millis,
                                session_deadline_ms: live.record.deadline_ms,
                                ..lock
                            },
                            Compare::mod_revision(lock_key, CompareOp::Equal, kv.mod_revision()),
                        ),
                        Some(_) => return Ok(Acquired::Contended),
                        None => {
                            self.delete_if_unchanged(&kv, &lock).await?;
                            continue;
                        }
                    }
                }
            };
            match self.write_lock(&lock, &live, unchanged).await? {
                Written::Granted(granted) => return Ok(Acquired::Granted(granted)),
                Written::Conflict { session: kv, lock } => {
                    // Both read in the failed transaction: no extra round trip.
                    session = Some(self.live_session(session_id, client, kv.as_ref())?);
                    current = decode_lock(lock)?;
                }
            }
        }
        Err(unavailable("acquire lost too many races; retry"))
    }

    /// L6: compare-and-delete on `(key, token)`; the token is the key's `create_revision`.
    pub(super) async fn release_token(&self, key: &str, token: u64) -> Result<(), StoreError> {
        if let Some(released) = self.release_hinted(key, token).await? {
            return released;
        }
        let Some((kv, lock)) = self.lock_kv(key).await? else {
            return Err(StoreError::LockLost);
        };
        if kv.create_revision() as u64 != token {
            return Err(StoreError::LockLost);
        }
        let live = lock.remaining(now_millis()).is_some();
        let deleted = self
            .txn(
                Txn::new()
                    .when(vec![Compare::create_revision(
                        self.keys.lock(key),
                        CompareOp::Equal,
                        kv.create_revision(),
                    )])
                    .and_then(self.delete_ops(&lock)),
            )
            .await?
            .succeeded();
        // An expired lock is deleted for tidiness but was already lost.
        if deleted && live {
            Ok(())
        } else {
            Err(StoreError::LockLost)
        }
    }

    /// L6 in one transaction when this replica knows the holder of `(key, token)`: the index
    /// key is named by the holder, and both compares pin the exact grant. `None` when there
    /// is no hint or it was wrong (the caller takes the two-step path).
    async fn release_hinted(
        &self,
        key: &str,
        token: u64,
    ) -> Result<Option<Result<(), StoreError>>, StoreError> {
        let Some(holder) = self.hints.holder(key, token) else {
            return Ok(None);
        };
        self.hints.forget_holder(key);
        let (lock_key, held_key) = (self.keys.lock(key), self.keys.held(&holder, key));
        let txn = Txn::new()
            .when(vec![
                Compare::create_revision(lock_key.clone(), CompareOp::Equal, token as i64),
                Compare::create_revision(held_key.clone(), CompareOp::Equal, token as i64),
            ])
            .and_then(vec![
                TxnOp::get(lock_key.clone(), None),
                TxnOp::delete(lock_key.clone(), None),
                TxnOp::delete(held_key, None),
            ]);
        let response = self.txn_grouped(lock_key, txn).await.map_err(from_etcd)?;
        if !response.succeeded() {
            return Ok(None);
        }
        let deleted = decode_lock(super::range_results(&response).into_iter().flatten().next())?;
        // An expired lock is deleted for tidiness but was already lost.
        let live = deleted.is_some_and(|(_, lock)| lock.remaining(now_millis()).is_some());
        Ok(Some(if live {
            Ok(())
        } else {
            Err(StoreError::LockLost)
        }))
    }

    /// L7: the holder named by its holder id, never its session id.
    pub(super) async fn read_holder(&self, key: &str) -> Result<Option<Holder>, StoreError> {
        let holder_ids = self.holder_ids().await?;
        let Some((kv, lock)) = self.lock_kv(key).await? else {
            return Ok(None);
        };
        Ok(lock.remaining(now_millis()).map(|remaining_millis| Holder {
            holder_id: holder_ids.of(&lock.session_id),
            owner: lock.owner,
            fencing_token: kv.create_revision() as u64,
            remaining_millis,
        }))
    }

    /// R1: deletes whatever lock is there; the token only if it was still live.
    pub(super) async fn revoke_key(&self, key: &str) -> Result<Option<u64>, StoreError> {
        for _ in 0..CAS_ATTEMPTS {
            let Some((kv, lock)) = self.lock_kv(key).await? else {
                return Ok(None);
            };
            let live = lock.remaining(now_millis()).is_some();
            if self.delete_if_unchanged(&kv, &lock).await? {
                return Ok(live.then_some(kv.create_revision() as u64));
            }
        }
        Err(unavailable("revoke lost too many races; retry"))
    }

    /// Resolves when `l/<key>` changes (an etcd watch, no polling), when the current holder's
    /// deadline passes (expiry by deadline writes nothing, so no event would come), or after
    /// `timeout`. Errors end the wait early: the caller's retried acquire reports them.
    pub(super) async fn watch_key(&self, key: &str, timeout: Duration) {
        let Ok((current, revision)) = self.get(&self.keys.lock(key)).await else {
            return;
        };
        let bound = match current {
            None => return,
            Some(kv) => match decode::<LockRecord>(&kv)
                .ok()
                .and_then(|l| l.remaining(now_millis()))
            {
                None => return,
                Some(left) => until_expiry(timeout, left),
            },
        };
        let index = self.pinned.load(std::sync::atomic::Ordering::Relaxed) % self.clients.len();
        let mut client = self.clients[index].clone();
        // Start right after the read, so a change between the read and the watch is seen.
        let options = WatchOptions::new().with_start_revision(revision + 1);
        let lock_key = self.keys.lock(key);
        let wait = async {
            let Ok(mut stream) = client.watch(lock_key, Some(options)).await else {
                return;
            };
            while let Ok(Some(response)) = stream.message().await {
                if !response.events().is_empty() || response.canceled() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(bound, wait).await;
    }

    /// The record at `l/<key>`, live or not.
    async fn lock_kv(&self, key: &str) -> Result<Option<(KeyValue, LockRecord)>, StoreError> {
        match self.get(&self.keys.lock(key)).await?.0 {
            Some(kv) => {
                let lock = decode(&kv)?;
                Ok(Some((kv, lock)))
            }
            None => Ok(None),
        }
    }

    /// Writes `l/<key>` and its index entry on the session's lease if `unchanged` holds for
    /// `l/<key>` (absent, to create; the version read, to renew) and the session record is
    /// still the one in `session`; otherwise reads both back in the same transaction.
    async fn write_lock(
        &self,
        lock: &LockRecord,
        session: &LiveSession,
        unchanged: Compare,
    ) -> Result<Written, StoreError> {
        let lock_key = self.keys.lock(&lock.key);
        let session_key = self.keys.session(&lock.session_id);
        let value = encode(lock);
        let on_lease = Some(PutOptions::new().with_lease(session.record.lease));
        let txn = Txn::new()
            .when(vec![
                unchanged,
                Compare::mod_revision(session_key.clone(), CompareOp::Equal, session.mod_revision),
            ])
            .and_then(vec![
                TxnOp::put(lock_key.clone(), value.clone(), on_lease.clone()),
                TxnOp::put(self.keys.held(&lock.session_id, &lock.key), value, on_lease),
                // Read back in the same transaction: its create_revision is the token.
                TxnOp::get(lock_key.clone(), None),
            ])
            .or_else(vec![
                TxnOp::get(session_key, None),
                TxnOp::get(lock_key.clone(), None),
            ]);
        let response = match self.txn_grouped(lock_key, txn).await {
            Ok(response) => response,
            Err(error) if is_lease_gone(&error) => {
                self.hints.forget_session(&lock.session_id);
                return Err(StoreError::SessionNotFound);
            }
            Err(error) => return Err(from_etcd(error)),
        };
        let mut reads = super::range_results(&response).into_iter();
        if !response.succeeded() {
            let session = reads.next().and_then(|kvs| kvs.into_iter().next());
            let lock = reads.next().and_then(|kvs| kvs.into_iter().next());
            return Ok(Written::Conflict { session, lock });
        }
        let written = reads
            .flatten()
            .next()
            .ok_or_else(|| StoreError::Internal("written lock not read back".into()))?;
        let granted = grant(&written, lock)?;
        self.hints
            .remember_holder(&lock.key, granted.fencing_token, &lock.session_id);
        Ok(Written::Granted(granted))
    }

    /// Deletes the lock and its index entry if `l/<key>` is still the version in `kv`.
    async fn delete_if_unchanged(
        &self,
        kv: &KeyValue,
        lock: &LockRecord,
    ) -> Result<bool, StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                self.keys.lock(&lock.key),
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then(self.delete_ops(lock));
        Ok(self.txn(txn).await?.succeeded())
    }

    fn delete_ops(&self, lock: &LockRecord) -> Vec<TxnOp> {
        vec![
            TxnOp::delete(self.keys.lock(&lock.key), None),
            TxnOp::delete(self.keys.held(&lock.session_id, &lock.key), None),
        ]
    }
}

/// What a lock write transaction found.
enum Written {
    Granted(LockGrant),
    /// The lock or the session record was not as expected: both as read by the transaction.
    Conflict {
        session: Option<KeyValue>,
        lock: Option<KeyValue>,
    },
}

/// Decodes an optional read of `l/<key>`.
fn decode_lock(kv: Option<KeyValue>) -> Result<Option<(KeyValue, LockRecord)>, StoreError> {
    match kv {
        Some(kv) => {
            let lock = decode(&kv)?;
            Ok(Some((kv, lock)))
        }
        None => Ok(None),
    }
}

/// The grant for a lock record; refuses a token a JavaScript number cannot hold exactly.
fn grant(kv: &KeyValue, lock: &LockRecord) -> Result<LockGrant, StoreError> {
    let token = kv.create_revision() as u64;
    if token == 0 || token > MAX_FENCING_TOKEN {
        return Err(StoreError::Internal(format!(
            "etcd revision {token} is not a valid fencing token"
        )));
    }
    Ok(LockGrant {
        key: lock.key.clone(),
        session_id: lock.session_id.clone(),
        fencing_token: token,
        ttl_millis: lock.ttl_millis,
    })
}
