//! Sessions: L1 open, L2 heartbeat, L3 close, L5 status.
//!
//! A session is an etcd lease plus the record `s/<id>` on it. L2 at any replica sends one
//! keep-alive for the lease (no replica keeps a stream open) and then, in one transaction,
//! moves the millisecond deadlines of the session and of every lock it still holds; locks
//! whose own TTL ran out are deleted in the same transaction, so a heartbeat never revives one.
//!
//! The record names the auth-file client that opened the session. Every read that finds a
//! session for a request (`live_session`, `hinted_session`, L3's) compares it with the
//! request's client, and a mismatch is SESSION_NOT_FOUND after the same round trips as an
//! unknown id: no extra read, no different answer.
//!
//! L2's version on etcd is a digest of the holds the heartbeat leaves (keys, tokens, modes):
//! the same on every replica and after any restart, and equal to a client's `since` only if
//! the holds are exactly those the client last saw (tokens are never reused, so no set of
//! holds comes back). So "unchanged" costs no list; any other `since` gets the full list. The
//! heartbeat still reads and rewrites every hold of the session, as it must to renew them.

use etcd_client::{Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp};
use lock_api::{HeartbeatResponse, HeldLock, LockStatus, SessionOpened, SessionStatus};

use super::cache::SessionHint;
use super::error::{from_etcd, is_lease_gone, raced};
use super::records::{
    lease_seconds, CauseRecord, EndCause, KeyView, LiveSession, LockRecord, SessionRecord, Whose,
};
use super::{decode, encode, prefix, EtcdStore, CAS_ATTEMPTS};
use crate::store::lease::now_millis;
use crate::store::{session, StoreError};

/// A session read together with its lock index, at one revision.
pub(super) struct SessionView {
    pub id: String,
    pub record: SessionRecord,
    /// `mod_revision` of `s/<id>`, for compare-and-swap.
    pub mod_revision: i64,
    /// The index entries `h/<id>/*` with their records.
    pub held: Vec<(KeyValue, LockRecord)>,
    /// The revision the view was read at.
    pub revision: i64,
}

impl EtcdStore {
    /// L1.
    pub(super) async fn open(
        &self,
        ttl_millis: u64,
        owner: Option<String>,
        client: Option<&str>,
    ) -> Result<SessionOpened, StoreError> {
        let holder_ids = self.holder_ids().await?;
        let seconds = lease_seconds(ttl_millis);
        let lease = self
            .call(|mut client| async move { client.lease_grant(seconds, None).await })
            .await
            .map_err(from_etcd)?
            .id();
        let session_id = session::new_id()?;
        let record = SessionRecord {
            ttl_millis,
            owner,
            client: client.map(str::to_owned),
            lease,
            deadline_ms: now_millis() + ttl_millis,
        };
        let key = self.keys.session(&session_id);
        let value = encode(&record);
        let put = self
            .call(|mut client| {
                let (key, value) = (key.clone(), value.clone());
                async move {
                    let options = PutOptions::new().with_lease(lease);
                    client.put(key, value, Some(options)).await
                }
            })
            .await;
        let put = match put {
            Ok(put) => put,
            Err(error) => {
                // Best effort: an orphan lease would expire by itself anyway.
                let _ = self.revoke_lease(lease).await;
                return Err(from_etcd(error));
            }
        };
        if let Some(header) = put.header() {
            let hint = SessionHint {
                record,
                mod_revision: header.revision(),
            };
            self.hints.remember_session(&session_id, hint);
        }
        let holder_id = holder_ids.of(&session_id);
        Ok(session::opened(session_id, holder_id, ttl_millis))
    }

    /// L2.
    pub(super) async fn renew(
        &self,
        session_id: &str,
        client: Option<&str>,
        since: Option<&str>,
    ) -> Result<HeartbeatResponse, StoreError> {
        for _ in 0..CAS_ATTEMPTS {
            let view = self.read_session(session_id, client).await?;
            self.keep_alive(view.record.lease).await?;
            if let Some(locks) = self.write_renewal(&view).await? {
                let ttl_millis = view.record.ttl_millis;
                let version = holds_digest(&locks);
                return Ok(match since == Some(version.as_str()) {
                    true => HeartbeatResponse::unchanged(ttl_millis, version),
                    false => HeartbeatResponse::full(ttl_millis, Some(version), locks),
                });
            }
        }
        Err(raced("heartbeat lost too many races; retry"))
    }

    /// L3: each lock the session holds passes to its key's queue (one transaction per key),
    /// then revoking the lease deletes the session, its tickets and whatever locks and index
    /// entries are left, atomically.
    pub(super) async fn close(
        &self,
        session_id: &str,
        client: Option<&str>,
    ) -> Result<(), StoreError> {
        let record = match self.session_record(session_id).await? {
            Some((record, _)) if record.client.as_deref() == client => record,
            _ => return Err(StoreError::SessionNotFound),
        };
        self.hints.forget_session(session_id);
        if record.remaining(now_millis()).is_some() && self.hand_on_held(session_id, client).await?
        {
            self.mark_closing(session_id, record.lease).await?;
        }
        match self.revoke_lease(record.lease).await {
            Ok(_) => match record.remaining(now_millis()) {
                Some(_) => Ok(()),
                // It had already expired; the revoke only tidied up.
                None => Err(StoreError::SessionNotFound),
            },
            Err(error) if is_lease_gone(&error) => Err(StoreError::SessionNotFound),
            Err(error) => Err(from_etcd(error)),
        }
    }

    /// L5.
    pub(super) async fn status(
        &self,
        session_id: &str,
        client: Option<&str>,
    ) -> Result<SessionStatus, StoreError> {
        let view = self.read_session(session_id, client).await?;
        let now = now_millis();
        let remaining_millis = view
            .record
            .remaining(now)
            .ok_or(StoreError::SessionNotFound)?;
        let locks = view
            .held
            .iter()
            .filter_map(|(kv, lock)| {
                Some(LockStatus {
                    key: lock.key.clone(),
                    fencing_token: lock.token(kv),
                    remaining_millis: lock.remaining(now)?.min(remaining_millis),
                    mode: lock.mode,
                })
            })
            .collect();
        Ok(SessionStatus {
            session_id: session_id.to_owned(),
            remaining_millis,
            locks,
        })
    }

    /// The live session `session_id` of `client` with its lock index, or SESSION_NOT_FOUND.
    pub(super) async fn read_session(
        &self,
        session_id: &str,
        client: Option<&str>,
    ) -> Result<SessionView, StoreError> {
        let held_by = TxnOp::get(self.keys.held_by(session_id), prefix());
        let (session, mut reads, revision) = self
            .read_session_and(session_id, client, vec![held_by])
            .await?;
        let held = reads
            .pop()
            .unwrap_or_default()
            .into_iter()
            .map(|kv| decode(&kv).map(|lock| (kv, lock)))
            .collect::<Result<_, _>>()?;
        Ok(SessionView {
            id: session_id.to_owned(),
            record: session.record,
            mod_revision: session.mod_revision,
            held,
            revision,
        })
    }

    /// The live session and more reads at the same revision, in one round trip.
    pub(super) async fn read_session_and(
        &self,
        session_id: &str,
        client: Option<&str>,
        others: Vec<TxnOp>,
    ) -> Result<(LiveSession, Vec<Vec<KeyValue>>, i64), StoreError> {
        if !session::is_id(session_id) {
            return Err(StoreError::SessionNotFound);
        }
        let mut ops = vec![TxnOp::get(self.keys.session(session_id), None)];
        ops.extend(others);
        let (mut reads, revision) = self.read(ops).await?;
        let others = reads.split_off(1.min(reads.len()));
        let session_kv = reads.pop().unwrap_or_default().into_iter().next();
        let session = self.live_session(session_id, Whose::Client(client), session_kv.as_ref())?;
        Ok((session, others, revision))
    }

    /// The live session of `client` and a view of `key`, at one revision (L4 without a hint).
    pub(super) async fn read_session_and_key(
        &self,
        session_id: &str,
        client: Option<&str>,
        key: &str,
    ) -> Result<(LiveSession, KeyView), StoreError> {
        let (session, reads, revision) = self
            .read_session_and(session_id, client, self.key_reads(key))
            .await?;
        Ok((session, KeyView::decode(reads.into_iter(), revision)?))
    }

    /// Parses a read of `s/<id>` into a live session `whose` may use and refreshes the hint; a
    /// missing or expired record, or another client's, is SESSION_NOT_FOUND.
    pub(super) fn live_session(
        &self,
        session_id: &str,
        whose: Whose<'_>,
        session_kv: Option<&KeyValue>,
    ) -> Result<LiveSession, StoreError> {
        let Some(session_kv) = session_kv else {
            self.hints.forget_session(session_id);
            return Err(StoreError::SessionNotFound);
        };
        let record: SessionRecord = decode(session_kv)?;
        if !whose.admits(&record) {
            // The owner's hint stays: another client's request must not cost it anything.
            return Err(StoreError::SessionNotFound);
        }
        if record.remaining(now_millis()).is_none() {
            self.hints.forget_session(session_id);
            return Err(StoreError::SessionNotFound);
        }
        let session = LiveSession {
            record,
            mod_revision: session_kv.mod_revision(),
        };
        self.hints.remember_session(session_id, hint(&session));
        Ok(session)
    }

    /// The live session from this replica's hint, if it has one that `whose` may use and that
    /// has not expired. The caller's transaction must compare `mod_revision`. Another client's
    /// session has no hint for it: its request takes the read path an unknown id takes.
    pub(super) fn hinted_session(&self, session_id: &str, whose: Whose<'_>) -> Option<LiveSession> {
        let hint = self
            .hints
            .session(session_id)
            .filter(|hint| whose.admits(&hint.record))?;
        hint.record.remaining(now_millis())?;
        Some(LiveSession {
            record: hint.record,
            mod_revision: hint.mod_revision,
        })
    }

    /// Ends every hold the session has on a key where tickets wait, serving that queue (the
    /// lease's end takes the others); whether any hold is left for the lease's end.
    async fn hand_on_held(
        &self,
        session_id: &str,
        client: Option<&str>,
    ) -> Result<bool, StoreError> {
        let held = match self.read_session(session_id, client).await {
            Ok(view) => view.held,
            Err(StoreError::SessionNotFound) => return Ok(false),
            Err(error) => return Err(error),
        };
        let mut left = false;
        for (_, lock) in held {
            let view = self.read_key(&lock.key).await?;
            match view.tickets.is_empty() {
                true => left = true,
                false => {
                    self.end_holds(&lock.key, view, EndCause::Released, |_, hold| {
                        hold.session_id == session_id
                    })
                    .await?;
                }
            }
        }
        Ok(left)
    }

    /// L3 before revoking a lease that still carries holds: the closing marker `n/<id>` on the
    /// lease, so the revoke deletes it at the revision that deletes the holds, and watchers
    /// see them released rather than expired.
    async fn mark_closing(&self, session_id: &str, lease: i64) -> Result<(), StoreError> {
        let record = CauseRecord {
            cause: EndCause::Released,
            at_ms: now_millis(),
        };
        let (key, value) = (self.keys.closing(session_id), encode(&record));
        let put = self
            .call(|mut client| {
                let (key, value) = (key.clone(), value.clone());
                async move {
                    let options = PutOptions::new().with_lease(lease);
                    client.put(key, value, Some(options)).await
                }
            })
            .await;
        match put {
            Ok(_) => Ok(()),
            Err(error) if is_lease_gone(&error) => Err(StoreError::SessionNotFound),
            Err(error) => Err(from_etcd(error)),
        }
    }

    /// The session record whether or not its deadline passed, for L3's tidy-up.
    async fn session_record(
        &self,
        session_id: &str,
    ) -> Result<Option<(SessionRecord, i64)>, StoreError> {
        if !session::is_id(session_id) {
            return Ok(None);
        }
        match self.get(&self.keys.session(session_id)).await?.0 {
            Some(kv) => Ok(Some((decode(&kv)?, kv.mod_revision()))),
            None => Ok(None),
        }
    }

    /// One keep-alive on a fresh stream: replicas keep no streams, so any replica can renew
    /// any session.
    async fn keep_alive(&self, lease: i64) -> Result<(), StoreError> {
        let keep_alive = self
            .call(|mut client| async move { client.lease_keep_alive(lease).await })
            .await;
        match keep_alive {
            Ok(_) => Ok(()),
            Err(error) if is_lease_gone(&error) => Err(StoreError::SessionNotFound),
            Err(error) => Err(from_etcd(error)),
        }
    }

    /// Moves the deadlines forward if nothing changed since `view` was read; `None` if the
    /// session or one of its locks changed meanwhile (the caller re-reads).
    async fn write_renewal(&self, view: &SessionView) -> Result<Option<Vec<HeldLock>>, StoreError> {
        let now = now_millis();
        let session_deadline = now + view.record.ttl_millis;
        let lease = Some(PutOptions::new().with_lease(view.record.lease));
        let session_key = self.keys.session(&view.id);
        let mut compares = vec![
            Compare::mod_revision(session_key.clone(), CompareOp::Equal, view.mod_revision),
            // No lock joined the index since the read (an acquire racing this heartbeat).
            Compare::mod_revision(
                self.keys.held_by(&view.id),
                CompareOp::Less,
                view.revision + 1,
            )
            .with_prefix(),
        ];
        let renewed = SessionRecord {
            deadline_ms: session_deadline,
            ..view.record.clone()
        };
        let mut ops = vec![TxnOp::put(session_key, encode(&renewed), lease.clone())];
        let mut locks = Vec::new();
        for (kv, lock) in &view.held {
            let held_key = kv.key().to_vec();
            let lock_key = self.keys.hold(&lock.key, &view.id);
            compares.push(Compare::mod_revision(
                held_key.clone(),
                CompareOp::Equal,
                kv.mod_revision(),
            ));
            if lock.remaining(now).is_none() {
                // Like a lease's end, no hand-off: the next transaction on the key serves it.
                ops.push(TxnOp::delete(lock_key, None));
                ops.push(TxnOp::delete(held_key, None));
                ops.push(TxnOp::delete(
                    self.keys.shared_marker(&lock.key, &view.id),
                    None,
                ));
                continue;
            }
            let renewed_lock = encode(&LockRecord {
                deadline_ms: now + lock.ttl_millis,
                session_deadline_ms: session_deadline,
                ..lock.clone()
            });
            ops.push(TxnOp::put(lock_key, renewed_lock.clone(), lease.clone()));
            ops.push(TxnOp::put(held_key, renewed_lock, lease.clone()));
            locks.push(HeldLock {
                key: lock.key.clone(),
                fencing_token: lock.token(kv),
                mode: lock.mode,
            });
        }
        match self.txn_raw(Txn::new().when(compares).and_then(ops)).await {
            Ok(response) if response.succeeded() => {
                if let Some(header) = response.header() {
                    let hint = SessionHint {
                        record: renewed,
                        mod_revision: header.revision(),
                    };
                    self.hints.remember_session(&view.id, hint);
                }
                Ok(Some(locks))
            }
            Ok(_) => Ok(None),
            Err(error) if is_lease_gone(&error) => Err(StoreError::SessionNotFound),
            Err(error) => Err(from_etcd(error)),
        }
    }
}

impl EtcdStore {
    async fn revoke_lease(&self, lease: i64) -> Result<(), etcd_client::Error> {
        self.call(|mut client| async move { client.lease_revoke(lease).await })
            .await
            .map(|_| ())
    }
}

/// L2's version of a session holding `locks` (in the index's key order, the same on every
/// replica): `d.` and 128 bits of a SHA-256 over each hold's key (length-prefixed), token and
/// mode.
fn holds_digest(locks: &[HeldLock]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for lock in locks {
        hash.update((lock.key.len() as u64).to_le_bytes());
        hash.update(lock.key.as_bytes());
        hash.update(lock.fencing_token.to_le_bytes());
        hash.update([u8::from(lock.mode.is_exclusive())]);
    }
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("d.{hex}")
}

/// What this replica remembers of a session it found live.
fn hint(session: &LiveSession) -> SessionHint {
    SessionHint {
        record: session.record.clone(),
        mod_revision: session.mod_revision,
    }
}
