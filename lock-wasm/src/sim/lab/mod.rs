//! The fault lab, simulated: two contenders on one key, a fault injected into the first (a
//! GC pause, a partition, a crash, an operator's revoke, or a short pause as the control),
//! and every write of theirs to both demo ledgers of the modelled server — the fenced one,
//! which refuses a token lower than the highest it accepted, and the unfenced one, which
//! accepts it and marks it stale. The dashboard shows the outcome beside the same scenario
//! run live; the script is the same (see `script`).
//!
//! The faults are the SDK's own wrappers ([`crate::fault::FaultSwitch`]): contender A's
//! client runs on the switch's clock and transport in front of the simulated network, the
//! same code path as live; only the revoke is the modelled server's R1. Each write goes to
//! both ledgers at the same instant, so the two columns are one run seen by each ledger.
//! A run is a pure function of its scenario and settings: the seed draws the network's
//! delays and the contenders' backoff, everything runs on one simulated clock.

mod scenarios;
mod script;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::backoff::SeededRngSource;
use crate::clock::ManualClock;
use crate::config::ClientConfig;
use crate::fault::FaultSwitch;
use crate::session::LockClient;
use crate::transport::Transport;

use super::executor::SimExecutor;
use super::network::{Network, SimTransport};
use super::service::{Faults, SimService, Step};

pub use scenarios::{LabScenario, LabSettings};
use script::{Record, Stage, KEY};

/// What the ledger did with one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Accepted, and not stale.
    Accepted,
    /// Refused by the fenced ledger: its token was lower than one it had accepted.
    FencedOut,
    /// A stale write accepted by the unfenced ledger.
    Corrupted,
}

/// One write of a contender's token to a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabWrite {
    /// 0 for A (the one the fault hits), 1 for B.
    pub contender: u32,
    /// The fencing token it wrote with.
    pub token: u64,
    /// When, in milliseconds since the run's start.
    pub at_ms: u64,
    /// What the ledger did with it.
    pub outcome: WriteOutcome,
}

/// What one lab run did. Times are milliseconds since the run's start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabOutcome {
    /// The writes as the fenced ledger answered them, in order.
    pub fenced: Vec<LabWrite>,
    /// The same writes as the unfenced ledger answered them.
    pub unfenced: Vec<LabWrite>,
    /// Writes the fenced ledger refused.
    pub fenced_out: u32,
    /// Stale writes the unfenced ledger accepted.
    pub corrupted: u32,
    /// When A's handle was lost as A knew it (its signal fired, or A found it lost when it
    /// woke); `None` when A kept it or had crashed (a dead process knows nothing).
    pub lost_at_ms: Option<u64>,
    /// When A's hold ended at the server (expiry, revoke, release, its session's end).
    pub lease_end_ms: Option<u64>,
    /// When the fault hit A.
    pub fault_at_ms: Option<u64>,
    /// When B got the key.
    pub b_granted_ms: Option<u64>,
}

/// The simulated network between the contenders and the server: 1–5 ms each way, no loss
/// (the lab's faults are the injected ones).
const NETWORK: Network = Network {
    delay_millis: (1, 5),
    loss: 0.0,
};
/// Each request's timeout, short enough that a hanging partition shows as several
/// heartbeat attempts.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// A run that has not ended by then is cut off (it cannot take that long: B's budget ends).
const RUN_LIMIT: Duration = Duration::from_secs(3_600);

/// Runs `scenario` with `settings` on the simulation; the same inputs give the same outcome.
/// Settings the SDK refuses (a lock TTL too short to renew) give an outcome with no grant
/// and no write.
pub fn run_lab(scenario: LabScenario, settings: &LabSettings) -> LabOutcome {
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let clock = ManualClock::new();
    let exec = SimExecutor::new(clock.clone());
    let service = SimService::new(clock.clone(), Faults::default()).recording_history();
    let network: Arc<dyn Transport> =
        Arc::new(SimTransport::new(service.clone(), NETWORK, rng.random()));
    let stage = Arc::new(Stage {
        scenario,
        settings: *settings,
        clock: clock.clone(),
        exec: exec.clone(),
        service: service.clone(),
        record: Arc::new(Mutex::new(Record::default())),
    });
    let config = ClientConfig {
        session_ttl: Some(Duration::from_millis(settings.session_ttl_ms)),
        request_timeout: REQUEST_TIMEOUT,
        backend: "sim".into(),
        ..ClientConfig::default()
    };
    // Group 1 is A's process, group 2 B's; the harness (the fault's timer) is group 0.
    let contender = |group: usize, rng: &mut StdRng| {
        let switch = FaultSwitch::new(Arc::new(clock.clone()));
        let client = LockClient::new(
            switch.transport(network.clone()),
            switch.clock(),
            exec.spawner(group),
            Arc::new(SeededRngSource::new(rng.random())),
        )
        .with_config(config.clone());
        (client, switch)
    };
    let (a, a_switch) = contender(1, &mut rng);
    let (b, b_switch) = contender(2, &mut rng);
    exec.spawn_in(1, stage.clone().run_a(a, a_switch));
    exec.spawn_in(2, stage.clone().run_b(b, b_switch));
    let record = stage.record.clone();
    // A run cut off (it cannot be, see RUN_LIMIT) reports what it recorded.
    let _ = exec.run_until(RUN_LIMIT, || record.lock().unwrap().finished == 2, || {});
    let record = std::mem::take(&mut *stage.record.lock().unwrap());
    outcome(record, &service)
}

/// The outcome of a recorded run.
fn outcome(record: Record, service: &SimService) -> LabOutcome {
    let ms = |at: Duration| at.as_millis() as u64;
    let count = |writes: &[LabWrite], outcome| {
        writes.iter().filter(|w| w.outcome == outcome).count() as u32
    };
    let lease_end = record.a_token.and_then(|token| {
        let history = service.history()?;
        history
            .events()
            .iter()
            .find(|e| e.key == KEY && e.step == Step::Ended { token })
            .map(|e| ms(e.at))
    });
    LabOutcome {
        fenced_out: count(&record.fenced, WriteOutcome::FencedOut),
        corrupted: count(&record.unfenced, WriteOutcome::Corrupted),
        fenced: record.fenced,
        unfenced: record.unfenced,
        lost_at_ms: record.lost_at.map(ms),
        lease_end_ms: lease_end,
        fault_at_ms: record.fault_at.map(ms),
        b_granted_ms: record.b_granted.map(ms),
    }
}
