//! Contenders of the comparison strategies (no jitter, equal jitter, decorrelated jitter):
//! `lock_lab`'s comparison loop over the run's seams — the SDK's loop shape with another
//! delay rule, L4 through the SDK's `Transport` — with what the loop reports recorded into
//! the run: L4 calls, refusals, and the sleeps of the jitter histogram.

use std::convert::Infallible;
use std::time::Duration;

use lock_api::{ErrorCode, OpenSessionRequest};
use lock_lab::comparison::{Acquired, Comparison, ComparisonSession, Observer};

use crate::model::record::{OpenSession, Sleep};

use super::failure::describe;
use super::recorder::Recorder;
use super::setup::Setup;
use super::Held;

/// Records what the loop reports for contender `index`.
struct Recording<'a> {
    recorder: &'a Recorder,
    index: u32,
}

impl Observer for Recording<'_> {
    fn on_call(&mut self) {
        self.recorder.lock().counters.l4_calls += 1;
    }

    fn on_refusal(&mut self, code: ErrorCode) {
        self.recorder.lock().counters.count_refusal(code);
    }

    fn on_sleep(&mut self, attempt: u32, delay: Duration, ceiling: Duration) {
        self.recorder.lock().sleeps.push(Sleep {
            session: self.index,
            attempt,
            delay_millis: millis(delay),
            ceiling_millis: millis(ceiling),
        });
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One contender on a session of the comparison loop.
pub struct ComparisonContender {
    session: ComparisonSession,
    recorder: Recorder,
    index: u32,
    ttl: Duration,
}

impl ComparisonContender {
    /// Opens the contender's session (L1). Its draws are seeded like the SDK contenders'.
    pub async fn open(setup: &Setup<'_>) -> Result<Self, String> {
        let comparison = Comparison {
            transport: setup.env.transport.clone(),
            clock: setup.env.clock.clone(),
            rng: setup.rng(),
            strategy: setup.config.strategy,
            policy: setup.policy()?,
        };
        let request = OpenSessionRequest {
            ttl_millis: Some(setup.config.ttl_millis),
            owner: Some(setup.owner()),
        };
        let session = comparison
            .open_session(&request)
            .await
            .map_err(|e| describe(&e))?;
        Ok(ComparisonContender {
            session,
            recorder: setup.recorder.clone(),
            index: setup.index,
            ttl: setup.ttl(),
        })
    }

    /// The server's id of this session.
    pub fn session(&self) -> OpenSession {
        let session = self.session.session_ref();
        OpenSession {
            id: session.id.to_owned(),
            holder_id: session.holder_id.to_owned(),
        }
    }

    /// Heartbeats until dropped (raced against the contender's rounds).
    pub async fn heartbeat_forever(&self) -> Infallible {
        self.session.heartbeat_forever().await
    }

    /// The comparison loop's acquire; `None` when the budget or the attempts ran out.
    pub async fn acquire(&self, key: &str) -> Result<Option<Held>, String> {
        let mut recording = Recording {
            recorder: &self.recorder,
            index: self.index,
        };
        let acquired = self.session.acquire(key, self.ttl, &mut recording).await;
        match acquired.map_err(|e| describe(&e))? {
            Acquired::Granted { grant, attempts } => Ok(Some(Held {
                grant,
                attempts,
                handle: None,
            })),
            Acquired::NotGranted => Ok(None),
        }
    }

    /// Releases (L6); a lock already gone counts as lost.
    pub async fn release(&self, held: &Held) {
        match self.session.release(&held.grant).await {
            Ok(true) => {}
            Ok(false) => self.recorder.lock().counters.lost_locks += 1,
            Err(err) => self.recorder.note_error(describe(&err)),
        }
    }

    /// Closes the session (L3).
    pub async fn close(&self) {
        self.session.close().await;
    }
}
