//! One contender's life: open a session, then per round acquire its key (shared for a
//! reader), write the grant's token to the fenced ledger (a writer only), hold, release; finally close the session. Full jitter and the
//! server queue go through the SDK ([`super::sdk`]), the comparison strategies through
//! `lock_lab`'s loop ([`super::comparison`]); the rounds are the same for all.

use std::convert::Infallible;
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::{ErrorCode, LedgerAppend, LockMode};

use crate::model::config::{key_name, ExperimentConfig};
use crate::model::record::{Hold, OpenSession};

use super::comparison::ComparisonContender;
use super::failure::describe;
use super::recorder::Recorder;
use super::sdk::SdkContender;
use super::setup::Setup;
use super::{CancelFlag, Env, Held};

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

    fn session(&self) -> OpenSession {
        match self {
            Contender::Sdk(c) => c.session(),
            Contender::Comparison(c) => c.session(),
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
    recorder.lock().sessions[index as usize] = contender.session();
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

/// Records the grant (asked for at `asked_at`) and, for an exclusive grant, performs the
/// fenced side effect. Returns the hold's index.
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
            mode: grant.mode,
            limit: grant.limit,
            attempts: held.attempts,
            asked_at,
            granted_at: recorder.elapsed_millis(),
            released_at: None,
            ledger_accepted: false,
        });
        record.holds.len() - 1
    };
    if grant.mode == LockMode::Shared {
        // A reader writes nothing: a shared hold keeps writers out, not other readers, so it
        // is no licence to write, and two readers' writes would fence each other out.
        return slot;
    }
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
