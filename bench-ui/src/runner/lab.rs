//! A fault-lab run against the live server: the scenario's script (two contenders A and B
//! on one key; A acquires and works; the fault hits A [`FAULT_AT`] after its grant; B waits
//! in the key's queue and is granted once A's hold ends on the server; each writes its
//! token to the ledger once its work is done, A's work ending after its fault; a worker
//! that honours its signal skips its write once its handle is lost), run twice at once with
//! the same seeds on two keys: against the fenced ledger and against the unfenced one.
//! Faults can also be injected by hand on any contender while it runs ([`LabRun::inject`]).

use std::rc::Rc;
use std::time::Duration;

use futures::future::join;
use lock_api::{ErrorCode, LedgerAppend};
use lock_wasm::fault::{Fault, FaultKind, FaultSwitch};
use lock_wasm::LockHandle;

use crate::model::lab_form::LabForm;
use crate::model::lab_record::{FaultMark, FaultSpan, LabRecord, LabWrite, LedgerLine};
use crate::model::lab_scenario::{LabScenario, WriteOutcome};

use super::admin::Admin;
use super::failure::describe;
use super::lab_contender::{name, LabContender, FAULT_AT};
use super::lab_recorder::LabRecorder;
use super::Env;

/// A contender's work after the fault's moment (A) or after its grant (B), as the
/// simulation's script has it.
const WORK: Duration = Duration::from_millis(100);

/// The fault a scenario injects into A.
pub fn scenario_fault(scenario: LabScenario) -> FaultMark {
    match scenario {
        LabScenario::GcPause | LabScenario::ShortPause => FaultMark::Pause,
        LabScenario::Partitioned => FaultMark::Partition,
        LabScenario::Crashed => FaultMark::Crash,
        LabScenario::OperatorRevoke => FaultMark::Revoke,
    }
}

/// A lab run: its record, its four contenders' fault switches (fenced A, fenced B,
/// unfenced A, unfenced B), and what it talks to. Cheap to clone: the page keeps one to
/// inject faults by hand and to read the record as it grows.
#[derive(Clone)]
pub struct LabRun {
    recorder: LabRecorder,
    switches: Rc<Vec<FaultSwitch>>,
    env: Env,
    admin: Rc<dyn Admin>,
}

impl LabRun {
    /// A run of `form` on the keys of `run_id`, not started yet.
    pub fn new(env: &Env, admin: Rc<dyn Admin>, run_id: &str, form: LabForm) -> Self {
        let recorder = LabRecorder::new(LabRecord::new(run_id, form), env.clock.clone());
        let switches = (0..4)
            .map(|_| FaultSwitch::new(env.clock.clone()))
            .collect();
        LabRun {
            recorder,
            switches: Rc::new(switches),
            env: env.clone(),
            admin,
        }
    }

    /// The record as it stands, each contender's faults from its switch included.
    pub fn snapshot(&self) -> LabRecord {
        let mut record = self.recorder.lock().clone();
        for (s, side) in record.sides.iter_mut().enumerate() {
            for (c, contender) in side.contenders.iter_mut().enumerate() {
                let spans = self.switches[s * 2 + c].spans();
                let mut faults: Vec<FaultSpan> = spans
                    .iter()
                    .map(|span| FaultSpan {
                        kind: match span.kind {
                            FaultKind::Pause => FaultMark::Pause,
                            FaultKind::Partition => FaultMark::Partition,
                            FaultKind::Crash => FaultMark::Crash,
                        },
                        start: self.recorder.since_start(span.start),
                        end: span.end.map(|end| self.recorder.since_start(end)),
                    })
                    .collect();
                // The revokes, which no switch knows of.
                faults.append(&mut contender.faults);
                faults.sort_by(|a, b| a.start.total_cmp(&b.start));
                contender.faults = faults;
            }
        }
        record
    }

    /// Injects a fault of `kind` into contender `contender` (0 = A, 1 = B) of side `side`
    /// (0 = fenced, 1 = unfenced), now: a pause or partition lasting the form's fault
    /// length, a crash, or the operator's revoke of its hold (R1; nothing while it holds
    /// nothing).
    pub async fn inject(&self, side: usize, contender: usize, kind: FaultMark) {
        let length = Duration::from_millis(self.recorder.lock().form.fault_ms);
        let switch = &self.switches[side * 2 + contender];
        match kind {
            FaultMark::Pause => switch.inject(Fault::Pause(length)),
            // Dropped packets rather than refused connections: the usual partition.
            FaultMark::Partition => switch.inject(Fault::Partition { length, hang: true }),
            FaultMark::Crash => switch.inject(Fault::Crash),
            FaultMark::Revoke => self.revoke(side, contender).await,
        }
    }

    /// The operator's R1 on the contender's hold.
    async fn revoke(&self, side: usize, contender: usize) {
        let (key, token) = {
            let record = self.recorder.lock();
            let s = &record.sides[side];
            (s.key.clone(), s.contenders[contender].token)
        };
        let Some(token) = token else { return };
        let at = self.recorder.elapsed_millis();
        self.recorder.contender(side, contender, |c| {
            c.faults.push(FaultSpan {
                kind: FaultMark::Revoke,
                start: at,
                end: None,
            })
        });
        let reason = "fault lab: operator revoke";
        if let Err(err) = self.admin.revoke(&key, token, reason).await {
            let detail = describe(&err);
            self.recorder.note_error(format!(
                "the revoke (R1) failed (is the admin token right?): {detail}"
            ));
        }
    }

    /// Runs both sides to their end, then reads both ledgers back.
    pub async fn run(&self) {
        join(self.run_side(0), self.run_side(1)).await;
        for side in 0..2 {
            self.read_back(side).await;
        }
        self.recorder.lock().done = true;
    }

    /// One side's script.
    async fn run_side(&self, side: usize) {
        let (form, key) = {
            let record = self.recorder.lock();
            (record.form.clone(), record.sides[side].key.clone())
        };
        let open = |c: usize| {
            let switch = self.switches[side * 2 + c].clone();
            let sink = self.recorder.lost_sink(side, c, switch.clone());
            LabContender::open(&self.env, switch, &form, c as u32, sink)
        };
        // One after the other: a join of the two would be more code in the page for a
        // round trip saved.
        let (a, b) = match (open(0).await, open(1).await) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return self.recorder.note_error(e),
        };
        match a.acquire(&key).await {
            Ok(Some(handle)) => {
                self.granted(side, 0, &handle);
                let a_turn = self.a_turn(side, &a, &handle, &form);
                join(a_turn, self.b_turn(side, &b, &key, &form)).await;
            }
            Ok(None) => self.recorder.note_error("A was not granted its fresh key"),
            Err(e) => self.recorder.note_error(e),
        }
        a.close().await;
        b.close().await;
    }

    /// A: works, the scenario's fault hitting it on the way; writes once its work is done
    /// (unless crashed, or lost and honouring its signal); releases.
    async fn a_turn(&self, side: usize, a: &LabContender, handle: &LockHandle, form: &LabForm) {
        let fault = async {
            self.env.clock.sleep(FAULT_AT).await;
            self.inject(side, 0, scenario_fault(form.scenario)).await;
        };
        // A pause stretches A's work by itself (its last step lands inside the pause and ends
        // when it does); otherwise A works past the fault's end, so it writes after a
        // partition heals and late after a revoke.
        let work_length = match form.scenario {
            LabScenario::GcPause | LabScenario::ShortPause => FAULT_AT + WORK,
            _ => FAULT_AT + Duration::from_millis(form.fault_ms) + WORK,
        };
        let work = async {
            a.switch.clock().sleep(work_length).await;
            // A paused worker resumes only after its pause, with the token it had.
            a.switch.gate().await;
        };
        join(fault, work).await;
        self.finish(side, 0, a, handle, form).await;
    }

    /// B: waits in the key's queue; once granted (A's hold has ended on the server: A's
    /// lease ends there), works, writes and releases.
    async fn b_turn(&self, side: usize, b: &LabContender, key: &str, form: &LabForm) {
        match b.acquire(key).await {
            Ok(Some(handle)) => {
                let at = self.granted(side, 1, &handle);
                self.recorder.contender(side, 0, |a| {
                    a.lease_end_at.get_or_insert(at);
                });
                b.switch.clock().sleep(WORK).await;
                b.switch.gate().await;
                self.finish(side, 1, b, &handle, form).await;
            }
            Ok(None) => self
                .recorder
                .note_error("B was not granted within its budget"),
            Err(e) => self.recorder.note_error(e),
        }
    }

    /// A worker's end: its write (none once crashed, nor once lost when it honours its
    /// signal), then its release.
    async fn finish(
        &self,
        side: usize,
        index: usize,
        c: &LabContender,
        handle: &LockHandle,
        form: &LabForm,
    ) {
        let deadline = self.recorder.since_start(handle.deadline());
        self.recorder
            .contender(side, index, |c| c.deadline_at = Some(deadline));
        if c.switch.is_crashed() {
            return;
        }
        let lost = handle.is_lost();
        if lost {
            // A process waking from a pause may run its own code before the SDK's timer
            // reports the passed deadline: it knows of the loss from now either way.
            let at = self.recorder.elapsed_millis();
            self.recorder.contender(side, index, |c| {
                c.lost_at.get_or_insert(at);
            });
        }
        if !(form.honours_signal && lost) {
            self.write(side, index, handle.fencing_token()).await;
        }
        if c.release(handle).await {
            let at = self.recorder.elapsed_millis();
            self.recorder.contender(side, index, |c| {
                c.lease_end_at.get_or_insert(at);
            });
        }
    }

    /// Stamps a grant; returns its time.
    fn granted(&self, side: usize, index: usize, handle: &LockHandle) -> f64 {
        let at = self.recorder.elapsed_millis();
        let deadline = self.recorder.since_start(handle.deadline());
        self.recorder.contender(side, index, |c| {
            c.token = Some(handle.fencing_token());
            c.granted_at = Some(at);
            c.deadline_at = Some(deadline);
        });
        at
    }

    /// Writes `token` to the side's ledger and records the outcome.
    async fn write(&self, side: usize, index: usize, token: u64) {
        let (key, fenced) = {
            let record = self.recorder.lock();
            (record.sides[side].key.clone(), record.sides[side].fenced)
        };
        let body = LedgerAppend {
            fencing_token: token,
            entry: format!("{} token {token}", name(index as u32)),
        };
        let outcome = if fenced {
            match self.env.ledger.append(&key, &body).await {
                Ok(()) => Ok(WriteOutcome::Accepted),
                Err(e) if e.code() == Some(ErrorCode::FencedOut) => Ok(WriteOutcome::FencedOut),
                Err(e) => Err(e),
            }
        } else {
            match self.env.ledger.append_unfenced(&key, &body).await {
                Ok(answer) if answer.stale => Ok(WriteOutcome::Corrupted),
                Ok(_) => Ok(WriteOutcome::Accepted),
                Err(e) => Err(e),
            }
        };
        match outcome {
            Ok(outcome) => {
                let at = self.recorder.elapsed_millis();
                self.recorder.lock().sides[side].writes.push(LabWrite {
                    contender: index as u32,
                    token,
                    at,
                    outcome,
                });
            }
            Err(e) => self
                .recorder
                .note_error(format!("ledger write failed: {}", describe(&e))),
        }
    }

    /// Reads the side's ledger back (GET) into the record.
    async fn read_back(&self, side: usize) {
        let (key, fenced) = {
            let record = self.recorder.lock();
            (record.sides[side].key.clone(), record.sides[side].fenced)
        };
        match self.env.ledger.read(&key, !fenced).await {
            Ok(entries) => {
                self.recorder.lock().sides[side].ledger = entries
                    .entries
                    .into_iter()
                    .map(|e| LedgerLine {
                        token: e.fencing_token,
                        entry: e.entry,
                        stale: e.stale.unwrap_or(false),
                    })
                    .collect();
            }
            Err(e) => self
                .recorder
                .note_error(format!("reading the ledger back failed: {}", describe(&e))),
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use futures::future::LocalBoxFuture;
    use lock_wasm::error::TransportError;

    use super::*;
    use crate::model::lab_record::Tally;
    use crate::runner::simulated::{drive, world};

    /// The simulated server has no R1: revokes are not run here (the browser e2e does).
    struct NoAdmin;

    impl Admin for NoAdmin {
        fn revoke(
            &self,
            _: &str,
            _: u64,
            _: &str,
        ) -> LocalBoxFuture<'static, Result<(), TransportError>> {
            Box::pin(async { Ok(()) })
        }
    }

    /// Runs `form` against the SDK's simulated server, on simulated time.
    fn run(form: LabForm) -> LabRecord {
        let (env, clock, spawned) = world(form.seed);
        let lab = LabRun::new(&env, Rc::new(NoAdmin), "t", form);
        let running = lab.clone();
        assert!(drive(&clock, &spawned, async move { running.run().await }));
        lab.snapshot()
    }

    fn tallies(record: &LabRecord) -> (Tally, Tally) {
        (record.sides[0].tally(), record.sides[1].tally())
    }

    #[test]
    fn a_gc_pause_is_fenced_out_on_one_side_and_corrupts_the_other() {
        let record = run(LabForm::of(LabScenario::GcPause));
        assert_eq!(record.error, None);
        assert!(record.done);
        let (fenced, unfenced) = tallies(&record);
        assert!(
            fenced.fenced_out >= 1 && fenced.corrupted == 0,
            "{record:#?}"
        );
        assert!(unfenced.corrupted >= 1, "{record:#?}");
        assert!(record.sides[1].ledger.iter().any(|l| l.stale));
        assert!(record.sides[0].ledger.iter().all(|l| !l.stale));
        let a = &record.sides[0].contenders[0];
        let pause = &a.faults[0];
        assert_eq!(pause.kind, FaultMark::Pause);
        let (start, end) = (pause.start, pause.end.unwrap());
        assert!(end > start);
        let (lease_end, lost) = (a.lease_end_at.unwrap(), a.lost_at.unwrap());
        assert!(
            lease_end > start && lease_end < end,
            "A's lease ends inside its pause"
        );
        assert!(lost >= end, "A learns of its loss only when it wakes");
        let late = record.sides[0]
            .writes
            .iter()
            .find(|w| w.contender == 0)
            .unwrap();
        assert!(late.at >= end, "A writes once it wakes");
    }

    #[test]
    fn a_worker_that_honours_its_signal_writes_nothing_stale() {
        let form = LabForm {
            honours_signal: true,
            ..LabForm::of(LabScenario::GcPause)
        };
        let record = run(form);
        let (fenced, unfenced) = tallies(&record);
        assert_eq!(
            (fenced.fenced_out, unfenced.corrupted),
            (0, 0),
            "{record:#?}"
        );
        assert!(record.sides.iter().all(|s| s.writes.len() == 1));
    }

    #[test]
    fn a_short_pause_loses_nothing() {
        let record = run(LabForm::of(LabScenario::ShortPause));
        assert_eq!(record.error, None);
        for side in &record.sides {
            let tally = side.tally();
            assert_eq!(
                (tally.accepted, tally.fenced_out, tally.corrupted),
                (2, 0, 0),
                "{record:#?}"
            );
            assert_eq!(side.contenders[0].lost_at, None);
        }
    }

    #[test]
    fn a_crashed_worker_never_writes_and_the_other_gets_the_key() {
        let record = run(LabForm::of(LabScenario::Crashed));
        for side in &record.sides {
            let writers: Vec<u32> = side.writes.iter().map(|w| w.contender).collect();
            assert_eq!(writers, [1], "{record:#?}");
            assert_eq!(side.contenders[0].faults[0].kind, FaultMark::Crash);
        }
    }
}
