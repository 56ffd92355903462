//! The deployment's token epoch on etcd, and the replica's watch for a rewound cluster.
//!
//! A fencing token is `epoch::token(epoch, revision)`: `(epoch << 40) + revision`. A cluster
//! restored from a snapshot (`etcdctl snapshot restore`) goes back to the snapshot's
//! revision, so revisions, hence tokens of epoch E, repeat. `lock-server etcd-restored`
//! raises the epoch kept at `<prefix>epoch` (`{"epoch":N}`; absent: 0, every token of a
//! deployment that was never restored), so every later token is above every earlier one.
//!
//! Each hold's record carries the epoch it was granted in (absent: 0), so a token is read the
//! same way by every replica and by the watch feed, whatever the epoch is now. Every grant
//! transaction compares the epoch key's `mod_revision` with the one this replica read: no
//! replica grants with an epoch older than the stored one (a failed compare re-reads it).
//!
//! A running replica also watches the response headers: etcd's revision below the highest
//! it has seen, or another cluster id, means the cluster was rewound under it. From then on
//! it refuses grants (503 NOT_LEADER) until it reads an epoch above the one it granted in,
//! and logs `etcd_rewound` once.

use std::sync::Mutex;

use etcd_client::{
    Compare, CompareOp, GetResponse, LeaseGrantResponse, LeaseKeepAliveStream, LeaseKeeper,
    LeaseRevokeResponse, PutResponse, ResponseHeader, TxnResponse,
};
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// The value of `<prefix>epoch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochRecord {
    pub epoch: u64,
}

/// The epoch a grant is made in, as this replica read it: the epoch and the key's
/// `mod_revision` (0: absent), which the grant's transaction compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EpochNow {
    pub epoch: u64,
    pub mod_revision: i64,
}

impl EpochNow {
    /// The compare every grant transaction carries.
    pub(super) fn unchanged(&self, epoch_key: &str) -> Compare {
        Compare::mod_revision(epoch_key, CompareOp::Equal, self.mod_revision)
    }
}

/// An etcd answer whose header (revision, cluster id) the replica looks at: every call goes
/// through `EtcdStore::call`, which shows each answer to [`Epochs::observe`].
pub(super) trait Headed {
    fn response_header(&self) -> Option<&ResponseHeader>;
}

macro_rules! headed {
    ($($t:ty),*) => {$(
        impl Headed for $t {
            fn response_header(&self) -> Option<&ResponseHeader> {
                self.header()
            }
        }
    )*};
}
headed!(
    TxnResponse,
    GetResponse,
    PutResponse,
    LeaseGrantResponse,
    LeaseRevokeResponse
);

/// The scripted answers of the call tests carry no header.
#[cfg(test)]
impl Headed for u32 {
    fn response_header(&self) -> Option<&ResponseHeader> {
        None
    }
}

/// A keep-alive's stream has no header of its own.
impl Headed for (LeaseKeeper, LeaseKeepAliveStream) {
    fn response_header(&self) -> Option<&ResponseHeader> {
        None
    }
}

/// What a request's answer is judged against: the highest revision seen when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Floor {
    generation: u64,
    revision: i64,
}

/// What the replica knows of the cluster and its epoch.
#[derive(Debug, Default)]
struct State {
    /// Read at least once.
    loaded: bool,
    now: Option<EpochNow>,
    /// The highest revision and the cluster id of the answers since the epoch was read.
    highest_revision: i64,
    cluster_id: u64,
    /// Counts the rewinds noticed and ended: answers to requests sent before one are not
    /// compared with the revisions after it.
    generation: u64,
    /// The cluster went back under this replica: the epoch it granted in, until a higher
    /// one is read.
    rewound_in: Option<u64>,
}

/// The replica's epoch and rewind detector; shared by every request of the replica.
#[derive(Debug, Default)]
pub(super) struct Epochs {
    state: Mutex<State>,
}

impl Epochs {
    /// The highest revision seen so far: a request sent now is answered at this revision
    /// or later (etcd is linearizable; answers to concurrent requests may come in any order,
    /// so only this floor, taken before the request is sent, may judge its answer).
    pub(super) fn floor(&self) -> Floor {
        let state = self.state.lock().unwrap();
        Floor {
            generation: state.generation,
            revision: state.highest_revision,
        }
    }

    /// Looks at the header of an answer to a request sent when [`Epochs::floor`] was
    /// `floor`: a revision below it, or another cluster, is a rewind.
    pub(super) fn observe(&self, header: Option<&ResponseHeader>, floor: Floor) {
        if let Some(header) = header {
            self.observe_at(header.revision(), header.cluster_id(), floor);
        }
    }

    /// [`Epochs::observe`] of an answer at `revision` from cluster `cluster_id`.
    fn observe_at(&self, revision: i64, cluster_id: u64, floor: Floor) {
        let mut state = self.state.lock().unwrap();
        // A request sent before a rewind was noticed or ended judges nothing.
        if !state.loaded || floor.generation != state.generation {
            return;
        }
        let rewound =
            revision < floor.revision || (state.cluster_id != 0 && cluster_id != state.cluster_id);
        if rewound && state.rewound_in.is_none() {
            let epoch = state.now.map_or(0, |now| now.epoch);
            tracing::warn!(
                event = "etcd_rewound",
                highest_revision = state.highest_revision,
                revision,
                cluster_changed = cluster_id != state.cluster_id,
                epoch,
                message = "etcd went back (restored from a snapshot?): no grants until `lock-server etcd-restored` raises the epoch",
            );
            state.rewound_in = Some(epoch);
            state.generation += 1;
        }
        if state.rewound_in.is_none() {
            state.highest_revision = state.highest_revision.max(revision);
        }
    }

    /// The epoch to grant in, or 503 while the cluster is rewound or the epoch unread.
    pub(super) fn now(&self) -> Result<EpochNow, StoreError> {
        let state = self.state.lock().unwrap();
        match (state.rewound_in, state.now) {
            (None, Some(now)) if state.loaded => Ok(now),
            (Some(_), _) => Err(rewound()),
            _ => Err(StoreError::Unavailable {
                reason: "the token epoch is not read yet".into(),
                leader: None,
                retry_after_millis: Some(RETRY_AFTER_MILLIS),
            }),
        }
    }

    /// Whether the epoch must be read before the next grant.
    pub(super) fn needs_read(&self) -> bool {
        let state = self.state.lock().unwrap();
        !state.loaded || state.rewound_in.is_some()
    }

    /// Takes the epoch key as read at `header` (its value and `mod_revision`; `None`:
    /// absent). Ends a rewind once the epoch is above the one granted in before it.
    pub(super) fn read(
        &self,
        value: Option<(EpochRecord, i64)>,
        header: Option<&ResponseHeader>,
    ) -> Result<(), StoreError> {
        let at = header.map_or((0, 0), |h| (h.revision(), h.cluster_id()));
        self.read_at(value, at)
    }

    /// [`Epochs::read`] at `(revision, cluster_id)`.
    fn read_at(
        &self,
        value: Option<(EpochRecord, i64)>,
        (revision, cluster_id): (i64, u64),
    ) -> Result<(), StoreError> {
        let (record, mod_revision) = value.unwrap_or_default();
        let now = EpochNow {
            epoch: record.epoch,
            mod_revision,
        };
        let mut state = self.state.lock().unwrap();
        if let Some(before) = state.rewound_in {
            if now.epoch <= before {
                return Err(rewound());
            }
            tracing::info!(
                event = "etcd_epoch_raised",
                epoch = now.epoch,
                before,
                revision
            );
            state.rewound_in = None;
            state.generation += 1;
            state.highest_revision = revision;
        } else if state.now.is_some_and(|old| old.epoch != now.epoch) || !state.loaded {
            tracing::info!(event = "etcd_epoch", epoch = now.epoch, revision);
        }
        state.highest_revision = state.highest_revision.max(revision);
        if cluster_id != 0 {
            state.cluster_id = cluster_id;
        }
        state.now = Some(now);
        state.loaded = true;
        Ok(())
    }
}

/// How long a client waits before asking again while grants are refused.
const RETRY_AFTER_MILLIS: u64 = 1_000;

fn rewound() -> StoreError {
    StoreError::Unavailable {
        reason: "etcd was rewound (restored from a snapshot); grants resume once \
                 `lock-server etcd-restored` has raised the token epoch"
            .into(),
        leader: None,
        retry_after_millis: Some(RETRY_AFTER_MILLIS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(epoch: u64, mod_revision: i64) -> Option<(EpochRecord, i64)> {
        Some((EpochRecord { epoch }, mod_revision))
    }

    #[test]
    fn no_grant_before_the_epoch_is_read() {
        let epochs = Epochs::default();
        assert!(epochs.needs_read());
        assert!(epochs.now().is_err());
        epochs.read_at(None, (10, 7)).unwrap();
        assert_eq!(
            epochs.now().unwrap(),
            EpochNow {
                epoch: 0,
                mod_revision: 0
            }
        );
    }

    #[test]
    fn a_revision_going_back_stops_grants_until_a_higher_epoch() {
        let epochs = Epochs::default();
        epochs.read_at(record(2, 5), (100, 7)).unwrap();
        epochs.observe_at(8_638, 7, epochs.floor());
        // An answer to a request sent before the one at 8,638 may come later, lower.
        let early = Floor {
            generation: 0,
            revision: 100,
        };
        epochs.observe_at(8_620, 7, early);
        assert!(epochs.now().is_ok());
        // One sent after it may not.
        epochs.observe_at(8_610, 7, epochs.floor());
        assert!(matches!(epochs.now(), Err(StoreError::Unavailable { .. })));
        assert!(epochs.needs_read());
        // The restored cluster's epoch is the snapshot's: not enough.
        assert!(epochs.read_at(record(2, 5), (8_611, 7)).is_err());
        assert!(epochs.now().is_err());
        epochs.read_at(record(3, 8_612), (8_612, 7)).unwrap();
        assert_eq!(epochs.now().unwrap().epoch, 3);
        // An answer to a request sent before the rewind ended judges nothing.
        epochs.observe_at(8_611, 7, early);
        assert!(epochs.now().is_ok());
        // Revisions from the restored cluster on are the new normal.
        epochs.observe_at(8_613, 7, epochs.floor());
        assert!(epochs.now().is_ok());
    }

    #[test]
    fn another_cluster_id_is_a_rewind() {
        let epochs = Epochs::default();
        epochs.read_at(None, (50, 7)).unwrap();
        epochs.observe_at(60, 9, epochs.floor());
        assert!(epochs.now().is_err());
        epochs.read_at(record(1, 61), (61, 9)).unwrap();
        epochs.observe_at(62, 9, epochs.floor());
        assert_eq!(epochs.now().unwrap().epoch, 1);
    }
}
