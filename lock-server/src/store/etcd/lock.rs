//! Locks: L4 acquire, L6 release, L7 read, R1 revoke.
//!
//! A key's holds are `l/<key>/<session>`, one per holding session, each with its index twin
//! and, when shared, its marker (`holds` has how they are written and how grants are kept
//! from racing). The fencing token is [`LockRecord::token`]: the hold key's `create_revision`
//! when the granting transaction created it, the ticket's when the hold was handed to a
//! queued ticket (`queue`). A grant decided on a key's holds compares the key's stamp, so it
//! commits only if those are still the holds; a transaction that ends holds serves the queue
//! in the same step ([`EtcdStore::settle`]).

use std::collections::BTreeSet;

use etcd_client::{Compare, CompareOp, KeyValue, Txn, TxnOp};
use lock_api::{HoldKind, Holder, LockGrant, LockMode};

use super::cache::HolderHint;
use super::creating::Turn;
use super::error::{from_etcd, is_lease_gone, raced};
use super::queue::{Joined, Settled};
use super::records::{unchanged, EndCause, KeyView, LiveSession, LockRecord, Whose};
use super::writes::Writes;
use super::{EtcdStore, CAS_ATTEMPTS};
use crate::store::holder_id::HolderIds;
use crate::store::holds::{check_limit, grantable_heads, limit_in_force, Held};
use crate::store::lease::now_millis;
use crate::store::queue::Attempt;
use crate::store::{session, AcquireCall, KeyState, SessionRef, StoreError};

/// Waits for this replica's own create of the key, per L4 attempt, before it answers 503
/// (ASSUMPTION: a crowd on one replica is served one create at a time, so each waits about
/// as many turns as requests are ahead of it; these are not lost races).
const TURN_WAITS: usize = 256;

impl EtcdStore {
    /// L4, one attempt. With a session hint from this replica an uncontended grant is one
    /// transaction: create if the key has no hold and no ticket and the session is unchanged,
    /// else read the session, the holds and the queue back (a key this replica knows to be
    /// held or queued for is read first). From that view it renews the session's own hold,
    /// grants beside the holds there, queues (or answers contended), or serves a queue whose
    /// holds ended unnoticed, and goes round again after a lost race.
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
            Some(live) => Round::Create(live, None),
            None => Round::Read,
        };
        let (mut rounds, mut waits) = (0, 0);
        // Whether this round followed a wait for this replica's own create of the key.
        let mut waited = false;
        while rounds < CAS_ATTEMPTS && waits < TURN_WAITS {
            let flow = match round {
                Round::Read => {
                    let (live, view) = self
                        .read_session_and_key(call.session_id, call.client, call.key)
                        .await?;
                    self.decide(call, live, Box::new(view)).await?
                }
                Round::Create(live, view) => self.create(call, live, view).await?,
                Round::Decide(live, view) => self.decide(call, live, view).await?,
            };
            round = match flow {
                Flow::Done(attempt) => return Ok(attempt),
                Flow::Again(next) => {
                    (rounds, waited) = (rounds + 1, false);
                    next
                }
                Flow::Waited(next) => {
                    (waits, waited) = (waits + 1, true);
                    next
                }
                // A decision to grant: not a lost race (the write that follows may be one),
                // unless it is a turn taken again after a wait. Then it counts, as before: a
                // crowd taking turns on one key (limited readers, writers) reads the key after
                // every grant, and a bound on its turns keeps those reads bounded.
                Flow::Next(next) => {
                    rounds += usize::from(std::mem::take(&mut waited));
                    next
                }
            };
        }
        Err(raced("acquire lost too many races; retry"))
    }

    /// A fresh grant: on a key with no hold and no ticket when `view` is `None` (the
    /// optimistic create), else beside the holds of `view`, which the caller found compatible,
    /// with nobody queued. One create of a key at a time from this replica: the others wait
    /// for it, then read the key again (most likely held now: they queue, answer contended, or
    /// are granted beside it).
    async fn create(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        view: Option<Box<KeyView>>,
    ) -> Result<Flow, StoreError> {
        let key = call.key;
        // A reader without a limit beside holders it is compatible with, under a stamp it
        // leaves as it is: such grants do not race each other, so they need no turn.
        let beside = call.hold == HoldKind::Shared { limit: None }
            && view.as_ref().is_some_and(|view| view.stamp.is_some());
        let view = match view {
            Some(view) if beside => return self.create_beside(call, live, &view).await,
            view => view,
        };
        let _turn = match self.creating.turn(key) {
            Turn::Create(turn) => turn,
            Turn::Wait(create) => {
                self.creating.wait(key, create).await;
                let (live, read) = self
                    .read_session_and_key(call.session_id, call.client, key)
                    .await?;
                return Ok(Flow::Waited(Round::Decide(live, Box::new(read))));
            }
        };
        let now = now_millis();
        let hold = self.fresh_hold(call, &live, now);
        let (guard, holders) = match &view {
            None => (self.key_free(key), 1),
            Some(view) => {
                let mut guard = self.holders_unchanged(key, view);
                guard.push(self.queue_empty(key));
                // Its key is created here, so its `create_revision` is this grant's token.
                guard.push(Compare::create_revision(
                    self.keys.hold(key, call.session_id),
                    CompareOp::Equal,
                    0,
                ));
                (guard, view.holds.len() + 1)
            }
        };
        let written = self
            .write_lock(&hold, &live, guard, LockWrite::Fresh { holders })
            .await?;
        self.after_write(call, written, now)
    }

    /// A fresh hold of `call` for the live session, from `now`.
    fn fresh_hold(&self, call: AcquireCall<'_>, live: &LiveSession, now: u64) -> LockRecord {
        LockRecord {
            key: call.key.to_owned(),
            session_id: call.session_id.to_owned(),
            ttl_millis: call.ttl_millis,
            mode: call.hold.mode(),
            limit: call.hold.limit(),
            deadline_ms: now + call.ttl_millis,
            session_deadline_ms: live.record.deadline_ms,
            owner: live.record.owner.clone(),
            token: None,
            claim_by_ms: None,
            value: call.value.map(str::to_owned),
            // Set by `write_lock` from the epoch its transaction compares.
            epoch: 0,
        }
    }

    /// A shared hold without a limit beside the holds of `view` (shared without a limit, as
    /// the caller found them), nobody queued. It compares the stamp as read but does not
    /// rewrite it, so concurrent readers of one key do not fail each other's compares: every
    /// grant that could conflict with this one (an exclusive or limited grant, a hand-off)
    /// rewrites the stamp, and also requires that no hold was created since its own read
    /// ([`EtcdStore::holders_unchanged`]). Sent as its own transaction, not in a batch: one
    /// transaction per grant gives each grant of the key its own revision, so its own token,
    /// and several can be in flight for one key at once.
    async fn create_beside(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        view: &KeyView,
    ) -> Result<Flow, StoreError> {
        let now = now_millis();
        let hold = self.fresh_hold(call, &live, now);
        let guard = vec![
            self.stamp_unchanged(call.key, view),
            self.queue_empty(call.key),
            // Its key is created here, so its `create_revision` is this grant's token.
            Compare::create_revision(
                self.keys.hold(call.key, call.session_id),
                CompareOp::Equal,
                0,
            ),
        ];
        let written = self
            .write_lock(&hold, &live, guard, LockWrite::Beside)
            .await?;
        self.after_write(call, written, now)
    }

    /// A round from the session and the key as read at one revision.
    async fn decide(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        view: Box<KeyView>,
    ) -> Result<Flow, StoreError> {
        let now = now_millis();
        if let Some((kv, hold)) = view.live_hold_of(call.session_id, now) {
            if call.hold == HoldKind::Exclusive && hold.mode == LockMode::Shared {
                return Err(StoreError::UpgradeNotAllowed);
            }
            return self.renew_own(call, live, kv, hold, now).await;
        }
        let (held, queued) = (view.held(now), view.queued(now));
        check_limit(call.hold, limit_in_force(held, queued.iter().copied()))
            .map_err(|in_force| StoreError::LimitMismatch { in_force })?;
        if view.has_expired_holds(now) || grantable_heads(held, queued.iter().copied()) > 0 {
            // Holds ended unnoticed, or tickets wait that could be served: serve them (this
            // session's among them, maybe) and look again.
            return self.serve(call, &view).await;
        }
        if queued.is_empty() && held.admits(call.hold) {
            return Ok(match view.tickets.is_empty() {
                true => Flow::Next(Round::Create(live, Some(view))),
                // Only dead tickets: they go first, then a fresh grant.
                false => self.serve(call, &view).await?,
            });
        }
        let holder_remaining = view.holder_remaining(now);
        self.queue_behind(call, &live, &view, holder_remaining)
            .await
    }

    /// Ends the holds of `view` that expired and serves the queue's compatible head tickets;
    /// granted if this session's ticket was among them, else the next round reads again.
    async fn serve(&self, call: AcquireCall<'_>, view: &KeyView) -> Result<Flow, StoreError> {
        let now = now_millis();
        let settled = self
            .settle(call.key, view, |_, _| false, Some(call.session_id), None)
            .await?;
        let mine = match settled {
            Settled::Done { granted, .. } => granted
                .into_iter()
                .find(|grant| grant.session_id == call.session_id),
            Settled::Conflict => None,
        };
        Ok(match mine {
            Some(grant) => Flow::Done(Attempt::Granted { grant, at: now }),
            None => Flow::Again(Round::Read),
        })
    }

    /// Idempotent L4: the same grant (same token and mode, the hold's own TTL), renewed from
    /// now and claimed, so every answered L4 is a lease from its arrival.
    async fn renew_own(
        &self,
        call: AcquireCall<'_>,
        live: LiveSession,
        kv: &KeyValue,
        hold: &LockRecord,
        now: u64,
    ) -> Result<Flow, StoreError> {
        let renewed = LockRecord {
            deadline_ms: now + hold.ttl_millis,
            session_deadline_ms: live.record.deadline_ms,
            claim_by_ms: None,
            // A renewal with a value replaces it; without one keeps it.
            value: call.value.map(str::to_owned).or_else(|| hold.value.clone()),
            ..hold.clone()
        };
        let written = self
            .write_lock(&renewed, &live, vec![unchanged(kv)], LockWrite::Renewal)
            .await?;
        self.after_write(call, written, now)
    }

    /// The key is held incompatibly, or others queue: without a queue the answer is
    /// contended; with one the session's ticket joins the queue or stays open, and a lost race
    /// (or a ticket that could be served at once) reads again.
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
        match self
            .join_queue(call, queue, live, view, holder_remaining)
            .await?
        {
            Joined::Queued {
                revision,
                ticket,
                holder_remaining,
            } => {
                self.hints.remember_ticket(call.key, ticket);
                Ok(Flow::Done(Attempt::Queued {
                    holder_remaining,
                    seen: revision,
                }))
            }
            Joined::Retry => Ok(Flow::Again(Round::Read)),
        }
    }

    /// After a hold write: the grant, or the next round from the session and the key as the
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

    /// L6: compare-and-delete of the one hold `(key, token)`, serving the key's queue in the
    /// same transaction.
    pub(super) async fn release_token(&self, key: &str, token: u64) -> Result<(), StoreError> {
        let view = match self.release_hinted(key, token).await? {
            Hinted::Released(result) => return result,
            Hinted::Read(view) => view,
            Hinted::NoHint => self.read_key(key).await?,
        };
        let ended = self
            .end_holds(key, view, EndCause::Released, |kv, hold| {
                hold.token(kv) == token
            })
            .await?;
        match ended.contains(&(token, true)) {
            true => Ok(()),
            // An expired hold is deleted for tidiness but was already lost.
            false => Err(StoreError::LockLost),
        }
    }

    /// L6 in one transaction when this replica knows the exclusive grant of `(key, token)`:
    /// the holder's index entry, by its `create_revision`, pins the exact grant, and the key's
    /// stamp, unchanged since, that it is the key's only hold. If a request waiting on this
    /// replica holds an exclusive ticket for the key, the same transaction hands the key to
    /// the oldest such ticket, provided no older ticket exists anywhere (so it is the queue's
    /// head, and the only one served); else it requires an empty queue. Otherwise the
    /// transaction reads the key back.
    async fn release_hinted(&self, key: &str, token: u64) -> Result<Hinted, StoreError> {
        let Some(hint) = self.hints.holder(key, token).filter(|hint| hint.exclusive) else {
            return Ok(Hinted::NoHint);
        };
        self.hints.forget_holder(key);
        let holder = hint.session_id.as_str();
        let hold_key = self.keys.hold(key, holder);
        let mut compares = vec![
            Compare::create_revision(
                self.keys.held(holder, key),
                CompareOp::Equal,
                hint.index_revision,
            ),
            Compare::mod_revision(self.keys.stamp(key), CompareOp::Equal, hint.stamp_revision),
        ];
        let mut writes = Writes::default();
        self.end_hold(&mut writes, key, holder);
        // The compares pin the hold, so its lease is live: the marker can go on it.
        let now = now_millis();
        self.write_cause(
            &mut writes,
            key,
            holder,
            EndCause::Released,
            hint.lease,
            now,
        );
        let head = self.hints.first_ticket(key).and_then(|ticket| {
            let session = self.hinted_session(&ticket.session_id, Whose::Any)?;
            Some((ticket, session))
        });
        let head = head.filter(|(ticket, _)| {
            ticket.session_id != holder && ticket.record.hold() == HoldKind::Exclusive
        });
        match &head {
            Some((ticket, session)) => {
                let hold = self.hand_to(key, ticket, session, now, false, &mut compares)?;
                compares.push(
                    Compare::create_revision(
                        self.keys.queue(key),
                        CompareOp::Greater,
                        ticket.create_revision - 1,
                    )
                    .with_prefix(),
                );
                self.write_hand_off(&mut writes, &hold, session.record.lease);
                self.write_stamp(&mut writes, key, 1, session.record.lease);
            }
            None => {
                compares.push(self.queue_empty(key));
                self.write_stamp(&mut writes, key, 0, 0);
            }
        }
        let mut ops = vec![TxnOp::get(hold_key, None)];
        ops.extend(writes.into_ops());
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else(self.key_reads(key));
        let response = match self.txn_grouped_first(self.keys.stamp(key), txn).await {
            Ok(response) => response,
            // The hinted waiter's session ended: read and settle.
            Err(error) if is_lease_gone(&error) => {
                if let Some((ticket, _)) = &head {
                    self.hints.forget_session(&ticket.session_id);
                }
                return Ok(Hinted::NoHint);
            }
            Err(error) => return Err(from_etcd(error)),
        };
        let revision = response.header().map_or(0, |h| h.revision());
        let reads = super::range_results(&response);
        if !response.succeeded() {
            if let Some((ticket, _)) = &head {
                // Maybe a stale session hint: the next hand-off reads the session.
                self.hints.forget_session(&ticket.session_id);
            }
            return Ok(Hinted::Read(KeyView::decode(reads.into_iter(), revision)?));
        }
        let ended = reads.into_iter().next().unwrap_or_default();
        let live = match ended.first() {
            Some(kv) => super::decode::<LockRecord>(kv)?
                .remaining(now_millis())
                .is_some(),
            None => false,
        };
        // An expired hold is deleted (or handed on) for tidiness but was already lost.
        Ok(Hinted::Released(match live {
            true => Ok(()),
            false => Err(StoreError::LockLost),
        }))
    }

    /// Ends the holds of `key` that `pick` accepts, serving the queue in the same
    /// transaction (in several, when more holds end than one transaction may carry). Returns
    /// each ended hold's token and whether it was still live; empty if `pick` took none.
    pub(super) async fn end_holds(
        &self,
        key: &str,
        mut view: KeyView,
        cause: EndCause,
        pick: impl Fn(&KeyValue, &LockRecord) -> bool,
    ) -> Result<Vec<(u64, bool)>, StoreError> {
        let mut ended = Vec::new();
        if !view.holds.iter().any(|(kv, hold)| pick(kv, hold)) {
            return Ok(ended);
        }
        let mut lost = 0;
        loop {
            match self.settle(key, &view, &pick, None, Some(cause)).await? {
                Settled::Conflict => {
                    lost += 1;
                    if lost >= CAS_ATTEMPTS {
                        return Err(raced("ending a lock lost too many races; retry"));
                    }
                }
                Settled::Done {
                    ended: now_ended,
                    more,
                    ..
                } => {
                    ended.extend(now_ended);
                    if !more {
                        return Ok(ended);
                    }
                }
            }
            view = self.read_key(key).await?;
        }
    }

    /// L7: the live holds (named by their holder ids, never their session ids) in token
    /// order, how they hold the key, and the live tickets, read at one revision.
    pub(super) async fn read_state(&self, key: &str) -> Result<KeyState, StoreError> {
        let holder_ids = self.holder_ids().await?;
        let view = self.read_key(key).await?;
        Ok(state_of(&view, holder_ids, now_millis()))
    }

    /// L9: replaces the value of the hold `(key, token)` of `session`, in one transaction that
    /// requires the hold's record (hence its token and lease) to be the one read, keeping its
    /// lease. The stamp is left as it is: the holders do not change.
    pub(super) async fn proclaim_value(
        &self,
        key: &str,
        session: SessionRef<'_>,
        token: u64,
        value: &str,
    ) -> Result<(), StoreError> {
        let hold_key = self.keys.hold(key, session.id);
        let held_key = self.keys.held(session.id, key);
        for _ in 0..CAS_ATTEMPTS {
            let (_, mut reads, _) = self
                .read_session_and(
                    session.id,
                    session.client,
                    vec![TxnOp::get(hold_key.clone(), None)],
                )
                .await?;
            let Some(kv) = reads.pop().and_then(|kvs| kvs.into_iter().next()) else {
                return Err(StoreError::LockLost);
            };
            let hold: LockRecord = super::decode(&kv)?;
            if hold.token(&kv) != token || hold.remaining(now_millis()).is_none() {
                return Err(StoreError::LockLost);
            }
            if hold.value.as_deref() == Some(value) {
                return Ok(());
            }
            let updated = super::encode(&LockRecord {
                value: Some(value.to_owned()),
                ..hold
            });
            let mut writes = Writes::default();
            writes.put(hold_key.clone(), updated.clone(), kv.lease());
            writes.put(held_key.clone(), updated, kv.lease());
            let txn = Txn::new()
                .when(vec![unchanged(&kv)])
                .and_then(writes.into_ops());
            match self.txn_raw(txn).await {
                Ok(response) if response.succeeded() => return Ok(()),
                // A heartbeat or renewal rewrote it meanwhile (or it ended): look again.
                Ok(_) => continue,
                Err(error) if is_lease_gone(&error) => return Err(StoreError::LockLost),
                Err(error) => return Err(from_etcd(error)),
            }
        }
        Err(raced("proclaim lost too many races; retry"))
    }

    /// R1: ends every live hold of the key, or with `only` the one with that token, serving
    /// its queue; the tokens of the holds it ended live, in order.
    pub(super) async fn revoke_key(
        &self,
        key: &str,
        only: Option<u64>,
    ) -> Result<Vec<u64>, StoreError> {
        let view = self.read_key(key).await?;
        let tokens: BTreeSet<u64> = view
            .live_holds(now_millis())
            .map(|(kv, hold)| hold.token(kv))
            .filter(|token| only.is_none_or(|only| only == *token))
            .collect();
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let ended = self
            .end_holds(key, view, EndCause::Revoked, |kv, hold| {
                tokens.contains(&hold.token(kv))
            })
            .await?;
        let mut revoked: Vec<u64> = ended
            .into_iter()
            .filter_map(|(token, live)| live.then_some(token))
            .collect();
        revoked.sort_unstable();
        Ok(revoked)
    }

    /// Writes `hold` and its index entry on the session's lease (`write` says what else) if
    /// `guard` holds and the session record is still the one in `session`, reading them back;
    /// otherwise reads the session and the key back in the same transaction.
    async fn write_lock(
        &self,
        hold: &LockRecord,
        session: &LiveSession,
        mut guard: Vec<Compare>,
        write: LockWrite,
    ) -> Result<Written, StoreError> {
        // Granted in the epoch this replica read, as long as it is still the stored one; a
        // renewal keeps the epoch (and token) it was granted with.
        let epoch = self.epoch_now().await?;
        guard.push(epoch.unchanged(&self.keys.epoch()));
        let fresh;
        let hold = match write {
            LockWrite::Renewal => hold,
            _ => {
                fresh = LockRecord {
                    epoch: epoch.epoch,
                    ..hold.clone()
                };
                &fresh
            }
        };
        let key = hold.key.as_str();
        let hold_key = self.keys.hold(key, &hold.session_id);
        let held_key = self.keys.held(&hold.session_id, key);
        let session_key = self.keys.session(&hold.session_id);
        let lease = session.record.lease;
        guard.push(Compare::mod_revision(
            session_key.clone(),
            CompareOp::Equal,
            session.mod_revision,
        ));
        let mut writes = Writes::default();
        self.write_hold(&mut writes, hold, lease);
        let beside = matches!(write, LockWrite::Beside);
        match write {
            LockWrite::Fresh { holders } => self.write_stamp(&mut writes, key, holders, lease),
            LockWrite::Beside => {}
            // The claim: its ticket, if any, leaves the queue.
            LockWrite::Renewal => writes.delete(self.keys.ticket(key, &hold.session_id)),
        }
        let mut ops = writes.into_ops();
        // Read back in the same transaction: the token, the grant's index revision and the
        // stamp the grant left.
        ops.extend([
            TxnOp::get(hold_key, None),
            TxnOp::get(held_key, None),
            TxnOp::get(self.keys.stamp(key), None),
        ]);
        let mut reads = vec![TxnOp::get(session_key, None)];
        reads.extend(self.key_reads(key));
        let txn = Txn::new().when(guard).and_then(ops).or_else(reads);
        let sent = match beside {
            true => self.txn_raw(txn).await,
            false => self.txn_grouped(self.keys.stamp(key), txn).await,
        };
        let response = match sent {
            Ok(response) => response,
            Err(error) if is_lease_gone(&error) => {
                self.hints.forget_session(&hold.session_id);
                return Err(StoreError::SessionNotFound);
            }
            Err(error) => return Err(from_etcd(error)),
        };
        let revision = response.header().map_or(0, |h| h.revision());
        let mut reads = super::range_results(&response).into_iter();
        if !response.succeeded() {
            // The epoch may be what changed: read it again before the next attempt.
            self.refresh_epoch_soon();
            let session = reads.next().and_then(|kvs| kvs.into_iter().next());
            return Ok(Written::Conflict(
                session,
                Box::new(KeyView::decode(reads, revision)?),
            ));
        }
        let mut first = || reads.next().and_then(|kvs| kvs.into_iter().next());
        let (Some(written), Some(index)) = (first(), first()) else {
            return Err(StoreError::Internal("written hold not read back".into()));
        };
        let stamp_revision = first().map_or(0, |stamp| stamp.mod_revision());
        let granted = hold.grant(hold.token(&written))?;
        self.remember_holder(
            hold,
            granted.fencing_token,
            index.create_revision(),
            stamp_revision,
            lease,
        );
        Ok(Written::Granted(granted))
    }

    /// Remembers a grant this replica made or answered, for a one-transaction release.
    pub(super) fn remember_holder(
        &self,
        hold: &LockRecord,
        token: u64,
        index_revision: i64,
        stamp_revision: i64,
        lease: i64,
    ) {
        let hint = HolderHint {
            lease,
            token,
            session_id: hold.session_id.clone(),
            index_revision,
            stamp_revision,
            exclusive: hold.mode == LockMode::Exclusive,
        };
        self.hints.remember_holder(&hold.key, hint);
    }
}

/// L7's view of `view` at `now`: the live holds (named by their holder ids, never their
/// session ids) in token order with their values, how they hold the key, the live tickets.
pub(super) fn state_of(view: &KeyView, holder_ids: &HolderIds, now: u64) -> KeyState {
    let holders = view
        .live_holds(now)
        .map(|(kv, hold)| Holder {
            value: hold.value.clone(),
            holder_id: holder_ids.of(&hold.session_id),
            owner: hold.owner.clone(),
            fencing_token: hold.token(kv),
            remaining_millis: hold.remaining(now).unwrap_or(0),
        })
        .collect();
    let hold = match view.held(now) {
        Held::Free => None,
        Held::Exclusive => Some(HoldKind::Exclusive),
        Held::Shared { limit, .. } => Some(HoldKind::Shared { limit }),
    };
    KeyState {
        hold,
        holders,
        waiters: view.waiters(now),
    }
}

/// Where the next round of an L4 attempt starts.
enum Round {
    /// Nothing is known: read the session and the key.
    Read,
    /// The session is live and a fresh grant is possible: on a key with no hold and no
    /// ticket (`None`), or beside the holds of the view, with nobody queued.
    Create(LiveSession, Option<Box<KeyView>>),
    /// The session and the key as read at one revision.
    Decide(LiveSession, Box<KeyView>),
}

/// How a round of an L4 attempt ended.
enum Flow {
    Done(Attempt),
    /// Another round, after a lost race or a write that changed what the next one sees.
    Again(Round),
    /// Another round, after waiting for this replica's own create of the key.
    Waited(Round),
    /// The next step of this round: a grant decided on a view (counted by its write).
    Next(Round),
}

/// What a hold write is besides the hold.
enum LockWrite {
    /// A new hold: the key's stamp is rewritten for `holders` holds.
    Fresh { holders: usize },
    /// A new shared hold without a limit beside others: the stamp is left as it is.
    Beside,
    /// The session's own hold, renewed and claimed.
    Renewal,
}

/// What a hold write transaction found.
enum Written {
    Granted(LockGrant),
    /// The holds, the queue or the session record were not as expected: the session record
    /// and the key as read by the transaction.
    Conflict(Option<KeyValue>, Box<KeyView>),
}

/// What the hinted L6 did.
enum Hinted {
    NoHint,
    Released(Result<(), StoreError>),
    /// The hint was stale or someone queues: the key as read by the same transaction.
    Read(KeyView),
}
