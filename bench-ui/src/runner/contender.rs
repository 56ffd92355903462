//! One contender's life: open a session, then per round acquire its key, write the grant's
//! token to the fenced ledger, hold, release; finally close the session. Full jitter goes
//! through the SDK ([`super::sdk`]), the comparison strategies through the experiment's own
//! loop ([`super::own_loop`]); everything after the grant is shared.

use std::time::Duration;

use futures::future::{select, Either};
use lock_api::{ErrorCode, LedgerAppend, LockGrant};
use lock_wasm::error::TransportError;

use crate::model::config::{key_name, ExperimentConfig};
use crate::model::record::Hold;
use crate::model::strategy::Strategy;

use super::own_loop::OwnLoopContender;
use super::recorder::Recorder;
use super::sdk::SdkContender;
use super::{Acquired, CancelFlag, Env};

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
    if config.strategy == Strategy::FullJitter {
        run_sdk(env, recorder, config, &key, index, cancel).await;
    } else {
        run_own(env, recorder, config, &key, index, cancel).await;
    }
}

async fn run_sdk(
    env: &Env,
    recorder: &Recorder,
    config: &ExperimentConfig,
    key: &str,
    index: u32,
    cancel: &CancelFlag,
) {
    let mut contender = match SdkContender::open(env, recorder, config, index).await {
        Ok(c) => c,
        Err(message) => return fail_all(recorder, config, &message),
    };
    recorder.lock().session_ids[index as usize] = contender.session_id();
    for round in 0..config.rounds {
        if cancel.is_cancelled() {
            break;
        }
        match contender.acquire(key).await {
            Ok(Some(handle)) => {
                let grant = contender.grant_of(&handle);
                let attempts = contender.last_attempts();
                let slot = on_granted(env, recorder, &grant, index, round, attempts).await;
                env.clock
                    .sleep(Duration::from_millis(config.hold_millis))
                    .await;
                mark_released(recorder, slot);
                contender.release(&handle).await;
            }
            Ok(None) => recorder.lock().counters.gave_up += 1,
            Err(message) => {
                recorder.note_error(message);
                recorder.lock().counters.errors += 1;
            }
        }
    }
    contender.close().await;
}

async fn run_own(
    env: &Env,
    recorder: &Recorder,
    config: &ExperimentConfig,
    key: &str,
    index: u32,
    cancel: &CancelFlag,
) {
    let opened =
        OwnLoopContender::open(env.transport.clone(), env.clock.clone(), config, index).await;
    let mut contender = match opened {
        Ok(c) => c,
        Err(err) => return fail_all(recorder, config, &describe(&err)),
    };
    recorder.lock().session_ids[index as usize] = contender.session_id.clone();
    let heartbeat = OwnLoopContender::heartbeat_forever(
        env.transport.clone(),
        env.clock.clone(),
        contender.session_id.clone(),
        contender.heartbeat,
    );
    let rounds = async {
        for round in 0..config.rounds {
            if cancel.is_cancelled() {
                break;
            }
            match contender.acquire(key, recorder).await {
                Ok(Acquired::Granted { grant, attempts }) => {
                    let slot = on_granted(env, recorder, &grant, index, round, attempts).await;
                    env.clock
                        .sleep(Duration::from_millis(config.hold_millis))
                        .await;
                    mark_released(recorder, slot);
                    match contender.release(&grant).await {
                        Ok(true) => {}
                        Ok(false) => recorder.lock().counters.lost_locks += 1,
                        Err(err) => recorder.note_error(describe(&err)),
                    }
                }
                Ok(Acquired::NotGranted) => recorder.lock().counters.gave_up += 1,
                Err(err) => {
                    recorder.note_error(describe(&err));
                    recorder.lock().counters.errors += 1;
                }
            }
        }
        contender
    };
    // The heartbeat never finishes, so this always ends with the rounds.
    let mut contender = match select(Box::pin(rounds), Box::pin(heartbeat)).await {
        Either::Left((contender, _)) => contender,
        Either::Right((never, _)) => match never {},
    };
    contender.close().await;
}

/// A session that never opened: every round of it counts as an error.
fn fail_all(recorder: &Recorder, config: &ExperimentConfig, message: &str) {
    recorder.note_error(message.to_string());
    recorder.lock().counters.errors += config.rounds;
}

/// Records the grant and performs the fenced side effect. Returns the hold's index.
async fn on_granted(
    env: &Env,
    recorder: &Recorder,
    grant: &LockGrant,
    index: u32,
    round: u32,
    attempts: u32,
) -> usize {
    let slot = {
        let mut record = recorder.lock();
        record.counters.grants += 1;
        record.holds.push(Hold {
            session: index,
            session_id: grant.session_id.clone(),
            key: grant.key.clone(),
            fencing_token: grant.fencing_token,
            attempts,
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
    (SESSION_NOT_FOUND): with many sessions the browser queues requests (6 connections per \
    server), so heartbeats arrive late; raise the TTL or lower the number of sessions";

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
