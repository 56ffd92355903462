//! The wait queue of a key on etcd (`store::queue` has the rules): tickets `q/<key>/<session>`
//! on their session's lease, in `create_revision` order, shared by every replica; and the
//! hand-off ([`EtcdStore::pass_on`]), which ends a lock and grants the key to the first live
//! ticket in one transaction.
//!
//! A lock handed to a ticket gets that ticket's `create_revision` as its fencing token,
//! recorded in the lock. Tokens still strictly increase per key: a lock whose transaction
//! created `l/<key>` (token = that revision) is granted only while the queue is empty, so
//! every ticket served after it was created after it; and tickets are served in
//! `create_revision` order, a skipped (dead) ticket being deleted in the same transaction.
//!
//! What no transaction of ours sees: an etcd lease ending deletes the holder's `l/<key>`
//! without a hand-off, and a deadline passing writes nothing. The next transaction on the
//! key that notices — a waiter's attempt, woken at the holder's deadline at the latest, on
//! any replica — hands the key to the first live ticket. Until then an L7 read may show the
//! key free while tickets wait (about `EXPIRY_SLACK` after a deadline; after a lost session,
//! until its millisecond deadline, which the lease outlives).

use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnResponse, WatchFilterType, WatchOptions,
};
use lock_api::LockGrant;

use super::cache::OpenTicket;
use super::error::from_etcd;
use super::records::{unchanged, KeyView, LiveSession, LockRecord, TicketRecord, Whose};
use super::{decode, encode, range_results, EtcdStore};
use crate::store::lease::now_millis;
use crate::store::queue::Queueing;
use crate::store::StoreError;

/// What [`EtcdStore::pass_on`] did.
pub(super) enum PassedOn {
    /// Something changed since the view was read; nothing was written.
    Conflict,
    /// The lock (if any) ended and the key is free: no live ticket waited.
    Freed,
    /// The lock ended and the key went to this ticket's session.
    Handed(LockGrant),
}

/// What [`EtcdStore::join_queue`] did.
pub(super) enum Joined {
    /// The session's ticket is in the queue, open at least until the request's end, as
    /// written or read at `revision`; a hand-off to it shows up after that. The lock it waits
    /// behind lives at most `holder_remaining` ms.
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
    queue: Queueing,
    session: &'a LiveSession,
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
    /// The reads of a [`KeyView`]: `l/<key>` and the queue in ticket order.
    pub(super) fn key_reads(&self, key: &str) -> Vec<TxnOp> {
        let by_age = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        vec![
            TxnOp::get(self.keys.lock(key), None),
            TxnOp::get(self.keys.queue(key), Some(by_age)),
        ]
    }

    /// A [`KeyView`] of `key`.
    pub(super) async fn read_key(&self, key: &str) -> Result<KeyView, StoreError> {
        let (mut reads, revision) = self.read(self.key_reads(key)).await?;
        let tickets = reads.pop().unwrap_or_default();
        let lock = reads.pop().unwrap_or_default();
        KeyView::decode(lock, tickets, revision)
    }

    /// Holds while the key's queue has no ticket at all.
    pub(super) fn queue_empty(&self, key: &str) -> Compare {
        Compare::create_revision(self.keys.queue(key), CompareOp::Equal, 0).with_prefix()
    }

    /// Ends the lock in `view` (if any) and grants the key to the first live ticket, dropping
    /// the dead tickets ahead of it, in one transaction that also requires `guard` (which pins
    /// the lock being ended, or its absence). With no live ticket the key is left free, and
    /// the transaction also requires that no ticket joined since the view.
    pub(super) async fn pass_on(
        &self,
        key: &str,
        view: &KeyView,
        guard: Compare,
    ) -> Result<PassedOn, StoreError> {
        let now = now_millis();
        let mut compares = vec![guard];
        let mut ops = Vec::new();
        let mut handed = None;
        for (kv, ticket) in &view.tickets {
            if ticket.live(now) {
                if let Some(session) = self.ticket_session(&ticket.session_id).await? {
                    let (checks, writes, lock) =
                        self.hand_to(key, &open_ticket(kv, ticket), &session, now);
                    compares.extend(checks);
                    ops.extend(writes);
                    handed = Some(lock);
                    break;
                }
            }
            // Dead, or its session is: it leaves the queue.
            compares.push(unchanged(kv));
            ops.push(TxnOp::delete(kv.key(), None));
        }
        if let Some((_, old)) = &view.lock {
            if handed.as_ref().map(|h| &h.session_id) != Some(&old.session_id) {
                ops.push(TxnOp::delete(self.keys.held(&old.session_id, key), None));
            }
            if handed.is_none() {
                ops.push(TxnOp::delete(self.keys.lock(key), None));
            }
        }
        if handed.is_none() {
            if ops.is_empty() {
                return Ok(PassedOn::Freed);
            }
            compares.push(
                Compare::mod_revision(self.keys.queue(key), CompareOp::Less, view.revision + 1)
                    .with_prefix(),
            );
        }
        let txn = Txn::new().when(compares).and_then(ops);
        let response = self
            .txn_grouped_first(self.keys.lock(key), txn)
            .await
            .map_err(from_etcd)?;
        if !response.succeeded() {
            // A stale session hint may be why: the next round reads the session.
            if let Some(lock) = &handed {
                self.hints.forget_session(&lock.session_id);
            }
            return Ok(PassedOn::Conflict);
        }
        Ok(match handed {
            None => PassedOn::Freed,
            Some(lock) => PassedOn::Handed(lock.grant(lock.token.unwrap_or(0))?),
        })
    }

    /// The compares and writes that grant `key` to `ticket` of the live `session` at `now`:
    /// the ticket and the session record must be unchanged; the lock and its index entry are
    /// written on the session's lease and the ticket leaves the queue. The lock's token is the
    /// ticket's `create_revision`.
    pub(super) fn hand_to(
        &self,
        key: &str,
        ticket: &OpenTicket,
        session: &LiveSession,
        now: u64,
    ) -> (Vec<Compare>, Vec<TxnOp>, LockRecord) {
        let lock = LockRecord {
            key: key.to_owned(),
            session_id: ticket.session_id.clone(),
            ttl_millis: ticket.record.ttl_millis,
            deadline_ms: now + ticket.record.ttl_millis,
            session_deadline_ms: session.record.deadline_ms,
            token: Some(ticket.create_revision as u64),
            claim_by_ms: ticket.record.times().claim_by(now),
            owner: session.record.owner.clone(),
        };
        let ticket_key = self.keys.ticket(key, &ticket.session_id);
        let compares = vec![
            Compare::mod_revision(ticket_key.clone(), CompareOp::Equal, ticket.mod_revision),
            Compare::mod_revision(
                self.keys.session(&ticket.session_id),
                CompareOp::Equal,
                session.mod_revision,
            ),
        ];
        let value = encode(&lock);
        let on_lease = Some(PutOptions::new().with_lease(session.record.lease));
        let ops = vec![
            TxnOp::delete(ticket_key, None),
            TxnOp::put(self.keys.lock(key), value.clone(), on_lease.clone()),
            TxnOp::put(self.keys.held(&ticket.session_id, key), value, on_lease),
        ];
        (compares, ops, lock)
    }

    /// Puts this session's ticket in the queue (at the end, if it has none) or keeps it open
    /// until the request's end. `holder_remaining` is what is left of the live lock of another
    /// session in `view`. A new ticket is written only while some other session's lock is
    /// there, so a ticket never joins a queue whose key was freed meanwhile (nobody would hand
    /// it on). Not only the very lock in `view`: while many join at once, the key may pass
    /// from holder to holder before a join's transaction runs, and the ticket is served all
    /// the same; the lock found is read back for the wake-up at its deadline. Refuses a ticket
    /// past the cap: counted before writing, and checked again by position after (the queue
    /// is shared by replicas, so two may add at once; the later ticket withdraws).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn join_queue(
        &self,
        key: &str,
        session_id: &str,
        ttl_millis: u64,
        queue: Queueing,
        session: &LiveSession,
        view: &KeyView,
        holder_remaining: u64,
    ) -> Result<Joined, StoreError> {
        let now = now_millis();
        let joining = Joining {
            key,
            session_id,
            ttl_millis,
            queue,
            session,
        };
        let (txn, created, record) = match self.ticket_write(&joining, view, now) {
            TicketWrite::Open(ticket) => {
                return Ok(Joined::Queued {
                    revision: view.revision,
                    ticket,
                    holder_remaining,
                });
            }
            TicketWrite::Expired(txn) => {
                self.txn_grouped(self.keys.lock(key), txn)
                    .await
                    .map_err(from_etcd)?;
                return Ok(Joined::Retry);
            }
            TicketWrite::Full => return Err(StoreError::QueueFull),
            TicketWrite::Put {
                txn,
                created,
                record,
            } => (txn, created, record),
        };
        let response = match self.txn_grouped(self.keys.lock(key), txn).await {
            Ok(response) => response,
            Err(error) if super::error::is_lease_gone(&error) => {
                return Err(StoreError::SessionNotFound)
            }
            Err(error) => return Err(from_etcd(error)),
        };
        if !response.succeeded() {
            return Ok(Joined::Retry);
        }
        let revision = response.header().map_or(0, |h| h.revision());
        let holder_remaining = self
            .place_in_queue(&joining, &response, revision, now)
            .await?
            .unwrap_or(holder_remaining);
        let ticket = OpenTicket {
            session_id: session_id.to_owned(),
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
            queue,
            session,
            ..
        } = *joining;
        let ticket_key = self.keys.ticket(key, session_id);
        let on_lease = Some(PutOptions::new().with_lease(session.record.lease));
        match view.ticket_of(session_id) {
            Some((kv, ticket)) if ticket.live(now) && ticket.open_until_ms >= queue.open_until => {
                TicketWrite::Open(open_ticket(kv, ticket))
            }
            Some((kv, ticket)) if ticket.live(now) => {
                let extended = TicketRecord {
                    open_until_ms: queue.open_until,
                    grace_millis: queue.grace,
                    ..ticket.clone()
                };
                let txn = Txn::new()
                    .when(vec![unchanged(kv), self.session_unchanged(joining)])
                    .and_then(vec![TxnOp::put(ticket_key, encode(&extended), on_lease)]);
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

    /// A new ticket at the end of the queue, written only while the key is held by another
    /// session; the transaction reads the key back.
    fn new_ticket(&self, joining: &Joining<'_>) -> TicketWrite {
        let Joining {
            key, session_id, ..
        } = *joining;
        let record = TicketRecord {
            session_id: session_id.to_owned(),
            ttl_millis: joining.ttl_millis,
            open_until_ms: joining.queue.open_until,
            grace_millis: joining.queue.grace,
        };
        let ticket_key = self.keys.ticket(key, session_id);
        let absent = Compare::create_revision(ticket_key.clone(), CompareOp::Equal, 0);
        let held = Compare::create_revision(self.keys.lock(key), CompareOp::Greater, 0);
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

    /// After a new ticket's transaction: what is left of the lock it waits behind, as read
    /// back; QUEUE_FULL, the ticket withdrawn, if as many live tickets as the cap are ahead of
    /// it. `None` when the transaction read nothing back (an extended ticket).
    async fn place_in_queue(
        &self,
        joining: &Joining<'_>,
        response: &TxnResponse,
        revision: i64,
        now: u64,
    ) -> Result<Option<u64>, StoreError> {
        let mut reads = range_results(response).into_iter();
        // The reads of `key_reads`, in its order: the lock, then the queue.
        let (Some(lock), Some(tickets)) = (reads.next(), reads.next()) else {
            return Ok(None);
        };
        let queue_now = KeyView::decode(lock, tickets, revision)?;
        let holder_remaining = queue_now
            .lock
            .as_ref()
            .map_or(0, |(_, lock)| lock.remaining(now).unwrap_or(0));
        let ahead = queue_now
            .tickets
            .iter()
            .take_while(|(_, t)| t.session_id != *joining.session_id)
            .filter(|(_, t)| t.live(now))
            .count();
        if ahead >= joining.queue.cap as usize {
            self.withdraw(joining.key, joining.session_id, revision)
                .await?;
            return Err(StoreError::QueueFull);
        }
        Ok(Some(holder_remaining))
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
        self.txn_grouped(self.keys.lock(key), txn)
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
                        return self.handed(key, session_id, &kv);
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
                    return self.handed(key, session_id, kv);
                }
            }
            None
        };
        tokio::time::timeout(bound, wait).await.ok().flatten()
    }

    /// The answer to a waiting request of `session_id` from the index entry `kv` written by
    /// a hand-off: its grant and lease start, or `None` when the request must attempt again
    /// (someone else's, or an unclaimed hand-off that the idempotent L4 claims).
    fn handed(&self, key: &str, session_id: &str, kv: &KeyValue) -> Option<(LockGrant, u64)> {
        let lock: LockRecord = decode(kv).ok()?;
        if lock.claim_by_ms.is_some() || lock.session_id != session_id {
            return None;
        }
        let grant = lock.grant(lock.token(kv)).ok()?;
        self.hints
            .remember_holder(key, grant.fencing_token, session_id, kv.create_revision());
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
        let lock_key = self.keys.lock(key);
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
