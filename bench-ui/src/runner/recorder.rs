//! The shared, growing record of a run, stamped with the run's clock: a [`RunRecord`] for an
//! experiment, a `LabRecord` for a fault-lab run (`super::lab_recorder` adds its own
//! updates).
//!
//! Contenders, the sampler and the UI's refresh loop all hold a clone. It is an
//! `Arc<Mutex<…>>` rather than an `Rc<RefCell<…>>` only because the SDK's seams (the event
//! sink in particular) must be `Send + Sync` natively, where the runner is unit-tested; in
//! the browser there is one thread and the lock is never contended. No lock is held across
//! an `.await`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lock_wasm::clock::Clock;

use crate::model::coverage::count_missed;
use crate::model::record::RunRecord;

/// A handle on the record of the run in progress.
#[derive(Clone)]
pub struct Recorder<R = RunRecord> {
    record: Arc<Mutex<R>>,
    clock: Arc<dyn Clock>,
    start: Duration,
}

impl<R> Recorder<R> {
    /// Starts recording `record` now, on `clock`.
    pub fn new(record: R, clock: Arc<dyn Clock>) -> Self {
        let start = clock.now();
        Recorder {
            record: Arc::new(Mutex::new(record)),
            clock,
            start,
        }
    }

    /// A reading of the run's clock in milliseconds since the run started (fractional).
    pub fn since_start(&self, at: Duration) -> f64 {
        at.saturating_sub(self.start).as_secs_f64() * 1000.0
    }

    /// Milliseconds since the run started (fractional).
    pub fn elapsed_millis(&self) -> f64 {
        self.since_start(self.clock.now())
    }

    /// The record, for a short synchronous update. A poisoned lock (a panic elsewhere) is
    /// recovered: the data is plain and still worth showing.
    pub fn lock(&self) -> MutexGuard<'_, R> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Recorder<RunRecord> {
    /// A copy of the record as it stands, for the UI, with the holds that L7 sampling missed
    /// counted (`model::coverage`).
    pub fn snapshot(&self) -> RunRecord {
        let mut record = self.lock().clone();
        count_missed(&mut record);
        record
    }

    /// Keeps why the L8 stream could not be followed (the first reason): the timeline falls
    /// back to the L7 samples.
    pub fn note_stream_error(&self, message: impl Into<String>) {
        let mut record = self.lock();
        if record.stream_error.is_none() {
            record.stream_error = Some(message.into());
        }
    }

    /// Keeps the first error of a run: later ones are usually consequences of it.
    pub fn note_error(&self, message: impl Into<String>) {
        let mut record = self.lock();
        if record.error.is_none() {
            record.error = Some(message.into());
        }
    }
}
