//! One contender's life: open a session, then per round acquire its key, write the grant's
//! token to the fenced ledger, hold, release; finally close the session. Full jitter and the
//! server queue go through the SDK ([`super::sdk`]), the comparison strategies through
//! `lock_lab`'s loop ([`super::comparison`]); the rounds are the same for all.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::{ErrorCode, LedgerAppend};
use lock_wasm::error::TransportError;
use lock_wasm::{AcquirePolicy, SeededRngSource};

use crate::model::config::{key_name, ExperimentConfig};
use crate::model::record::Hold;

use super::comparison::ComparisonContender;
use super::recorder::Recorder;
use super::sdk::SdkContender;
use super::{CancelFlag, Env, Held};

/// What a contender is set up with: the run's seams and record, the experiment, and the
/// contender's index.
pub struct Setup<'a> {
    /// The run's seams.
    pub env: &'a Env,
    /// The run's record.
    pub recorder: &'a Recorder,
    /// The experiment.
    pub config: &'a ExperimentConfig,
    /// Which contender, from 0.
    pub index: u32,
}

impl Setup<'_> {
    /// The SDK's acquire policy of the experiment.
    pub fn policy(&self) -> Result<AcquirePolicy, String> {
        AcquirePolicy::new(self.config.policy.settings(self.config.strategy))
            .map_err(|e| e.to_string())
    }

    /// The contender's random draws, seeded per contender so a run replays.
    pub fn rng(&self) -> Arc<SeededRngSource> {
        Arc::new(SeededRngSource::new(self.config.contender_seed(self.index)))
    }

    /// The owner label of the contender's session.
    pub fn owner(&self) -> String {
        format!("bench-ui s{}", self.index)
    }

    /// The lock and session TTL.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.config.ttl_millis)
    }
}

/// A contender's session: the SDK's, or the comparison loop's.
enum Contender {
    Sdk(SdkContender),
    Comparison(ComparisonContender),
}

impl Contender {
    async fn open(setup: &Setup<'_>) -> Result<Self, String> {
        Ok(if setup.config.strategy.runs_in_sdk() {
            Contender::Sdk(SdkContender::open(setup).await?)
        } else {
            Contender::Comparison(ComparisonContender::open(setup).await?)
        })
    }

    fn session_id(&self) -> String {
        match self {
            Contender::Sdk(c) => c.session_id(),
            Contender::Comparison(c) => c.session_id(),
        }
    }

    async fn acquire(&self, key: &str) -> Result<Option<Held>, String> {
        match self {
            Contender::Sdk(c) => c.acquire(key).await,
            Contender::Comparison(c) => c.acquire(key).await,
        }
    }

    async fn release(&self, held: &Held) {
        match self {
            Contender::Sdk(c) => c.release(held).await,
            Contender::Comparison(c) => c.release(held).await,
        }
    }

    /// Keeps the session alive until dropped: the SDK heartbeats on its own spawner, the
    /// comparison loop's session here.
    async fn heartbeat_forever(&self) -> Infallible {
        match self {
            Contender::Sdk(_) => futures::future::pending().await,
            Contender::Comparison(c) => c.heartbeat_forever().await,
        }
    }

    async fn close(&self) {
        match self {
            Contender::Sdk(c) => c.close().await,
            Contender::Comparison(c) => c.close().await,
        }
    }
}

/// Runs contender `index` to the end of its rounds (or of the run).
pub async fn run(
    env: &Env,
    recorder: &Recorder,
    config: &ExperimentConfig,
    run_id: &str,
    index: u32,
    cancel: &CancelFlag,
) {
    let key = key_name(run_id, config.key_index(index));
    let setup = Setup {
        env,
        recorder,
        config,
        index,
    };
    let contender = match Contender::open(&setup).await {
        Ok(c) => c,
        Err(message) => return fail_all(recorder, config, &message),
    };
    recorder.lock().session_ids[index as usize] = contender.session_id();
    let rounds = async {
        for round in 0..config.rounds {
            if cancel.is_cancelled() {
                break;
            }
            let asked_at = recorder.elapsed_millis();
            match contender.acquire(&key).await {
                Ok(Some(held)) => {
                    let slot = on_granted(env, recorder, &held, index, round, asked_at).await;
                    env.clock
                        .sleep(Duration::from_millis(config.hold_millis))
                        .await;
                    mark_released(recorder, slot);
                    contender.release(&held).await;
                }
                Ok(None) => recorder.lock().counters.gave_up += 1,
                Err(message) => {
                    recorder.note_error(message);
                    recorder.lock().counters.errors += 1;
                }
            }
        }
    };
    // The heartbeat never finishes, so this always ends with the rounds.
    if let Either::Right((never, _)) =
        select(Box::pin(rounds), Box::pin(contender.heartbeat_forever())).await
    {
        match never {}
    }
    contender.close().await;
}

/// A session that never opened: every round of it counts as an error.
fn fail_all(recorder: &Recorder, config: &ExperimentConfig, message: &str) {
    recorder.note_error(message.to_string());
    recorder.lock().counters.errors += config.rounds;
}

/// Records the grant (asked for at `asked_at`) and performs the fenced side effect. Returns
/// the hold's index.
async fn on_granted(
    env: &Env,
    recorder: &Recorder,
    held: &Held,
    index: u32,
    round: u32,
    asked_at: f64,
) -> usize {
    let grant = &held.grant;
    let slot = {
        let mut record = recorder.lock();
        record.counters.grants += 1;
        record.holds.push(Hold {
            session: index,
            key: grant.key.clone(),
            fencing_token: grant.fencing_token,
            attempts: held.attempts,
            asked_at,
            granted_at: recorder.elapsed_millis(),
            released_at: None,
            ledger_accepted: false,
        });
        record.holds.len() - 1
    };
    let append = LedgerAppend {
        fencing_token: grant.fencing_token,
        entry: format!("s{index} round {round}"),
    };
    match env.ledger.append(&grant.key, &append).await {
        Ok(()) => recorder.lock().holds[slot].ledger_accepted = true,
        Err(err) if err.code() == Some(ErrorCode::FencedOut) => {
            recorder.lock().counters.fenced_out += 1;
        }
        Err(err) => recorder.note_error(format!("ledger write failed: {}", describe(&err))),
    }
    slot
}

/// Stamps the release time just before the release is sent: the client's hold ends there.
fn mark_released(recorder: &Recorder, slot: usize) {
    let at = recorder.elapsed_millis();
    recorder.lock().holds[slot].released_at = Some(at);
}

/// What a lost session most likely means in the browser, and what to do about it.
pub const SESSION_EXPIRED: &str = "a session expired before its heartbeat got through \
    (SESSION_NOT_FOUND): with many sessions over HTTP/1.1 the browser queues requests (6 \
    connections per server), so heartbeats arrive late; run the server over TLS for HTTP/2 \
    (LOCK_TLS=self-signed scripts/run.sh), raise the TTL or lower the number of sessions";

/// A transport error in words a newcomer can act on.
pub fn describe(err: &TransportError) -> String {
    match err {
        TransportError::Network(detail) => format!(
            "cannot reach the lock server (is it running, and does it allow this origin?): {detail}"
        ),
        TransportError::Timeout(after) => {
            format!("the lock server did not answer within {after:?}")
        }
        other if other.code() == Some(ErrorCode::SessionNotFound) => SESSION_EXPIRED.to_string(),
        other => other.to_string(),
    }
}
