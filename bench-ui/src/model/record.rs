//! The record of one run: what the client did, what L7 saw and what L8 streamed, with times
//! in milliseconds since the run started (the SDK's monotonic clock). Everything the plots
//! and the exports show is derived from this one value, so a run exported as JSON can be
//! replotted.

use lock_api::{LockMode, WatchEvent};
use serde::{Deserialize, Serialize};

use super::config::ExperimentConfig;
use super::counters::Counters;

/// One backoff sleep the acquire loop actually took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sleep {
    /// Contender index (0-based).
    pub session: u32,
    /// Failed attempts before this sleep, minus one: the first sleep is attempt 0.
    pub attempt: u32,
    /// What was slept, ms.
    pub delay_millis: u64,
    /// The ceiling the full-jitter distribution draws from for this attempt, ms.
    pub ceiling_millis: u64,
}

/// One hold as the client saw it: from the grant's arrival to the release being sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// Contender index (0-based).
    pub session: u32,
    /// Key name.
    pub key: String,
    /// The grant's fencing token.
    pub fencing_token: u64,
    /// How it was granted: exclusive, or shared beside the key's other shared holders.
    #[serde(default)]
    pub mode: LockMode,
    /// A shared grant's limit (the semaphore's permits), when the key has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// L4 calls it took, including the granted one.
    pub attempts: u32,
    /// When the acquire that got it began, ms since start (its wait is `granted_at` minus
    /// this).
    #[serde(default)]
    pub asked_at: f64,
    /// When the grant arrived, ms since start.
    pub granted_at: f64,
    /// When the release was sent, ms since start; `None` while held or if never released.
    pub released_at: Option<f64>,
    /// Whether the ledger accepted the holder's write (false: FENCED_OUT, an error, or a
    /// shared hold, which writes nothing).
    pub ledger_accepted: bool,
}

/// One L7 advisory read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// When the answer arrived, ms since start.
    pub at: f64,
    /// Key name.
    pub key: String,
    /// How the key was held; `None` when it was free.
    #[serde(default)]
    pub mode: Option<LockMode>,
    /// `(holderId, fencingToken)` of every holder, in token order: one exclusive holder or
    /// any number of shared ones (L7 never shows a session id).
    #[serde(default)]
    pub holders: Vec<(String, u64)>,
    /// The shared holders' limit, when the key was held shared under one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The server's waiter count.
    pub waiter_count: u32,
}

/// One L8 event as a watcher received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    /// When it arrived, ms since start: never before the server committed it, which is what
    /// `model::server_clock` fits the server's `atMillis` to the run's clock with.
    pub at: f64,
    /// The event as the server sent it.
    pub event: WatchEvent,
}

/// Everything a run produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Unique per run; part of every key name.
    pub run_id: String,
    /// The configuration it ran with.
    pub config: ExperimentConfig,
    /// Counters at the end (or now, while running).
    pub counters: Counters,
    /// Every backoff sleep.
    pub sleeps: Vec<Sleep>,
    /// Every grant.
    pub holds: Vec<Hold>,
    /// Every L7 read.
    pub samples: Vec<Sample>,
    /// The L8 events of the run's keys that change its holds (`snapshot`, `reset`, grants and
    /// ends; not `waiters` or `proclaimed`), each key's in the server's order.
    #[serde(default)]
    pub events: Vec<Observed>,
    /// Why the L8 stream could not be followed (an older server answering 404, a refusal),
    /// when it could not: the timeline then falls back to the L7 samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<String>,
    /// Sessions by contender index, to close a cancelled run's sessions. Never exported:
    /// a session id is its owner's credential, and an export may be shared.
    #[serde(skip)]
    pub sessions: Vec<OpenSession>,
    /// Wall time of the whole run, ms; `None` while running.
    pub completed_millis: Option<f64>,
    /// Why the run stopped early, if it did (server down, cancelled, ...).
    pub error: Option<String>,
}

/// A contender's session, as L3 names it: its id (the credential, sent in a header) and its
/// holder id (the path's). Empty until the session opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenSession {
    /// The session id.
    pub id: String,
    /// The session's holder id.
    pub holder_id: String,
}

impl Sample {
    /// Whether anyone held the key at this sample.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

impl RunRecord {
    /// An empty record for a run about to start.
    pub fn new(run_id: impl Into<String>, config: ExperimentConfig) -> Self {
        RunRecord {
            run_id: run_id.into(),
            config,
            ..Default::default()
        }
    }

    /// Acquisitions finished (granted or given up), for the progress bar.
    pub fn finished_acquisitions(&self) -> u32 {
        self.counters.grants + self.counters.gave_up + self.counters.errors
    }

    /// Progress in `[0, 1]`.
    pub fn progress(&self) -> f64 {
        let planned = self.config.planned_acquisitions().max(1);
        (f64::from(self.finished_acquisitions()) / f64::from(planned)).min(1.0)
    }

    /// Contender index of the session granted `fencing_token` on `key`, if one of this
    /// run's contenders was: tokens are unique per key, so they name the holder an L7 sample
    /// shows without the session id L7 never reveals.
    pub fn holder_index(&self, key: &str, fencing_token: u64) -> Option<u32> {
        self.holds
            .iter()
            .find(|h| h.key == key && h.fencing_token == fencing_token)
            .map(|h| h.session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_every_finished_acquisition() {
        let mut r = RunRecord::new(
            "r",
            ExperimentConfig {
                sessions: 4,
                rounds: 1,
                ..Default::default()
            },
        );
        assert_eq!(r.progress(), 0.0);
        r.counters.grants = 2;
        r.counters.gave_up = 1;
        assert_eq!(r.progress(), 0.75);
        r.counters.errors = 5;
        assert_eq!(r.progress(), 1.0);
    }

    #[test]
    fn holders_are_found_by_key_and_token() {
        let mut r = RunRecord::new("r", ExperimentConfig::default());
        let hold = |session, key: &str, fencing_token| Hold {
            session,
            key: key.into(),
            fencing_token,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 1,
            asked_at: 0.0,
            granted_at: 0.0,
            released_at: None,
            ledger_accepted: true,
        };
        r.holds = vec![hold(0, "a", 7), hold(1, "b", 7)];
        assert_eq!(r.holder_index("b", 7), Some(1));
        assert_eq!(r.holder_index("a", 7), Some(0));
        assert_eq!(r.holder_index("a", 8), None);
    }
}
