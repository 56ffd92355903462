//! A key's holds on etcd: the keys one hold is written as, the key's stamp, and the compares
//! that keep grants from racing each other, whichever replicas send them.
//!
//! A hold of session `S` on key `K` is its record `l/<K>/<S>` on `S`'s lease, the index twin
//! `h/<S>/<K>` and, when shared, the marker `r/<K>/<S>` (what the shared-holds gauge counts),
//! always written and deleted together. A session holds a key at most once, so the three are
//! named by the pair. A fresh grant's token is `l/<K>/<S>`'s `create_revision`: the revision
//! of the transaction that granted it, cluster-wide, so distinct from every other hold's
//! token and above every earlier one (a hand-off's token is its ticket's, see `queue`).
//!
//! Every transaction of ours that grants `K`, hands it on or ends its last hold also writes
//! `K`'s stamp `v/<K>` (a put while holds remain, a delete when none do), and every
//! transaction that grants compares the stamp as it read it, and that no hold was created
//! since ([`EtcdStore::holders_unchanged`]). So two grants decided on the same holders cannot
//! both commit: two replicas that both see `limit − 1` shared holders, or one granting
//! exclusive while another grants shared, compare the same stamp revision; the first to
//! commit rewrites it, and the other fails and decides again on what its transaction read
//! back. The stamp is on the lease of a holder (the grantee's, else one that stays), so it
//! goes at the latest with that holder.
//!
//! Two kinds leave a present stamp as it is: a reader without a limit granted beside others
//! ([`EtcdStore::stamp_unchanged`]; every grant it could conflict with rewrites the stamp and
//! sees its new hold key), and a release that ends holds while others stay, serving nobody
//! with nobody queued (`queue::settle`). So readers of one key neither race each other's
//! grants nor their releases.
//!
//! What no compare sees is a hold whose lease ran out: its keys vanish without a stamp write.
//! That only ever removes a holder, so a grant decided with it in view is still safe (decided
//! against more holders than there are); the next transaction that reads the key serves its
//! queue, as for an expired exclusive lock.

use etcd_client::{Compare, CompareOp};
use lock_api::LockMode;

use super::records::{CauseRecord, EndCause, KeyView, LockRecord, StampRecord};
use super::writes::Writes;
use super::{encode, EtcdStore};

impl EtcdStore {
    /// Writes the hold `hold` (its record, index twin and, if shared, marker) on `lease`.
    pub(super) fn write_hold(&self, writes: &mut Writes, hold: &LockRecord, lease: i64) {
        let (key, session_id) = (&hold.key, &hold.session_id);
        let value = encode(hold);
        writes.put(self.keys.hold(key, session_id), value.clone(), lease);
        writes.put(self.keys.held(session_id, key), value, lease);
        if hold.mode == LockMode::Shared {
            writes.put(self.keys.shared_marker(key, session_id), Vec::new(), lease);
        }
    }

    /// Deletes the keys of `session_id`'s hold of `key` (the marker whatever the hold's mode:
    /// deleting an absent key writes nothing).
    pub(super) fn end_hold(&self, writes: &mut Writes, key: &str, session_id: &str) {
        writes.delete(self.keys.hold(key, session_id));
        writes.delete(self.keys.held(session_id, key));
        writes.delete(self.keys.shared_marker(key, session_id));
    }

    /// Writes the cause marker of `session_id`'s hold of `key`, which this transaction ends on
    /// purpose, on the hold's `lease` (the caller compares that the hold is there, so its lease
    /// is live): a watcher reads it at the same revision as the hold's deletion.
    pub(super) fn write_cause(
        &self,
        writes: &mut Writes,
        key: &str,
        session_id: &str,
        cause: EndCause,
        lease: i64,
        now: u64,
    ) {
        let record = CauseRecord { cause, at_ms: now };
        writes.put(self.keys.cause(key, session_id), encode(&record), lease);
    }

    /// Writes `key`'s stamp for a transaction that changed its holds: `holders` remain, and the
    /// stamp goes on `lease` (a lease of one of them); removed when none remain.
    pub(super) fn write_stamp(&self, writes: &mut Writes, key: &str, holders: usize, lease: i64) {
        let stamp = self.keys.stamp(key);
        match holders {
            0 => writes.delete(stamp),
            _ => writes.put(stamp, encode(&StampRecord { holders }), lease),
        }
    }

    /// Holds while `key`'s holds are those of `view`, as far as our transactions change them:
    /// the stamp is the one read; when none was read, it is still absent and the key still has
    /// hold keys, or still none (a transaction that ends the last hold deletes the stamp, so
    /// "absent" alone would not see a release between the read and the grant).
    ///
    /// With a stamp, also that no hold was created since the read: a reader without a limit
    /// granted beside others leaves the stamp as it is ([`EtcdStore::stamp_unchanged`]).
    pub(super) fn holders_unchanged(&self, key: &str, view: &KeyView) -> Vec<Compare> {
        let stamp = self.keys.stamp(key);
        match &view.stamp {
            Some(kv) => vec![
                Compare::mod_revision(stamp, CompareOp::Equal, kv.mod_revision()),
                Compare::create_revision(self.keys.holds(key), CompareOp::Less, view.revision + 1)
                    .with_prefix(),
            ],
            None => {
                let some = if view.holds.is_empty() {
                    CompareOp::Equal
                } else {
                    CompareOp::Greater
                };
                vec![
                    Compare::create_revision(stamp, CompareOp::Equal, 0),
                    Compare::create_revision(self.keys.holds(key), some, 0).with_prefix(),
                ]
            }
        }
    }

    /// Holds while `key`'s stamp, present in `view`, is the one read: no grant that rewrites
    /// it (exclusive, limited, a hand-off) and no settle that serves or ends the last hold
    /// happened since. Only a reader without a limit beside others, which may have been
    /// granted since, does not rewrite it, and the caller is one.
    pub(super) fn stamp_unchanged(&self, key: &str, view: &KeyView) -> Compare {
        let revision = view.stamp.as_ref().map_or(0, |kv| kv.mod_revision());
        Compare::mod_revision(self.keys.stamp(key), CompareOp::Equal, revision)
    }

    /// Holds while `key` has no hold, no stamp and no ticket: a grant needs to know nothing
    /// more (the optimistic create, without a read).
    pub(super) fn key_free(&self, key: &str) -> Vec<Compare> {
        vec![
            Compare::create_revision(self.keys.stamp(key), CompareOp::Equal, 0),
            Compare::create_revision(self.keys.holds(key), CompareOp::Equal, 0).with_prefix(),
            self.queue_empty(key),
        ]
    }
}
