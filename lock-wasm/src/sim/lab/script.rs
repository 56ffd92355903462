//! The lab's script, played by two simulated contenders on one key: A acquires and works,
//! the fault hits A [`FAULT_AT`] after its grant, B queues for the key (`waitMillis`) and
//! gets it once A's hold ends server-side; each writes its token to both ledgers when its
//! work is done, unless it honours its signal and its handle was lost. A runs on the clock
//! and transport of its [`FaultSwitch`], so its faults reach the unchanged SDK the way they
//! do live.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::fault::{Fault, FaultSwitch};
use crate::handle::LockHandle;
use crate::policy::{AcquirePolicy, PolicySettings};
use crate::session::{LockClient, LockClientSession};

use super::super::executor::SimExecutor;
use super::super::service::SimService;
use super::{LabScenario, LabSettings, LabWrite, WriteOutcome};

/// The key both contenders take.
pub(super) const KEY: &str = "lab";
/// How long after its grant the fault hits A.
pub(super) const FAULT_AT: Duration = Duration::from_millis(100);
/// How long after the start B begins to acquire (A has its grant by then).
const B_STARTS: Duration = Duration::from_millis(50);
/// A contender's work after the fault's moment (A) or after its grant (B).
const WORK: Duration = Duration::from_millis(100);
/// Contender A's number in [`LabWrite::contender`]: the one the fault hits.
pub(super) const A: u32 = 0;
/// Contender B's number: the one that waits for the key.
pub(super) const B: u32 = 1;

/// What the run recorded, on the simulated clock.
#[derive(Default)]
pub(super) struct Record {
    pub(super) fenced: Vec<LabWrite>,
    pub(super) unfenced: Vec<LabWrite>,
    /// A's grant's token.
    pub(super) a_token: Option<u64>,
    /// When the fault hit A.
    pub(super) fault_at: Option<Duration>,
    /// When A's handle was lost as A knew it: reported (not by its own release) while A was
    /// alive, or found lost by A's own code first.
    pub(super) lost_at: Option<Duration>,
    /// When B got the key.
    pub(super) b_granted: Option<Duration>,
    /// Contenders whose script ended.
    pub(super) finished: u32,
}

/// The shared pieces of one run.
pub(super) struct Stage {
    pub(super) scenario: LabScenario,
    pub(super) settings: LabSettings,
    pub(super) clock: ManualClock,
    pub(super) exec: SimExecutor,
    pub(super) service: SimService,
    pub(super) record: Arc<Mutex<Record>>,
}

impl Stage {
    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn lock_ttl(&self) -> Duration {
        Self::ms(self.settings.lock_ttl_ms)
    }

    fn fault(&self) -> Duration {
        Self::ms(self.settings.fault_ms)
    }

    /// How long A works after its grant on its own clock: for a pause, past the fault's
    /// moment by [`WORK`] (the pause stretches it: A's last step lands inside the pause and
    /// ends when it does); otherwise past the fault's end by [`WORK`], so A writes after
    /// the partition heals and late after a revoke.
    fn a_work(&self) -> Duration {
        match self.scenario {
            LabScenario::GcPause | LabScenario::ShortPause => FAULT_AT + WORK,
            _ => FAULT_AT + self.fault() + WORK,
        }
    }

    /// B's acquire: queued at the server, with budget enough to outwait A's hold whatever
    /// the fault (its length, a lock TTL and a session TTL, and some slack).
    fn b_policy(&self) -> Option<AcquirePolicy> {
        let s = &self.settings;
        let budget = s.fault_ms + s.lock_ttl_ms + s.session_ttl_ms + 5_000;
        AcquirePolicy::new(PolicySettings {
            total_budget: Self::ms(budget),
            wait_millis: (budget / 2).min(lock_api::limits::WAIT_MILLIS_MAX),
            ..PolicySettings::default()
        })
        .ok()
    }

    /// Hits A with the scenario's fault (a revoke is the server's doing, R1).
    fn hit(&self, switch: &FaultSwitch) {
        self.record.lock().unwrap().fault_at = Some(self.clock.now());
        let fault = self.fault();
        match self.scenario {
            LabScenario::GcPause | LabScenario::ShortPause => switch.inject(Fault::Pause(fault)),
            // Dropped packets rather than refused connections: the usual partition.
            LabScenario::Partitioned => switch.inject(Fault::Partition {
                length: fault,
                hang: true,
            }),
            LabScenario::Crashed => switch.inject(Fault::Crash),
            LabScenario::OperatorRevoke => {
                self.service.revoke(KEY);
            }
        }
    }

    /// `contender` writes its token to both ledgers, now.
    fn write(&self, contender: u32, token: u64) {
        let at_ms = self.clock.now().as_millis() as u64;
        let fenced = self.service.fenced_ledger_append(KEY, token);
        let stale = self.service.unfenced_ledger_append(KEY, token);
        let write = |outcome| LabWrite {
            contender,
            token,
            at_ms,
            outcome,
        };
        let mut record = self.record.lock().unwrap();
        record.fenced.push(write(if fenced {
            WriteOutcome::Accepted
        } else {
            WriteOutcome::FencedOut
        }));
        record.unfenced.push(write(if stale {
            WriteOutcome::Corrupted
        } else {
            WriteOutcome::Accepted
        }));
    }

    /// The end of a contender's script: its write unless it honours a lost signal, then its
    /// release and close.
    async fn finish(&self, contender: u32, session: &LockClientSession, handle: &LockHandle) {
        let lost = handle.is_lost();
        if lost && contender == A {
            // A process waking from a pause may run its own code before the SDK's timer
            // reports the passed deadline; the loss is known to it from this instant either way.
            let now = self.clock.now();
            self.record.lock().unwrap().lost_at.get_or_insert(now);
        }
        if !(self.settings.honours_signal && lost) {
            self.write(contender, handle.fencing_token());
        }
        let _ = session.release(handle).await;
        let _ = session.close().await;
    }

    fn done(&self) {
        self.record.lock().unwrap().finished += 1;
    }

    /// Contender A: acquire, arm the fault, work, wait out a pause, write.
    pub(super) async fn run_a(self: Arc<Self>, client: LockClient, switch: FaultSwitch) {
        self.play_a(&client, &switch).await;
        self.done();
    }

    async fn play_a(self: &Arc<Self>, client: &LockClient, switch: &FaultSwitch) {
        let Ok(session) = client.open_session().await else {
            return;
        };
        let policy = AcquirePolicy::default();
        let Ok(Some(handle)) = session.acquire(KEY, self.lock_ttl(), &policy).await else {
            return;
        };
        self.record.lock().unwrap().a_token = Some(handle.fencing_token());
        self.watch_loss(&handle, switch);
        let (stage, hit) = (self.clone(), switch.clone());
        self.exec.spawn_in(0, async move {
            stage.clock.sleep(FAULT_AT).await;
            stage.hit(&hit);
        });
        switch.clock().sleep(self.a_work()).await;
        switch.gate().await;
        if switch.is_crashed() {
            // A dead process does nothing more; this close proves nothing of it leaves.
            let _ = session.close().await;
            return;
        }
        self.finish(A, &session, &handle).await;
    }

    /// Records when A's handle is reported lost, from a task of A's process, unless A
    /// released it or had crashed by then (a dead process reports nothing to anyone).
    fn watch_loss(&self, handle: &LockHandle, switch: &FaultSwitch) {
        let (handle, switch) = (handle.clone(), switch.clone());
        let (record, clock) = (self.record.clone(), self.clock.clone());
        self.exec.spawn_in(1, async move {
            let reason = handle.lost().await;
            if !reason.by_owner() && !switch.is_crashed() {
                record.lock().unwrap().lost_at = Some(clock.now());
            }
        });
    }

    /// Contender B: queue for the key, work, write.
    pub(super) async fn run_b(self: Arc<Self>, client: LockClient, switch: FaultSwitch) {
        self.play_b(&client, &switch).await;
        self.done();
    }

    async fn play_b(&self, client: &LockClient, switch: &FaultSwitch) {
        switch.clock().sleep(B_STARTS).await;
        let (Ok(session), Some(policy)) = (client.open_session().await, self.b_policy()) else {
            return;
        };
        let Ok(Some(handle)) = session.acquire(KEY, self.lock_ttl(), &policy).await else {
            return;
        };
        self.record.lock().unwrap().b_granted = Some(self.clock.now());
        switch.clock().sleep(WORK).await;
        switch.gate().await;
        self.finish(B, &session, &handle).await;
    }
}
