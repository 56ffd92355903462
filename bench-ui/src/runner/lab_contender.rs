//! One fault-lab contender: an SDK session (`LockClient::new` with the seams, as
//! [`super::sdk`] opens one) whose clock and transport are its [`FaultSwitch`]'s, so a
//! fault injected on the switch acts on the SDK itself (heartbeats included), unchanged.
//! It acquires exclusive holds through the server's queue.

use std::sync::Arc;
use std::time::Duration;

use lock_api::limits::WAIT_MILLIS_MAX;
use lock_api::HoldKind;
use lock_wasm::fault::FaultSwitch;
use lock_wasm::{
    AcquirePolicy, ClientConfig, EventSink, LockClient, LockClientSession, LockHandle,
    PolicySettings, SeededRngSource,
};

use crate::model::lab_form::LabForm;

use super::Env;

/// How long after its grant the scenario's fault hits A (the script's ~100 ms).
pub const FAULT_AT: Duration = Duration::from_millis(100);

/// One contender of one side.
pub struct LabContender {
    /// Its faults, and the clock and transport they act through.
    pub switch: FaultSwitch,
    session: LockClientSession,
    policy: AcquirePolicy,
    ttl: Duration,
}

/// The acquire policy of both contenders: one long wait in the key's queue (B is handed the
/// key the moment A's hold ends on the server), with a budget past anything a scenario
/// needs: the fault, then A's lock or session TTL running out, and 5 s of slack.
fn policy(form: &LabForm) -> Result<AcquirePolicy, String> {
    let budget = FAULT_AT.as_millis() as u64
        + form.fault_ms
        + form.lock_ttl_ms
        + form.session_ttl_ms
        + 5_000;
    AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(budget),
        base_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(400),
        max_attempts: 1_000,
        wait_millis: WAIT_MILLIS_MAX.min(budget / 2),
    })
    .map_err(|e| e.to_string())
}

impl LabContender {
    /// Opens contender `index` ("A" = 0, "B" = 1) on `switch`, its events to `events`; its
    /// random draws seeded from the form's seed and its index, alike on both sides.
    pub async fn open(
        env: &Env,
        switch: FaultSwitch,
        form: &LabForm,
        index: u32,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, String> {
        let policy = policy(form)?;
        let seed = form.seed.wrapping_mul(1_000_003).wrapping_add(index.into());
        let client = LockClient::new(
            switch.transport(env.transport.clone()),
            switch.clock(),
            env.spawner.clone(),
            Arc::new(SeededRngSource::new(seed)),
        )
        .with_events(events)
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_millis(form.session_ttl_ms)),
            owner: Some(format!("bench-ui lab {}", name(index))),
            ..ClientConfig::default()
        });
        let session = client.open_session().await.map_err(|e| e.to_string())?;
        Ok(LabContender {
            switch,
            session,
            policy,
            ttl: Duration::from_millis(form.lock_ttl_ms),
        })
    }

    /// An exclusive hold of `key`; `None` when the budget ran out first.
    pub async fn acquire(&self, key: &str) -> Result<Option<LockHandle>, String> {
        self.session
            .acquire_hold(key, HoldKind::Exclusive, self.ttl, &self.policy)
            .await
            .map_err(|e| e.to_string())
    }

    /// Releases `handle`; whether the server still had it.
    pub async fn release(&self, handle: &LockHandle) -> bool {
        self.session.release(handle).await.is_ok()
    }

    /// Closes the session (L3; nothing reaches the server after a crash).
    pub async fn close(&self) {
        let _ = self.session.close().await;
    }
}

/// A contender's name: "A" for 0, "B" for 1.
pub fn name(index: u32) -> &'static str {
    if index == 0 {
        "A"
    } else {
        "B"
    }
}
