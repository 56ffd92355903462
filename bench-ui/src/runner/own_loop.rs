//! The experiment's own acquire loop, for the comparison strategies (no jitter, equal
//! jitter, decorrelated jitter) that the SDK deliberately does not offer.
//!
//! It mirrors the SDK's loop shape — deadline fixed at entry, attempts as a secondary cap,
//! never sleeping past the budget, only 409/429/503 retried — and differs only in the delay
//! rule, so the comparison measures the strategy and nothing else. L4 goes through the SDK's
//! [`Transport`], so the wire behaviour is the SDK's too.

use std::sync::Arc;
use std::time::Duration;

use lock_api::{AcquireRequest, LockGrant, OpenSessionRequest, ReleaseRequest};
use lock_wasm::clock::Clock;
use lock_wasm::error::TransportError;
use lock_wasm::transport::Transport;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::model::config::ExperimentConfig;
use crate::model::record::Sleep;
use crate::model::strategy::exponential_ceiling;

use super::recorder::Recorder;
use super::{Acquired, REQUEST_TIMEOUT, RTT_ESTIMATE};

/// One contender's session driven by the experiment's loop.
pub struct OwnLoopContender {
    transport: Arc<dyn Transport>,
    clock: Arc<dyn Clock>,
    config: ExperimentConfig,
    index: u32,
    rng: StdRng,
    /// The session id (L1's answer).
    pub session_id: String,
    /// How often to heartbeat, from L1's answer.
    pub heartbeat: Duration,
}

impl OwnLoopContender {
    /// Opens the contender's session (L1).
    pub async fn open(
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        config: &ExperimentConfig,
        index: u32,
    ) -> Result<Self, TransportError> {
        let request = OpenSessionRequest {
            ttl_millis: Some(config.ttl_millis),
            owner: Some(format!("bench-ui s{index}")),
        };
        let opened = transport.open_session(&request, REQUEST_TIMEOUT).await?;
        Ok(OwnLoopContender {
            transport,
            clock,
            config: config.clone(),
            index,
            rng: StdRng::seed_from_u64(
                config
                    .seed
                    .wrapping_mul(1_000_003)
                    .wrapping_add(index.into()),
            ),
            session_id: opened.session_id,
            heartbeat: Duration::from_millis(opened.heartbeat_millis.max(50)),
        })
    }

    /// Heartbeats until dropped (raced against the contender's work by the caller).
    pub async fn heartbeat_forever(
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        session_id: String,
        every: Duration,
    ) -> std::convert::Infallible {
        loop {
            clock.sleep(every).await;
            // A failed heartbeat is not fatal here: the next acquire or release reports
            // the session's fate, and the counters show it.
            let _ = transport.heartbeat(&session_id, REQUEST_TIMEOUT).await;
        }
    }

    /// The bounded retry loop with the configured strategy.
    pub async fn acquire(
        &mut self,
        key: &str,
        recorder: &Recorder,
    ) -> Result<Acquired, TransportError> {
        let policy = self.config.policy;
        let deadline = self.clock.now() + Duration::from_millis(policy.budget_millis);
        let request = AcquireRequest {
            session_id: self.session_id.clone(),
            ttl_millis: Some(self.config.ttl_millis),
            wait_millis: Some(0),
        };
        let mut previous = 0;
        for attempt in 0..policy.max_attempts {
            recorder.lock().counters.l4_calls += 1;
            match self.transport.acquire(key, &request, REQUEST_TIMEOUT).await {
                Ok(grant) => {
                    return Ok(Acquired::Granted {
                        grant,
                        attempts: attempt + 1,
                    })
                }
                Err(err) => match err.code() {
                    Some(code) if code.retry_safe() => recorder.lock().counters.count_refusal(code),
                    _ => return Err(err),
                },
            }
            if attempt + 1 == policy.max_attempts {
                break;
            }
            let delay = self
                .config
                .strategy
                .delay(&policy, attempt, previous, &mut self.rng);
            // Never sleep past the budget: a retry that cannot finish in time is pointless.
            let wake = self.clock.now() + Duration::from_millis(delay) + RTT_ESTIMATE;
            if wake > deadline {
                break;
            }
            recorder.lock().sleeps.push(Sleep {
                session: self.index,
                attempt,
                delay_millis: delay,
                ceiling_millis: exponential_ceiling(&policy, attempt),
            });
            self.clock.sleep(Duration::from_millis(delay)).await;
            previous = delay;
        }
        Ok(Acquired::NotGranted)
    }

    /// Releases (L6). `Ok(false)` when the lock was already gone (LOCK_LOST).
    pub async fn release(&mut self, grant: &LockGrant) -> Result<bool, TransportError> {
        let request = ReleaseRequest {
            fencing_token: grant.fencing_token,
            session_id: Some(self.session_id.clone()),
        };
        match self
            .transport
            .release(&grant.key, &request, REQUEST_TIMEOUT)
            .await
        {
            Ok(()) => Ok(true),
            Err(err) if err.code() == Some(lock_api::ErrorCode::LockLost) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Closes the session (L3); failures are ignored, the TTL cleans up.
    pub async fn close(&mut self) {
        let _ = self
            .transport
            .close_session(&self.session_id, REQUEST_TIMEOUT)
            .await;
    }
}
