//! Full-jitter and server-queue contenders: the SDK's own session and acquire loop,
//! unchanged, exclusive for writers and shared for readers (`acquire_hold`). The dashboard
//! only watches: an [`EventSink`] turns the SDK's `contention` events into the sleeps of the
//! jitter histogram and its grant/not-granted events into L4 call counts.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_api::{ErrorCode, HoldKind, LockGrant};
use lock_wasm::{
    AcquirePolicy, Backoff, ClientConfig, ClientEvent, EventSink, LockClient, LockClientSession,
    LockError, LockHandle,
};

use crate::model::record::{OpenSession, Sleep};

use super::recorder::Recorder;
use super::setup::Setup;
use super::Held;

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
            ClientEvent::SessionLost { .. } | ClientEvent::ReleaseFailed { .. } => {}
        }
    }
}

/// One contender on an SDK session.
pub struct SdkContender {
    session: LockClientSession,
    policy: AcquirePolicy,
    hold: HoldKind,
    ttl: Duration,
    watcher: Arc<Watcher>,
}

impl SdkContender {
    /// Opens the contender's SDK session (L1, then heartbeats on the env's spawner).
    pub async fn open(setup: &Setup<'_>) -> Result<Self, String> {
        let policy = setup.policy()?;
        // The SDK's seam takes an `Arc<dyn EventSink>`. In the browser the watcher is not
        // `Send` (the clock inside the recorder holds JS handles), and needs not be: wasm32
        // has one thread.
        #[allow(clippy::arc_with_non_send_sync)]
        let watcher = Arc::new(Watcher {
            recorder: setup.recorder.clone(),
            index: setup.index,
            backoff: Backoff::new(policy.base_backoff(), policy.max_backoff()),
            last_attempts: AtomicU32::new(0),
        });
        let env = setup.env;
        let client = LockClient::new(
            env.transport.clone(),
            env.clock.clone(),
            env.spawner.clone(),
            setup.rng(),
        )
        .with_events(watcher.clone())
        .with_config(ClientConfig {
            session_ttl: Some(setup.ttl()),
            owner: Some(setup.owner()),
            ..ClientConfig::default()
        });
        let session = client.open_session().await.map_err(|e| describe(&e))?;
        Ok(SdkContender {
            session,
            policy,
            hold: setup.hold(),
            ttl: setup.ttl(),
            watcher,
        })
    }

    /// The server's id of this session.
    pub fn session(&self) -> OpenSession {
        OpenSession {
            id: self.session.id().to_owned(),
            holder_id: self.session.holder_id().to_owned(),
        }
    }

    /// The SDK's acquire, in the contender's mode; `None` when the SDK gave up (budget or
    /// attempts).
    pub async fn acquire(&self, key: &str) -> Result<Option<Held>, String> {
        let handle = self
            .session
            .acquire_hold(key, self.hold, self.ttl, &self.policy)
            .await
            .map_err(|e| describe(&e))?;
        Ok(handle.map(|handle| Held {
            grant: self.grant_of(&handle),
            attempts: self.watcher.last_attempts.load(Ordering::Relaxed),
            handle: Some(handle),
        }))
    }

    /// The grant a handle stands for, in wire shape.
    fn grant_of(&self, handle: &LockHandle) -> LockGrant {
        LockGrant {
            mode: handle.mode(),
            limit: handle.limit(),
            key: handle.key().to_string(),
            session_id: self.session.id().to_owned(),
            fencing_token: handle.fencing_token(),
            ttl_millis: u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX),
            waited_millis: 0,
        }
    }

    /// Releases; counts a lock the server says was already gone unless the SDK had already
    /// reported it lost (then its event counted it). `held` came from [`Self::acquire`], so
    /// it carries the SDK's handle.
    pub async fn release(&self, held: &Held) {
        let Some(handle) = &held.handle else { return };
        let known_lost = handle.is_lost();
        if let Err(LockError::LockLost { .. }) = self.session.release(handle).await {
            if !known_lost {
                self.watcher.recorder.lock().counters.lost_locks += 1;
            }
        }
    }

    /// Closes the session (L3).
    pub async fn close(&self) {
        let _ = self.session.close().await;
    }
}

fn describe(err: &LockError) -> String {
    match err {
        LockError::Network(detail) => format!(
            "cannot reach the lock server (is it running, and does it allow this origin?): {detail}"
        ),
        LockError::SessionLost => super::failure::SESSION_EXPIRED.to_string(),
        other => other.to_string(),
    }
}
