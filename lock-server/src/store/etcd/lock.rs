//! Locks: L4 acquire, L6 release, L7 read, R1 revoke.
//!
//! `l/<key>` holds the live lock, on its holder session's lease. Every transaction that
//! creates, renews, hands on or deletes `l/<key>` does the same to the holder's index entry
//! `h/<session>/<key>`, so the two always exist together and carry the same record; the index
//! entry's `create_revision` names one grant (the hinted L6 compares it). The fencing token is
//! [`LockRecord::token`]: `l/<key>`'s `create_revision` when the granting transaction created
//! it, the ticket's when the lock was handed to a queued ticket (`queue`).

use etcd_client::{Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp};
use lock_api::{Holder, LockGrant};

use super::creating::Turn;
use super::error::{from_etcd, is_lease_gone, unavailable};
use super::queue::{Joined, PassedOn};
use super::records::{unchanged, KeyView, LiveSession, LockRecord, Whose};
use super::{encode, EtcdStore, CAS_ATTEMPTS};
use crate::store::lease::now_millis;
use crate::store::queue::Attempt;
use crate::store::{session, AcquireCall, KeyState, StoreError};

impl EtcdStore {
    /// L4, one attempt. With a session hint from this replica an uncontended grant is one
    /// transaction: create if the key is free, nobody queues and the session is unchanged,
    /// else read the session, the lock and the queue back (a key this replica knows to be
    /// held or queued for is read first). From that view it renews the
    /// holder's own lock, queues (or answers contended), or hands on a lock that ended
    /// unnoticed, and goes round again after a lost race.
    pub(super) async fn attempt(&self, call: AcquireCall<'_>) -> Result<Attempt, StoreError> {
        if !session::is_id(call.session_id) {
            return Err(StoreError::SessionNotFound);
        }
        // A key this replica saw granted or queued for is most likely still held: it is read
        // first rather than sent a create that would fail (a write all the same, so an etcd
        // consensus round, on the key a crowd waits for).
        let hinted = self
            .hinted_session(call.session_id, Whose::Client(call.client))
            .filter(|_| !self.hints.contended(call.key));
        let mut round = match hinted {
            Some(live) => Round::Create(live),
            None => Round::Read,
        };
        for _ in 0..CAS_ATTEMPTS {
            let flow = match round {
                Round::Read => {
                    let (live, view) = self
                        .read_session_and_key(call.session_id, call.client, call.key)
                        .await?;
                    self.decide(call, live, &view).await?
                }
                Round::Create(live) => self.create_free(call, live).await?,
                Round::Decide(live, view) => self.decide(call, live, &view).await?,
            };
            match flow {
                Flow::Done(attempt) => return Ok(attempt),
                Flow::Again(next) => round = next,
            }
        }
        Err(unavailable("acquire lost too many races; retry"))
    }

    /// The optimistic create of a free key. One create of a free key at a time from this
    /// replica: the others wait for it, then read the key (most likely held now) and queue or
    /// answer contended.
    async fn create_free(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
    ) -> Result<Flow, StoreError> {
        let (key, now) = (call.key, now_millis());
        let _turn = match self.creating.turn(key) {
            Turn::Create(turn) => turn,
            Turn::Wait(create) => {
                self.creating.wait(key, create).await;
                let (live, read) = self
                    .read_session_and_key(call.session_id, call.client, key)
                    .await?;
                return Ok(Flow::Again(Round::Decide(live, Box::new(read))));
            }
        };
        let lock = LockRecord {
            key: key.to_owned(),
            session_id: call.session_id.to_owned(),
            ttl_millis: call.ttl_millis,
            deadline_ms: now + call.ttl_millis,
            session_deadline_ms: live.record.deadline_ms,
            owner: live.record.owner.clone(),
            token: None,
            claim_by_ms: None,
        };
        let free = vec![
            Compare::create_revision(self.keys.lock(key), CompareOp::Equal, 0),
            self.queue_empty(key),
        ];
        let written = self.write_lock(&lock, &live, free, Vec::new()).await?;
        self.after_write(call, written, now)
    }

    /// A round from the session and the key as read at one revision.
    async fn decide(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        view: &KeyView,
    ) -> Result<Flow, StoreError> {
        let now = now_millis();
        match view.live_lock(now) {
            Some((kv, lock)) if lock.session_id == call.session_id => {
                self.renew_own(call, live, kv, lock, now).await
            }
            Some((_, lock)) => {
                let holder_remaining = lock.remaining(now).unwrap_or(0);
                self.queue_behind(call, &live, view, holder_remaining).await
            }
            // Free and nobody queues: the optimistic create.
            None if view.lock.is_none() && view.tickets.is_empty() => {
                Ok(Flow::Again(Round::Create(live)))
            }
            None => self.hand_on(call, live, view, now).await,
        }
    }

    /// Idempotent L4: the same grant (same token, the lock's own TTL), renewed from now and
    /// claimed, so every answered L4 is a lease from its arrival.
    async fn renew_own(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        kv: &KeyValue,
        lock: &LockRecord,
        now: u64,
    ) -> Result<Flow, StoreError> {
        let renewed = LockRecord {
            deadline_ms: now + lock.ttl_millis,
            session_deadline_ms: live.record.deadline_ms,
            claim_by_ms: None,
            ..lock.clone()
        };
        let claim = vec![TxnOp::delete(
            self.keys.ticket(call.key, call.session_id),
            None,
        )];
        let written = self
            .write_lock(&renewed, &live, vec![unchanged(kv)], claim)
            .await?;
        self.after_write(call, written, now)
    }

    /// Another session holds the key: without a queue the answer is contended; with one the
    /// session's ticket joins the queue or stays open, and a lost race reads again.
    async fn queue_behind(
        &self,
        call: AcquireCall<'_>,
        live: &LiveSession,
        view: &KeyView,
        holder_remaining: u64,
    ) -> Result<Flow, StoreError> {
        let Some(queue) = call.queue else {
            return Ok(Flow::Done(Attempt::Contended));
        };
        let (key, session_id) = (call.key, call.session_id);
        let joined = self
            .join_queue(
                key,
                session_id,
                call.ttl_millis,
                queue,
                live,
                view,
                holder_remaining,
            )
            .await?;
        match joined {
            Joined::Queued {
                revision,
                ticket,
                holder_remaining,
            } => {
                self.hints.remember_ticket(key, ticket);
                Ok(Flow::Done(Attempt::Queued {
                    holder_remaining,
                    seen: revision,
                }))
            }
            Joined::Retry => Ok(Flow::Again(Round::Read)),
        }
    }

    /// The lock ended unnoticed, or tickets wait on a free key: hand it on, maybe to this very
    /// session.
    async fn hand_on(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        view: &KeyView,
        now: u64,
    ) -> Result<Flow, StoreError> {
        let guard = match &view.lock {
            Some((kv, _)) => unchanged(kv),
            None => Compare::create_revision(self.keys.lock(call.key), CompareOp::Equal, 0),
        };
        Ok(match self.pass_on(call.key, view, guard).await? {
            PassedOn::Handed(grant) if grant.session_id == call.session_id => {
                Flow::Done(Attempt::Granted { grant, at: now })
            }
            PassedOn::Freed => Flow::Again(Round::Create(live)),
            PassedOn::Handed(_) | PassedOn::Conflict => Flow::Again(Round::Read),
        })
    }

    /// After a lock write: the grant, or the next round from the session and the key as the
    /// conflicting transaction read them.
    fn after_write(
        &self,
        call: AcquireCall<'_>,
        written: Written,
        now: u64,
    ) -> Result<Flow, StoreError> {
        match written {
            Written::Granted(grant) => Ok(Flow::Done(Attempt::Granted { grant, at: now })),
            Written::Conflict(kv, read) => {
                let whose = Whose::Client(call.client);
                let live = self.live_session(call.session_id, whose, kv.as_ref())?;
                Ok(Flow::Again(Round::Decide(live, read)))
            }
        }
    }

    /// L6: compare-and-delete on `(key, token)`, handing the key to its queue in the same
    /// transaction.
    pub(super) async fn release_token(&self, key: &str, token: u64) -> Result<(), StoreError> {
        let view = match self.release_hinted(key, token).await? {
            Hinted::Released(result) => return result,
            Hinted::Read(view) => view,
            Hinted::NoHint => self.read_key(key).await?,
        };
        match self
            .end_lock(key, view, |kv, lock| lock.token(kv) == token)
            .await?
        {
            Some((_, true)) => Ok(()),
            // An expired lock is deleted for tidiness but was already lost.
            _ => Err(StoreError::LockLost),
        }
    }

    /// L6 in one transaction when this replica knows the grant of `(key, token)`: the holder's
    /// index entry, by its `create_revision`, pins the exact grant. If a request waiting on
    /// this replica holds a ticket for the key, the same transaction hands the key to the
    /// oldest such ticket, provided no older ticket exists anywhere (so it is the queue's
    /// head); else it requires an empty queue. Otherwise the transaction reads the key back.
    async fn release_hinted(&self, key: &str, token: u64) -> Result<Hinted, StoreError> {
        let Some((holder, index_revision)) = self.hints.holder(key, token) else {
            return Ok(Hinted::NoHint);
        };
        self.hints.forget_holder(key);
        let (lock_key, held_key) = (self.keys.lock(key), self.keys.held(&holder, key));
        let mut compares = vec![Compare::create_revision(
            held_key.clone(),
            CompareOp::Equal,
            index_revision,
        )];
        let mut ops = vec![
            TxnOp::get(lock_key.clone(), None),
            TxnOp::delete(held_key, None),
        ];
        let head = self.hints.first_ticket(key).and_then(|ticket| {
            let session = self.hinted_session(&ticket.session_id, Whose::Any)?;
            Some((ticket, session))
        });
        match &head {
            Some((ticket, session)) if ticket.session_id != holder => {
                let (checks, writes, _) = self.hand_to(key, ticket, session, now_millis());
                compares.extend(checks);
                compares.push(
                    Compare::create_revision(
                        self.keys.queue(key),
                        CompareOp::Greater,
                        ticket.create_revision - 1,
                    )
                    .with_prefix(),
                );
                ops.extend(writes);
            }
            _ => {
                compares.push(self.queue_empty(key));
                ops.push(TxnOp::delete(lock_key.clone(), None));
            }
        }
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else(self.key_reads(key));
        let response = self
            .txn_grouped_first(lock_key, txn)
            .await
            .map_err(from_etcd)?;
        let revision = response.header().map_or(0, |h| h.revision());
        let mut reads = super::range_results(&response).into_iter();
        if !response.succeeded() {
            if let Some((ticket, _)) = &head {
                // Maybe a stale session hint: the next hand-off reads the session.
                self.hints.forget_session(&ticket.session_id);
            }
            let lock = reads.next().unwrap_or_default();
            let tickets = reads.next().unwrap_or_default();
            return Ok(Hinted::Read(KeyView::decode(lock, tickets, revision)?));
        }
        let ended = KeyView::decode(reads.next().unwrap_or_default(), Vec::new(), revision)?;
        // An expired lock is deleted (or handed on) for tidiness but was already lost.
        Ok(Hinted::Released(match ended.live_lock(now_millis()) {
            Some(_) => Ok(()),
            None => Err(StoreError::LockLost),
        }))
    }

    /// Ends `key`'s lock if `pick` accepts it, handing the key to its queue in the same
    /// transaction. Returns the ended lock's token and whether it was still live; `None` if
    /// there was no such lock.
    pub(super) async fn end_lock(
        &self,
        key: &str,
        mut view: KeyView,
        pick: impl Fn(&KeyValue, &LockRecord) -> bool,
    ) -> Result<Option<(u64, bool)>, StoreError> {
        for _ in 0..CAS_ATTEMPTS {
            let Some((kv, lock)) = view.lock.as_ref().filter(|(kv, lock)| pick(kv, lock)) else {
                return Ok(None);
            };
            let ended = (lock.token(kv), lock.remaining(now_millis()).is_some());
            match self.pass_on(key, &view, unchanged(kv)).await? {
                PassedOn::Conflict => view = self.read_key(key).await?,
                PassedOn::Freed | PassedOn::Handed(_) => return Ok(Some(ended)),
            }
        }
        Err(unavailable("ending a lock lost too many races; retry"))
    }

    /// L7: the live holder (named by its holder id, never its session id) and the live
    /// tickets, read at one revision.
    pub(super) async fn read_state(&self, key: &str) -> Result<KeyState, StoreError> {
        let holder_ids = self.holder_ids().await?;
        let view = self.read_key(key).await?;
        let now = now_millis();
        let holder = view.live_lock(now).map(|(kv, lock)| Holder {
            holder_id: holder_ids.of(&lock.session_id),
            owner: lock.owner.clone(),
            fencing_token: lock.token(kv),
            remaining_millis: lock.remaining(now).unwrap_or(0),
        });
        Ok(KeyState {
            hold: holder.as_ref().map(|_| lock_api::HoldKind::Exclusive),
            holders: holder.into_iter().collect(),
            waiters: view.waiters(now),
        })
    }

    /// R1: deletes whatever lock is there, handing the key to its queue; the token only if it
    /// was still live.
    pub(super) async fn revoke_key(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let view = self.read_key(key).await?;
        let ended = self.end_lock(key, view, |_, _| true).await?;
        Ok(ended.and_then(|(token, live)| live.then_some(token)))
    }

    /// Writes `l/<key>` and its index entry on the session's lease (plus `extra` operations)
    /// if `unchanged` holds and the session record is still the one in `session`; otherwise
    /// reads the session and the key back in the same transaction.
    async fn write_lock(
        &self,
        lock: &LockRecord,
        session: &LiveSession,
        mut unchanged: Vec<Compare>,
        extra: Vec<TxnOp>,
    ) -> Result<Written, StoreError> {
        let lock_key = self.keys.lock(&lock.key);
        let held_key = self.keys.held(&lock.session_id, &lock.key);
        let session_key = self.keys.session(&lock.session_id);
        let value = encode(lock);
        let on_lease = Some(PutOptions::new().with_lease(session.record.lease));
        unchanged.push(Compare::mod_revision(
            session_key.clone(),
            CompareOp::Equal,
            session.mod_revision,
        ));
        let mut writes = vec![
            TxnOp::put(lock_key.clone(), value.clone(), on_lease.clone()),
            TxnOp::put(held_key.clone(), value, on_lease),
            // Read back in the same transaction: the token, and the grant's index revision.
            TxnOp::get(lock_key.clone(), None),
            TxnOp::get(held_key, None),
        ];
        writes.extend(extra);
        let mut reads = vec![TxnOp::get(session_key, None)];
        reads.extend(self.key_reads(&lock.key));
        let txn = Txn::new().when(unchanged).and_then(writes).or_else(reads);
        let response = match self.txn_grouped(lock_key, txn).await {
            Ok(response) => response,
            Err(error) if is_lease_gone(&error) => {
                self.hints.forget_session(&lock.session_id);
                return Err(StoreError::SessionNotFound);
            }
            Err(error) => return Err(from_etcd(error)),
        };
        let revision = response.header().map_or(0, |h| h.revision());
        let mut reads = super::range_results(&response).into_iter();
        if !response.succeeded() {
            let session = reads.next().and_then(|kvs| kvs.into_iter().next());
            let lock = reads.next().unwrap_or_default();
            let tickets = reads.next().unwrap_or_default();
            return Ok(Written::Conflict(
                session,
                Box::new(KeyView::decode(lock, tickets, revision)?),
            ));
        }
        let (Some(written), Some(index)) = (
            reads.next().and_then(|kvs| kvs.into_iter().next()),
            reads.next().and_then(|kvs| kvs.into_iter().next()),
        ) else {
            return Err(StoreError::Internal("written lock not read back".into()));
        };
        let granted = lock.grant(lock.token(&written))?;
        self.hints.remember_holder(
            &lock.key,
            granted.fencing_token,
            &lock.session_id,
            index.create_revision(),
        );
        Ok(Written::Granted(granted))
    }
}

/// Where the next round of an L4 attempt starts.
enum Round {
    /// Nothing is known: read the session and the key.
    Read,
    /// The session is live and the key was free with nobody queueing: create the lock.
    Create(LiveSession),
    /// The session and the key as read at one revision.
    Decide(LiveSession, Box<KeyView>),
}

/// How a round of an L4 attempt ended.
enum Flow {
    Done(Attempt),
    Again(Round),
}

/// What a lock write transaction found.
enum Written {
    Granted(LockGrant),
    /// The lock, the queue or the session record was not as expected: the session record and
    /// the key as read by the transaction.
    Conflict(Option<KeyValue>, Box<KeyView>),
}

/// What the hinted L6 did.
enum Hinted {
    NoHint,
    Released(Result<(), StoreError>),
    /// The hint was stale or someone queues: the key as read by the same transaction.
    Read(KeyView),
}
