//! The wait queue of a key on etcd (`store::queue` has the rules, `store::holds` which holds
//! go together): tickets `q/<key>/<session>` on their session's lease, in `create_revision`
//! order, shared by every replica, each recording the hold it waits for; and the hand-off
//! ([`EtcdStore::settle`]), which ends holds and grants the key to the queue's head tickets,
//! as many as are compatible, in one transaction.
//!
//! A hold handed to a ticket gets that ticket's `create_revision` as its fencing token,
//! recorded in the hold. Tokens still strictly increase per key, shared holds' too: a hold
//! whose transaction created its key (token = that revision) is granted only while the queue
//! is empty, so every ticket served after it was created after it; and tickets are served in
//! `create_revision` order (a batch of readers in queue order), a skipped (dead) ticket being
//! deleted in the same transaction.
//!
//! What no transaction of ours sees: an etcd lease ending deletes a holder's keys without a
//! hand-off, a ticket's grace period ending writes nothing, and a deadline passing writes
//! nothing. The next transaction on the key that notices — a waiter's attempt, woken at the
//! first holder's deadline or after a grace period at the latest, on any replica — serves the
//! queue. Until then an L7 read may show the key free (or with room) while tickets wait
//! (about `EXPIRY_SLACK` after a deadline; after a lost session, until its millisecond
//! deadline, which the lease outlives).

use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnResponse, WatchFilterType, WatchOptions,
};
use lock_api::{HoldKind, LockGrant};

use super::cache::OpenTicket;
use super::error::{from_etcd, is_lease_gone};
use super::records::{
    held_by, revision_token, unchanged, EndCause, KeyView, LiveSession, LockRecord, TicketRecord,
    Whose,
};
use super::writes::Writes;
use super::{decode, encode, range_results, EtcdStore};
use crate::store::holds::grantable_heads;
use crate::store::lease::now_millis;
use crate::store::queue::Queueing;
use crate::store::{AcquireCall, StoreError};

/// Most compares, and most writes, of one transaction: etcd's default `--max-txn-ops`
/// (ASSUMPTION: the cluster keeps at least the default). A hand-off that would need more
/// (many readers ending or batched at once) is done in several transactions.
const MAX_TXN_OPS: usize = 128;

/// What [`EtcdStore::settle`] did.
pub(super) enum Settled {
    /// Something changed since the view was read; nothing was written.
    Conflict,
    /// Written, or nothing to write.
    Done {
        /// The picked holds it ended: each one's token and whether it was still live.
        ended: Vec<(u64, bool)>,
        /// The holds handed to queued tickets, in queue order.
        granted: Vec<LockGrant>,
        /// It stopped at the size bound of a transaction: more holds to end or tickets to
        /// serve, from a fresh view.
        more: bool,
    },
}

/// What [`EtcdStore::join_queue`] did.
pub(super) enum Joined {
    /// The session's ticket is in the queue, open at least until the request's end, as
    /// written or read at `revision`; a hand-off to it shows up after that. The holds it waits
    /// behind may change without a transaction of ours in `holder_remaining` ms.
    Queued {
        revision: i64,
        ticket: OpenTicket,
        holder_remaining: u64,
    },
    /// Something changed since the view was read: read again.
    Retry,
}

/// A request joining a key's queue, or keeping its place there.
#[derive(Clone, Copy)]
struct Joining<'a> {
    key: &'a str,
    session_id: &'a str,
    ttl_millis: u64,
    hold: HoldKind,
    /// The L4's value (`None`: a re-send keeps the ticket's).
    value: Option<&'a str>,
    queue: Queueing,
    session: &'a LiveSession,
}

/// Where [`EtcdStore::place_in_queue`] found a ticket just written.
enum Placed {
    /// It waits; the holds ahead of it may change unseen in `holder_remaining` ms.
    Waits { holder_remaining: u64 },
    /// Nothing ahead of it is incompatible: it is to be served now.
    Grantable,
}

/// What joining the queue writes, given the session's ticket as read.
enum TicketWrite {
    /// The ticket is live and open at least until the request's end: nothing.
    Open(OpenTicket),
    /// The ticket is past its grace period: this transaction deletes it; then read again.
    Expired(Txn),
    /// No ticket, and a new one would be past the cap.
    Full,
    /// This transaction extends the ticket (`created`: its `create_revision`) or adds a new
    /// one (`None`), whose value is `record`.
    Put {
        txn: Txn,
        created: Option<i64>,
        record: TicketRecord,
    },
}

impl EtcdStore {
    /// The reads of a [`KeyView`]: the stamp, the holds and the queue in ticket order.
    pub(super) fn key_reads(&self, key: &str) -> Vec<TxnOp> {
        let by_age = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        vec![
            TxnOp::get(self.keys.stamp(key), None),
            TxnOp::get(self.keys.holds(key), Some(GetOptions::new().with_prefix())),
            TxnOp::get(self.keys.queue(key), Some(by_age)),
        ]
    }

    /// A [`KeyView`] of `key`.
    pub(super) async fn read_key(&self, key: &str) -> Result<KeyView, StoreError> {
        let (reads, revision) = self.read(self.key_reads(key)).await?;
        KeyView::decode(reads.into_iter(), revision)
    }

    /// Holds while the key's queue has no ticket at all.
    pub(super) fn queue_empty(&self, key: &str) -> Compare {
        Compare::create_revision(self.keys.queue(key), CompareOp::Equal, 0).with_prefix()
    }

    /// Ends the holds of `view` that `pick` accepts (and any past their deadline), then grants
    /// the key to the queue's head tickets while each is compatible with the holds then
    /// (`store::holds`: readers batched up to the first writer, within the limit), dropping the
    /// dead tickets it passes, all in one transaction. It requires the holders, the tickets it
    /// touches and the grantees' sessions to be as read; when it served every live ticket, also
    /// that no ticket joined since the view (the newcomer might have been compatible too).
    /// `claimer`'s ticket, if granted, is claimed: its request is the one settling.
    ///
    /// Each picked live hold it ends gets its cause marker (`cause`, on the hold's lease) in
    /// the same transaction, so watchers tell a release or revoke from an expiry.
    pub(super) async fn settle(
        &self,
        key: &str,
        view: &KeyView,
        pick: impl Fn(&KeyValue, &LockRecord) -> bool,
        claimer: Option<&str>,
        cause: Option<EndCause>,
    ) -> Result<Settled, StoreError> {
        let now = now_millis();
        // The stamp's compares come first: a settle that only ends holds drops them (below).
        let mut compares = self.holders_unchanged(key, view);
        let guarded = compares.len();
        let mut writes = Writes::default();
        let fits = |compares: &Vec<Compare>, writes: &Writes| {
            // Room for one more hold or ticket (at most 2 compares, 4 writes), the stamp and
            // the queue's compare.
            compares.len() + 4 <= MAX_TXN_OPS && writes.len() + 5 <= MAX_TXN_OPS
        };
        let (mut ended, mut stay, mut more) = (Vec::new(), Vec::new(), false);
        let mut ending = Vec::new();
        for (kv, hold) in &view.holds {
            let live = hold.remaining(now).is_some();
            let picked = pick(kv, hold);
            if (live && !picked) || !fits(&compares, &writes) {
                more |= picked || !live;
                if live {
                    stay.push((kv, hold));
                }
                continue;
            }
            compares.push(Compare::create_revision(
                kv.key(),
                CompareOp::Equal,
                kv.create_revision(),
            ));
            self.end_hold(&mut writes, key, &hold.session_id);
            ending.push(hold.session_id.as_str());
            if picked {
                ended.push((hold.token(kv), live));
                if let (Some(cause), true) = (cause, live) {
                    self.write_cause(&mut writes, key, &hold.session_id, cause, kv.lease(), now);
                }
            }
        }
        let changed = !writes.is_empty();
        let mut held = held_by(stay.iter().map(|(_, hold)| hold.hold()));
        let (mut granted, mut lease) = (Vec::new(), None);
        // While holds are still to end, nobody is served: the queue goes to what remains.
        let mut served_all = !more;
        for (kv, ticket) in view.tickets.iter().take_while(|_| !more) {
            if !fits(&compares, &writes) {
                (more, served_all) = (true, false);
                break;
            }
            let session = match ticket.live(now) {
                true => self.ticket_session(&ticket.session_id).await?,
                false => None,
            };
            if let Some(session) = session {
                if !held.admits(ticket.hold()) {
                    served_all = false;
                    break;
                }
                let claimed = claimer == Some(ticket.session_id.as_str());
                let open = open_ticket(kv, ticket);
                let hold = self.hand_to(key, &open, &session, now, claimed, &mut compares)?;
                self.write_hand_off(&mut writes, &hold, session.record.lease);
                held = held.with(hold.hold());
                lease.get_or_insert(session.record.lease);
                granted.push((hold, session.record.lease));
                continue;
            }
            // Dead, or its session is: it leaves the queue.
            compares.push(unchanged(kv));
            writes.delete(self.keys.ticket(key, &ticket.session_id));
        }
        // Ends holds while others stay, serves nobody and nobody queues: no grant depends on
        // it (a grant decided with more holders than there are is still safe), so it neither
        // compares nor rewrites the stamp, and does not race the grants of the key. That
        // nobody queues is compared below (`served_all`): a ticket that joined since the read
        // fails it, and it decides again, with the stamp, so the queue is served.
        let quiet = granted.is_empty() && served_all && !stay.is_empty();
        let mut named = self.keys.stamp(key);
        if quiet {
            compares.drain(..guarded);
            if let ([only], true) = (ending.as_slice(), view.tickets.is_empty()) {
                // It writes that one hold's keys only: it may share a batch with the key's
                // other requests.
                named = self.keys.hold(key, only);
            }
        } else if changed || !granted.is_empty() {
            let holders = stay.len() + granted.len();
            // The stamp goes on a grantee's lease, else on a staying holder's, compared to be
            // still there (so is its lease).
            let staying = stay.iter().max_by_key(|(_, hold)| hold.session_deadline_ms);
            let lease = match (lease, staying) {
                (Some(lease), _) => lease,
                (None, Some((kv, _))) => {
                    compares.push(Compare::create_revision(
                        kv.key(),
                        CompareOp::Equal,
                        kv.create_revision(),
                    ));
                    kv.lease()
                }
                (None, None) => 0,
            };
            self.write_stamp(&mut writes, key, holders, lease);
        }
        if writes.is_empty() {
            return Ok(Settled::Done {
                ended,
                granted: Vec::new(),
                more,
            });
        }
        if served_all {
            compares.push(
                Compare::create_revision(self.keys.queue(key), CompareOp::Less, view.revision + 1)
                    .with_prefix(),
            );
        }
        let txn = Txn::new().when(compares).and_then(writes.into_ops());
        let response = match self.txn_grouped_first(named, txn).await {
            Ok(response) => response,
            // A staying holder's or a grantee's lease ended since the read.
            Err(error) if is_lease_gone(&error) => return Ok(Settled::Conflict),
            Err(error) => return Err(from_etcd(error)),
        };
        if !response.succeeded() {
            // A stale session hint may be why: the next round reads the sessions.
            for (hold, _) in &granted {
                self.hints.forget_session(&hold.session_id);
            }
            return Ok(Settled::Conflict);
        }
        let revision = response.header().map_or(0, |h| h.revision());
        let granted = granted
            .iter()
            .map(|(hold, lease)| {
                let grant = hold.grant(hold.token.unwrap_or(0))?;
                if hold.session_id.as_str() == claimer.unwrap_or_default() {
                    self.remember_holder(hold, grant.fencing_token, revision, revision, *lease);
                }
                Ok(grant)
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Settled::Done {
            ended,
            granted,
            more,
        })
    }

    /// The compares (added to `compares`) and the hold that grant `key` to `ticket` of the
    /// live `session` at `now`: the ticket and the session record must be unchanged; the
    /// ticket leaves the queue (the caller writes the hold). The hold's token is the ticket's
    /// `create_revision`; `claimed` when the ticket's own request is the one answering.
    pub(super) fn hand_to(
        &self,
        key: &str,
        ticket: &OpenTicket,
        session: &LiveSession,
        now: u64,
        claimed: bool,
        compares: &mut Vec<Compare>,
    ) -> Result<LockRecord, StoreError> {
        // The token is granted in the epoch this replica read, while it is the stored one.
        let epoch = self.epochs.now()?;
        compares.push(epoch.unchanged(&self.keys.epoch()));
        let ticket_key = self.keys.ticket(key, &ticket.session_id);
        compares.push(Compare::mod_revision(
            ticket_key,
            CompareOp::Equal,
            ticket.mod_revision,
        ));
        compares.push(Compare::mod_revision(
            self.keys.session(&ticket.session_id),
            CompareOp::Equal,
            session.mod_revision,
        ));
        let hold = ticket.record.hold();
        Ok(LockRecord {
            key: key.to_owned(),
            session_id: ticket.session_id.clone(),
            ttl_millis: ticket.record.ttl_millis,
            mode: hold.mode(),
            limit: hold.limit(),
            deadline_ms: now + ticket.record.ttl_millis,
            session_deadline_ms: session.record.deadline_ms,
            token: Some(revision_token(epoch.epoch, ticket.create_revision)),
            claim_by_ms: match claimed {
                true => None,
                false => ticket.record.times().claim_by(now),
            },
            owner: session.record.owner.clone(),
            value: ticket.record.value.clone(),
            epoch: epoch.epoch,
        })
    }

    /// The writes of [`EtcdStore::hand_to`]: the ticket leaves, the hold is written.
    pub(super) fn write_hand_off(&self, writes: &mut Writes, hold: &LockRecord, lease: i64) {
        writes.delete(self.keys.ticket(&hold.key, &hold.session_id));
        self.write_hold(writes, hold, lease);
    }

    /// Puts this session's ticket in the queue (at the end, if it has none) or keeps it open
    /// until the request's end, waiting for the hold `call` asks for (a re-send asking for
    /// another rewrites it, keeping its place). `holder_remaining` is from `view`. A new ticket
    /// is written only while the key has some hold, so a ticket never joins a queue whose key
    /// was freed meanwhile (nobody would hand it on). Not only the very holds in `view`: while
    /// many join at once, the key may pass from holder to holder before a join's transaction
    /// runs, and the ticket is served all the same. The transaction reads the key back: if
    /// the ticket could be granted at once there (the holds it waited for ended between the
    /// read and the join, with nobody incompatible ahead), the caller decides again, which
    /// serves it; else the holds found give the wake-up. Refuses a ticket past the cap:
    /// counted before writing, and checked again by position after (the queue is shared by
    /// replicas, so two may add at once; the later ticket withdraws).
    pub(super) async fn join_queue(
        &self,
        call: AcquireCall<'_>,
        queue: Queueing,
        session: &LiveSession,
        view: &KeyView,
        holder_remaining: u64,
    ) -> Result<Joined, StoreError> {
        let now = now_millis();
        let joining = Joining {
            key: call.key,
            session_id: call.session_id,
            ttl_millis: call.ttl_millis,
            hold: call.hold,
            value: call.value,
            queue,
            session,
        };
        let batch_key = self.keys.stamp(call.key);
        let (txn, created, record) = match self.ticket_write(&joining, view, now) {
            TicketWrite::Open(ticket) => {
                return Ok(Joined::Queued {
                    revision: view.revision,
                    ticket,
                    holder_remaining,
                });
            }
            TicketWrite::Expired(txn) => {
                self.txn_grouped(batch_key, txn).await.map_err(from_etcd)?;
                return Ok(Joined::Retry);
            }
            TicketWrite::Full => return Err(StoreError::QueueFull),
            TicketWrite::Put {
                txn,
                created,
                record,
            } => (txn, created, record),
        };
        let response = match self.txn_grouped(batch_key, txn).await {
            Ok(response) => response,
            Err(error) if is_lease_gone(&error) => return Err(StoreError::SessionNotFound),
            Err(error) => return Err(from_etcd(error)),
        };
        if !response.succeeded() {
            return Ok(Joined::Retry);
        }
        let revision = response.header().map_or(0, |h| h.revision());
        let holder_remaining = match self
            .place_in_queue(&joining, &response, revision, created.is_none(), now)
            .await?
        {
            Placed::Waits { holder_remaining } => holder_remaining,
            Placed::Grantable => return Ok(Joined::Retry),
        };
        let ticket = OpenTicket {
            session_id: call.session_id.to_owned(),
            create_revision: created.unwrap_or(revision),
            mod_revision: revision,
            record,
        };
        Ok(Joined::Queued {
            revision,
            ticket,
            holder_remaining,
        })
    }

    /// What joining the queue writes, from the session's ticket in `view`.
    fn ticket_write(&self, joining: &Joining<'_>, view: &KeyView, now: u64) -> TicketWrite {
        let Joining {
            key,
            session_id,
            hold,
            value,
            queue,
            session,
            ..
        } = *joining;
        let ticket_key = self.keys.ticket(key, session_id);
        let on_lease = Some(PutOptions::new().with_lease(session.record.lease));
        match view.ticket_of(session_id) {
            Some((kv, ticket))
                if ticket.live(now)
                    && ticket.open_until_ms >= queue.open_until
                    && ticket.hold() == hold
                    && value.is_none_or(|value| ticket.value.as_deref() == Some(value)) =>
            {
                TicketWrite::Open(open_ticket(kv, ticket))
            }
            Some((kv, ticket)) if ticket.live(now) => {
                let extended = TicketRecord {
                    open_until_ms: ticket.open_until_ms.max(queue.open_until),
                    grace_millis: queue.grace,
                    mode: hold.mode(),
                    limit: hold.limit(),
                    value: value.map(str::to_owned).or_else(|| ticket.value.clone()),
                    ..ticket.clone()
                };
                let mut ops = vec![TxnOp::put(ticket_key, encode(&extended), on_lease)];
                ops.extend(self.key_reads(key));
                let txn = Txn::new()
                    .when(vec![unchanged(kv), self.session_unchanged(joining)])
                    .and_then(ops);
                TicketWrite::Put {
                    txn,
                    created: Some(kv.create_revision()),
                    record: extended,
                }
            }
            // Past its grace period: it goes, and the request queues again at the end.
            Some((kv, _)) => TicketWrite::Expired(
                Txn::new()
                    .when(vec![unchanged(kv)])
                    .and_then(vec![TxnOp::delete(ticket_key, None)]),
            ),
            None if view.waiters(now) >= queue.cap => TicketWrite::Full,
            None => self.new_ticket(joining),
        }
    }

    /// A new ticket at the end of the queue, written only while the key has a hold of
    /// another session; the transaction reads the key back.
    fn new_ticket(&self, joining: &Joining<'_>) -> TicketWrite {
        let Joining {
            key,
            session_id,
            hold,
            ..
        } = *joining;
        let record = TicketRecord {
            session_id: session_id.to_owned(),
            ttl_millis: joining.ttl_millis,
            mode: hold.mode(),
            limit: hold.limit(),
            open_until_ms: joining.queue.open_until,
            grace_millis: joining.queue.grace,
            value: joining.value.map(str::to_owned),
        };
        let ticket_key = self.keys.ticket(key, session_id);
        let absent = Compare::create_revision(ticket_key.clone(), CompareOp::Equal, 0);
        let held =
            Compare::create_revision(self.keys.holds(key), CompareOp::Greater, 0).with_prefix();
        let not_ours =
            Compare::create_revision(self.keys.held(session_id, key), CompareOp::Equal, 0);
        let on_lease = Some(PutOptions::new().with_lease(joining.session.record.lease));
        let mut ops = vec![TxnOp::put(ticket_key, encode(&record), on_lease)];
        ops.extend(self.key_reads(key));
        let txn = Txn::new()
            .when(vec![
                absent,
                self.session_unchanged(joining),
                held,
                not_ours,
            ])
            .and_then(ops);
        TicketWrite::Put {
            txn,
            created: None,
            record,
        }
    }

    /// Holds while the joining session's record is the one read.
    fn session_unchanged(&self, joining: &Joining<'_>) -> Compare {
        Compare::mod_revision(
            self.keys.session(joining.session_id),
            CompareOp::Equal,
            joining.session.mod_revision,
        )
    }

    /// After a ticket's transaction, from the key as it read it back: whether the ticket could
    /// be granted now, else when the holds it waits behind may change; for a `new` ticket,
    /// QUEUE_FULL, the ticket withdrawn, if as many live tickets as the cap are ahead of it.
    async fn place_in_queue(
        &self,
        joining: &Joining<'_>,
        response: &TxnResponse,
        revision: i64,
        new: bool,
        now: u64,
    ) -> Result<Placed, StoreError> {
        let queue_now = KeyView::decode(range_results(response).into_iter(), revision)?;
        let ahead: Vec<HoldKind> = queue_now
            .tickets
            .iter()
            .take_while(|(_, t)| t.session_id != *joining.session_id)
            .filter(|(_, t)| t.live(now))
            .map(|(_, t)| t.hold())
            .collect();
        if new && ahead.len() >= joining.queue.cap as usize {
            self.withdraw(joining.key, joining.session_id, revision)
                .await?;
            return Err(StoreError::QueueFull);
        }
        let through_this = [ahead.as_slice(), &[joining.hold]].concat();
        if grantable_heads(queue_now.held(now), through_this.iter().copied()) > ahead.len() {
            return Ok(Placed::Grantable);
        }
        Ok(Placed::Waits {
            holder_remaining: queue_now.holder_remaining(now),
        })
    }

    /// Deletes the ticket this request just wrote at `revision` (it came past the cap).
    async fn withdraw(&self, key: &str, session_id: &str, revision: i64) -> Result<(), StoreError> {
        let ticket_key = self.keys.ticket(key, session_id);
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                ticket_key.clone(),
                CompareOp::Equal,
                revision,
            )])
            .and_then(vec![TxnOp::delete(ticket_key, None)]);
        self.txn_grouped(self.keys.stamp(key), txn)
            .await
            .map_err(from_etcd)?;
        Ok(())
    }

    /// Waits until the key is handed to this session (after `revision`), at most `bound`.
    /// A hand-off to an open request is answered from the watch event itself, with no further
    /// round trip; `None` means "attempt again" (bound reached, an unclaimed hand-off to
    /// claim, or the watch failed).
    ///
    /// The watch starts at etcd's current revision, not at `revision` + 1: etcd serves a
    /// watch that starts in the past from a catch-up loop that runs every 100 ms, so a
    /// hand-off would reach the waiter up to 100 ms late while the key sits idle. What
    /// happened between `revision` and the watch's start is read once instead.
    pub(super) async fn wait_for_hand_off(
        &self,
        key: &str,
        session_id: &str,
        revision: i64,
        bound: Duration,
    ) -> Option<(LockGrant, u64)> {
        let index = self.pinned.load(std::sync::atomic::Ordering::Relaxed) % self.clients.len();
        let mut client = self.clients[index].clone();
        let options = WatchOptions::new().with_filters([WatchFilterType::NoDelete]);
        let held_key = self.keys.held(session_id, key);
        let wait = async {
            let mut stream = client.watch(held_key.clone(), Some(options)).await.ok()?;
            let created = stream.message().await.ok()??;
            let from = created.header().map_or(i64::MAX, |h| h.revision());
            if created.canceled() {
                return None;
            }
            if from > revision {
                if let (Some(kv), _) = self.get(&held_key).await.ok()? {
                    if kv.mod_revision() > revision {
                        return self.handed(session_id, &kv);
                    }
                }
            }
            while let Ok(Some(response)) = stream.message().await {
                if response.canceled() {
                    return None;
                }
                let handed = response.events().iter().find_map(|event| {
                    let kv = event.kv()?;
                    (event.event_type() == EventType::Put && kv.mod_revision() > revision)
                        .then_some(kv)
                });
                if let Some(kv) = handed {
                    return self.handed(session_id, kv);
                }
            }
            None
        };
        tokio::time::timeout(bound, wait).await.ok().flatten()
    }

    /// The answer to a waiting request of `session_id` from the index entry `kv` written by
    /// a hand-off: its grant and lease start, or `None` when the request must attempt again
    /// (someone else's, or an unclaimed hand-off that the idempotent L4 claims).
    fn handed(&self, session_id: &str, kv: &KeyValue) -> Option<(LockGrant, u64)> {
        let lock: LockRecord = decode(kv).ok()?;
        if lock.claim_by_ms.is_some() || lock.session_id != session_id {
            return None;
        }
        let grant = lock.grant(lock.token(kv)).ok()?;
        // The hand-off wrote the hold and the key's stamp in one transaction.
        self.remember_holder(
            &lock,
            grant.fencing_token,
            kv.create_revision(),
            kv.mod_revision(),
            kv.lease(),
        );
        let lease_start = lock.deadline_ms.saturating_sub(lock.ttl_millis);
        Some((grant, lease_start))
    }

    /// A request that kept this session's ticket open until `open_until` ended early: start
    /// the ticket's grace period now, unless a later request extended it. Best effort, in the
    /// background (the request is gone); without it the ticket lives until `open_until` +
    /// grace.
    pub(super) fn end_wait(&self, key: &str, session_id: &str, open_until: u64) {
        let store = self.clone();
        let ticket_key = self.keys.ticket(key, session_id);
        let lock_key = self.keys.stamp(key);
        let end = async move {
            let Ok((Some(kv), _)) = store.get(&ticket_key).await else {
                return;
            };
            let Ok(ticket) = decode::<TicketRecord>(&kv) else {
                return;
            };
            let now = now_millis();
            if ticket.open_until_ms != open_until || open_until <= now {
                return;
            }
            let ended = TicketRecord {
                open_until_ms: now,
                ..ticket
            };
            let txn = Txn::new()
                .when(vec![unchanged(&kv)])
                .and_then(vec![TxnOp::put(
                    ticket_key,
                    encode(&ended),
                    Some(PutOptions::new().with_lease(kv.lease())),
                )]);
            let _ = store.txn_grouped(lock_key, txn).await;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(end);
        }
    }

    /// The live session of a ticket, from this replica's hint or read; `None` if it ended.
    async fn ticket_session(&self, session_id: &str) -> Result<Option<LiveSession>, StoreError> {
        if let Some(live) = self.hinted_session(session_id, Whose::Any) {
            return Ok(Some(live));
        }
        let (kv, _) = self.get(&self.keys.session(session_id)).await?;
        match self.live_session(session_id, Whose::Any, kv.as_ref()) {
            Ok(live) => Ok(Some(live)),
            Err(StoreError::SessionNotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A ticket as read.
fn open_ticket(kv: &KeyValue, ticket: &TicketRecord) -> OpenTicket {
    OpenTicket {
        session_id: ticket.session_id.clone(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        record: ticket.clone(),
    }
}
