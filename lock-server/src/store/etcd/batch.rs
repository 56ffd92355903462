//! Group commit for the hot path: L4's create (or renewal) and L6's compare-and-delete
//! transactions of different keys share one etcd round trip when the replica is busy.
//!
//! Why: every etcd transaction pays gRPC, raft proposal and apply costs on the members, which
//! on a busy cluster dominate the cost of a lock. When fewer than [`MAX_IN_FLIGHT`]
//! transactions of this replica are in flight, a request sends its own transaction at once (no
//! added hop or delay for a lone client). Otherwise it queues; whenever an in-flight
//! transaction completes, everything queued goes out as one outer transaction whose
//! operations are the queued transactions, nested (etcd ≥ 3.3). Each nested transaction
//! evaluates its own compares, so one request's lost race never fails another's.
//!
//! A transaction that ends a lock and hands its key on (L6, R1, an expiry noticed) queues
//! ahead of the others: when many requests queue for one key, as when a crowd joins its wait
//! queue at once, the release they wait for is not held up behind them.
//!
//! Rules that keep a batch valid:
//! - etcd refuses a transaction that writes one key twice ("duplicate key"), so a batch holds
//!   at most one transaction per lock key (every transaction on a key's holds, index entries
//!   and tickets is named by the key's stamp); a second one for the same key waits for the
//!   next batch.
//! - A put on a lease that has gone fails the whole outer transaction. The creates and
//!   renewals compare their session record's revision first, and etcd deletes a lease's keys
//!   in the same step that ends the lease, so a write whose put is attempted has a live lease.
//!   Should a batch fail that way anyway, its transactions are re-sent one by one, so only the
//!   request whose session is gone sees it.
//! - All writes of one batch share one etcd revision. Fencing tokens are per key, and keys in
//!   a batch are distinct, so every key's tokens still strictly increase.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use etcd_client::{Error, Txn, TxnOp, TxnOpResponse, TxnResponse};
use tokio::sync::oneshot;

use super::error::is_lease_gone;
use super::EtcdStore;

/// Transactions of this replica in flight before requests start to queue (ASSUMPTION: 2; a
/// lone client never waits, and on a busy replica the queue forms batches).
const MAX_IN_FLIGHT: usize = 2;

/// Nested transactions per batch (ASSUMPTION: 32, well inside etcd's default
/// `--max-txn-ops` of 128, which bounds the operations of each level).
const MAX_BATCH: usize = 32;

/// The queue of transactions waiting for a slot.
#[derive(Default)]
pub(super) struct Batcher {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    /// Slots taken: direct transactions and batches in flight.
    in_flight: usize,
    waiting: VecDeque<Waiting>,
}

struct Waiting {
    lock_key: String,
    txn: Txn,
    turn: Turn,
    reply: oneshot::Sender<Result<TxnResponse, Error>>,
}

impl EtcdStore {
    /// Runs `txn`, which writes only keys of the lock key `lock_key` names (its stamp, holds,
    /// their index entries and markers, its tickets), alone or in a batch.
    /// Answers exactly as [`EtcdStore::txn_raw`] would for `txn` alone.
    pub(super) async fn txn_grouped(
        &self,
        lock_key: String,
        txn: Txn,
    ) -> Result<TxnResponse, Error> {
        self.txn_in_turn(lock_key, txn, Turn::Last).await
    }

    /// [`EtcdStore::txn_grouped`] for a transaction that ends a lock (and hands the key on):
    /// if it has to queue, it goes ahead of everything queued, so a release is not held up
    /// behind a crowd of requests that queue for the very key it frees.
    pub(super) async fn txn_grouped_first(
        &self,
        lock_key: String,
        txn: Txn,
    ) -> Result<TxnResponse, Error> {
        self.txn_in_turn(lock_key, txn, Turn::First).await
    }

    async fn txn_in_turn(
        &self,
        lock_key: String,
        txn: Txn,
        turn: Turn,
    ) -> Result<TxnResponse, Error> {
        match self.batcher.admit(lock_key, txn, turn) {
            Admitted::Send(txn) => {
                // Handed on when dropped, also when this request is cancelled mid-flight.
                let _slot = Slot(self.clone());
                self.txn_raw(txn).await
            }
            Admitted::Queued(answer) => answer.await.unwrap_or_else(|_| Err(abandoned())),
        }
    }

    /// Sends one batch and answers each of its requests.
    async fn send_batch(&self, mut batch: Vec<Waiting>) {
        if batch.len() == 1 {
            let only = batch.pop().expect("one");
            let _ = only.reply.send(self.txn_raw(only.txn).await);
            return;
        }
        let mut replies = Vec::with_capacity(batch.len());
        let mut nested = Vec::with_capacity(batch.len());
        for waiting in batch {
            replies.push((waiting.reply, waiting.txn.clone()));
            nested.push(TxnOp::txn(waiting.txn));
        }
        match self.txn_raw(Txn::new().and_then(nested)).await {
            Ok(response) => {
                let mut answers = response.op_responses().into_iter();
                for (reply, _) in replies {
                    let answer = match answers.next() {
                        Some(TxnOpResponse::Txn(answer)) => Ok(answer),
                        _ => Err(Error::InvalidArgs("etcd answered a batch short".into())),
                    };
                    let _ = reply.send(answer);
                }
            }
            Err(error) if is_lease_gone(&error) => {
                for (reply, txn) in replies {
                    let _ = reply.send(self.txn_raw(txn).await);
                }
            }
            Err(error) => {
                for (reply, _) in replies {
                    let _ = reply.send(Err(duplicate(&error)));
                }
            }
        }
    }
}

/// Where a transaction that has to wait joins the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Ahead of everything waiting: it ends a lock that others wait for.
    First,
    /// Behind everything waiting.
    Last,
}

/// What [`Batcher::admit`] decided.
enum Admitted {
    /// A slot was free and is now the caller's: send the transaction.
    Send(Txn),
    /// Queued; the answer comes with a later batch.
    Queued(oneshot::Receiver<Result<TxnResponse, Error>>),
}

impl Batcher {
    fn admit(&self, lock_key: String, txn: Txn, turn: Turn) -> Admitted {
        let mut queue = self.lock();
        if queue.in_flight < MAX_IN_FLIGHT {
            queue.in_flight += 1;
            return Admitted::Send(txn);
        }
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            lock_key,
            txn,
            turn,
            reply,
        };
        match turn {
            // Behind the other lock-ending transactions, in the order they came.
            Turn::First => {
                let at = queue.waiting.partition_point(|w| w.turn == Turn::First);
                queue.waiting.insert(at, waiting);
            }
            Turn::Last => queue.waiting.push_back(waiting),
        }
        Admitted::Queued(answer)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue's invariants hold between statements; a panic elsewhere cannot break them.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One taken slot. Dropping it sends whatever queued meanwhile (keeping the slot) or frees it.
struct Slot(EtcdStore);

impl Drop for Slot {
    fn drop(&mut self) {
        let store = &self.0;
        let batch = {
            let mut queue = store.batcher.lock();
            let batch = take_batch(&mut queue.waiting);
            if batch.is_empty() {
                queue.in_flight -= 1;
                return;
            }
            batch
        };
        let store = store.clone();
        let send = async move {
            let slot = Slot(store.clone());
            store.send_batch(batch).await;
            drop(slot);
        };
        // Outside a runtime (one shutting down) the batch is dropped: its requests see
        // `abandoned`, as a cancelled request would.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(send);
        }
    }
}

/// Up to [`MAX_BATCH`] queued transactions of distinct lock keys, oldest first; the rest stay
/// queued in order.
fn take_batch(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut keys = HashSet::new();
    let mut batch = Vec::new();
    let mut later = VecDeque::new();
    for entry in waiting.drain(..) {
        if batch.len() < MAX_BATCH && keys.insert(entry.lock_key.clone()) {
            batch.push(entry);
        } else {
            later.push_back(entry);
        }
    }
    *waiting = later;
    batch
}

/// The batch's error again, for each of its requests (etcd's error type is not `Clone`).
/// Variants keep their classification: a gRPC status stays one, I/O stays I/O.
fn duplicate(error: &Error) -> Error {
    match error {
        Error::GRpcStatus(status) => Error::GRpcStatus(status.clone()),
        Error::IoError(io) => Error::IoError(std::io::Error::new(io.kind(), io.to_string())),
        Error::InvalidArgs(message) => Error::InvalidArgs(message.clone()),
        other => Error::IoError(std::io::Error::other(other.to_string())),
    }
}

/// The batch carrying a request was dropped (its runtime is shutting down).
fn abandoned() -> Error {
    Error::IoError(std::io::Error::other("etcd batch abandoned"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(key: &str) -> Waiting {
        Waiting {
            lock_key: key.to_owned(),
            txn: Txn::new(),
            turn: Turn::Last,
            reply: oneshot::channel().0,
        }
    }

    fn keys(entries: &[Waiting]) -> Vec<&str> {
        entries.iter().map(|w| w.lock_key.as_str()).collect()
    }

    #[test]
    fn a_batch_holds_one_transaction_per_key_and_the_rest_keep_their_order() {
        let mut queue: VecDeque<_> = ["a", "b", "a", "c", "b", "a"]
            .into_iter()
            .map(waiting)
            .collect();
        let batch = take_batch(&mut queue);
        assert_eq!(keys(&batch), ["a", "b", "c"]);
        let queue: Vec<_> = queue.into_iter().collect();
        assert_eq!(keys(&queue), ["a", "b", "a"]);
    }

    #[test]
    fn a_transaction_that_ends_a_lock_goes_ahead_of_those_waiting() {
        let batcher = Batcher::default();
        for _ in 0..MAX_IN_FLIGHT {
            let sent = batcher.admit("busy".into(), Txn::new(), Turn::Last);
            assert!(matches!(sent, Admitted::Send(_)));
        }
        // A crowd queues for "a", then the releases of "a" and "c" arrive.
        let crowd: Vec<_> = ["a", "a", "b", "a"]
            .into_iter()
            .map(|key| batcher.admit(key.into(), Txn::new(), Turn::Last))
            .collect();
        let release = batcher.admit("a".into(), Txn::new(), Turn::First);
        batcher.admit("c".into(), Txn::new(), Turn::First);
        let mut queue = batcher.lock();
        let batch = take_batch(&mut queue.waiting);
        assert_eq!(keys(&batch), ["a", "c", "b"]);
        assert_eq!(keys(queue.waiting.make_contiguous()), ["a", "a", "a"]);
        // The "a" in the batch is the release, not the crowd's first.
        let Admitted::Queued(mut release) = release else {
            panic!("queued behind the busy slots");
        };
        let first = batch.into_iter().next().expect("a batch");
        let _ = first.reply.send(Err(abandoned()));
        assert!(release.try_recv().is_ok());
        drop(crowd);
    }

    #[test]
    fn a_batch_is_bounded() {
        let mut queue: VecDeque<_> = (0..MAX_BATCH + 5)
            .map(|n| waiting(&n.to_string()))
            .collect();
        assert_eq!(take_batch(&mut queue).len(), MAX_BATCH);
        assert_eq!(queue.len(), 5);
        assert_eq!(take_batch(&mut queue).len(), 5);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_duplicated_error_keeps_its_classification() {
        let timed_out = Error::IoError(std::io::Error::new(std::io::ErrorKind::TimedOut, "t"));
        let copy = duplicate(&timed_out);
        assert!(super::super::error::is_endpoint_failure(&copy));
        assert!(matches!(copy, Error::IoError(io) if io.kind() == std::io::ErrorKind::TimedOut));
        assert!(
            matches!(duplicate(&Error::InvalidArgs("x".into())), Error::InvalidArgs(m) if m == "x")
        );
    }
}
