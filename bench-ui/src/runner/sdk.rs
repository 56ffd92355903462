//! Full-jitter contenders: the SDK's own session and acquire loop, unchanged. The dashboard
//! only watches: an [`EventSink`] turns the SDK's `contention` events into the sleeps of the
//! jitter histogram and its grant/not-granted events into L4 call counts.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_api::{ErrorCode, LockGrant};
use lock_wasm::{
    AcquirePolicy, Backoff, ClientConfig, ClientEvent, EventSink, LockClient, LockClientSession,
    LockError, LockHandle, PolicySettings, SeededRngSource,
};

use crate::model::config::ExperimentConfig;
use crate::model::record::Sleep;

use super::recorder::Recorder;
use super::Env;

/// Records what the SDK reports about one contender.
struct Watcher {
    recorder: Recorder,
    index: u32,
    backoff: Backoff,
    last_attempts: AtomicU32,
}

impl EventSink for Watcher {
    fn on_event(&self, event: &ClientEvent) {
        let mut record = self.recorder.lock();
        match event {
            ClientEvent::Contention {
                attempt,
                delay,
                reason,
                ..
            } => {
                if let Ok(code) = serde_json::from_value::<ErrorCode>(reason.as_str().into()) {
                    record.counters.count_refusal(code);
                }
                // The SDK numbers attempts from 1; the histogram, like the backoff
                // formula, from 0.
                let attempt = attempt.saturating_sub(1);
                record.sleeps.push(Sleep {
                    session: self.index,
                    attempt,
                    delay_millis: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    ceiling_millis: self.backoff.ceiling_millis(attempt),
                });
            }
            ClientEvent::Granted { attempts, .. } | ClientEvent::NotGranted { attempts, .. } => {
                record.counters.l4_calls += attempts;
                self.last_attempts.store(*attempts, Ordering::Relaxed);
            }
            ClientEvent::Lost { .. } => record.counters.lost_locks += 1,
            ClientEvent::SessionLost { .. } => {}
        }
    }
}

/// One contender on an SDK session.
pub struct SdkContender {
    session: LockClientSession,
    policy: AcquirePolicy,
    ttl: Duration,
    watcher: Arc<Watcher>,
}

impl SdkContender {
    /// Opens the contender's SDK session (L1, then heartbeats on the env's spawner).
    pub async fn open(
        env: &Env,
        recorder: &Recorder,
        config: &ExperimentConfig,
        index: u32,
    ) -> Result<Self, String> {
        let p = config.policy;
        let policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_millis(p.budget_millis),
            base_backoff: Duration::from_millis(p.base_millis),
            max_backoff: Duration::from_millis(p.cap_millis),
            max_attempts: p.max_attempts,
            wait_millis: 0,
        })
        .map_err(|e| e.to_string())?;
        // The SDK's seam takes an `Arc<dyn EventSink>`. In the browser the watcher is not
        // `Send` (the clock inside the recorder holds JS handles), and needs not be: wasm32
        // has one thread.
        #[allow(clippy::arc_with_non_send_sync)]
        let watcher = Arc::new(Watcher {
            recorder: recorder.clone(),
            index,
            backoff: Backoff::new(policy.base_backoff(), policy.max_backoff()),
            last_attempts: AtomicU32::new(0),
        });
        let seed = config
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(index.into());
        let client = LockClient::new(
            env.transport.clone(),
            env.clock.clone(),
            env.spawner.clone(),
            Arc::new(SeededRngSource::new(seed)),
        )
        .with_events(watcher.clone())
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_millis(config.ttl_millis)),
            owner: Some(format!("bench-ui s{index}")),
            ..ClientConfig::default()
        });
        let session = client.open_session().await.map_err(|e| describe(&e))?;
        Ok(SdkContender {
            session,
            policy,
            ttl: Duration::from_millis(config.ttl_millis),
            watcher,
        })
    }

    /// The server's id of this session.
    pub fn session_id(&self) -> String {
        self.session.id().to_string()
    }

    /// The SDK's acquire.
    pub async fn acquire(&mut self, key: &str) -> Result<Option<LockHandle>, String> {
        self.session
            .acquire(key, self.ttl, &self.policy)
            .await
            .map_err(|e| describe(&e))
    }

    /// L4 calls of the last finished acquire.
    pub fn last_attempts(&self) -> u32 {
        self.watcher.last_attempts.load(Ordering::Relaxed)
    }

    /// The grant a handle stands for, in wire shape.
    pub fn grant_of(&self, handle: &LockHandle) -> LockGrant {
        LockGrant {
            key: handle.key().to_string(),
            session_id: self.session_id(),
            fencing_token: handle.fencing_token(),
            ttl_millis: u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Releases; counts a lock the server says was already gone unless the SDK had already
    /// reported it lost (then its event counted it).
    pub async fn release(&mut self, handle: &LockHandle) {
        let known_lost = handle.is_lost();
        if let Err(LockError::LockLost { .. }) = self.session.release(handle).await {
            if !known_lost {
                self.watcher.recorder.lock().counters.lost_locks += 1;
            }
        }
    }

    /// Closes the session (L3).
    pub async fn close(&mut self) {
        let _ = self.session.close().await;
    }
}

fn describe(err: &LockError) -> String {
    match err {
        LockError::Network(detail) => format!(
            "cannot reach the lock server (is it running, and does it allow this origin?): {detail}"
        ),
        LockError::SessionLost => super::contender::SESSION_EXPIRED.to_string(),
        other => other.to_string(),
    }
}
