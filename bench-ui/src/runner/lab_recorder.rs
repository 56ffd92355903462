//! The shared, growing [`LabRecord`] of a fault-lab run, stamped with the run's clock, and
//! the event sink that stamps each contender's `lost` report into it. An `Arc<Mutex<…>>`
//! for the same reason as [`super::recorder::Recorder`]: the SDK's event sink must be
//! `Send + Sync` natively. No lock is held across an `.await`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lock_wasm::clock::Clock;
use lock_wasm::fault::FaultSwitch;
use lock_wasm::{ClientEvent, EventSink};

use crate::model::lab_record::{LabContender, LabRecord};

/// A handle on the record of the lab run in progress.
#[derive(Clone)]
pub struct LabRecorder {
    record: Arc<Mutex<LabRecord>>,
    clock: Arc<dyn Clock>,
    start: Duration,
}

impl LabRecorder {
    /// Starts recording `record` now, on `clock`.
    pub fn new(record: LabRecord, clock: Arc<dyn Clock>) -> Self {
        let start = clock.now();
        LabRecorder {
            record: Arc::new(Mutex::new(record)),
            clock,
            start,
        }
    }

    /// A reading of the run's clock in ms since the run started.
    pub fn since_start(&self, at: Duration) -> f64 {
        at.saturating_sub(self.start).as_secs_f64() * 1000.0
    }

    /// Ms since the run started.
    pub fn elapsed(&self) -> f64 {
        self.since_start(self.clock.now())
    }

    /// The record, for a short synchronous update (a poisoned lock is recovered: the data
    /// is plain and still worth showing).
    pub fn lock(&self) -> MutexGuard<'_, LabRecord> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Updates contender `contender` of side `side`.
    pub fn contender(&self, side: usize, contender: usize, update: impl FnOnce(&mut LabContender)) {
        let mut record = self.lock();
        if let Some(c) = record
            .sides
            .get_mut(side)
            .and_then(|s| s.contenders.get_mut(contender))
        {
            update(c);
        }
    }

    /// Keeps the first error of the run.
    pub fn note_error(&self, message: impl Into<String>) {
        self.lock().note_error(message);
    }

    /// The sink of one contender's SDK events: it stamps the first `lost` report, unless the
    /// contender had crashed (a dead process reports nothing to anyone).
    pub fn lost_sink(
        &self,
        side: usize,
        contender: usize,
        switch: FaultSwitch,
    ) -> Arc<dyn EventSink> {
        // The SDK's seam takes an `Arc<dyn EventSink>`; in the browser the sink is not `Send`
        // (the clock holds JS handles), and needs not be: wasm32 has one thread.
        #[allow(clippy::arc_with_non_send_sync)]
        Arc::new(LostSink {
            recorder: self.clone(),
            side,
            contender,
            switch,
        })
    }
}

/// Stamps a contender's `lost` event (its deadline passed, a heartbeat no longer listed the
/// lock, or its session was lost) at the instant the SDK reports it.
struct LostSink {
    recorder: LabRecorder,
    side: usize,
    contender: usize,
    switch: FaultSwitch,
}

impl EventSink for LostSink {
    fn on_event(&self, event: &ClientEvent) {
        if let (ClientEvent::Lost { .. }, false) = (event, self.switch.is_crashed()) {
            let at = self.recorder.elapsed();
            self.recorder.contender(self.side, self.contender, |c| {
                c.lost_at.get_or_insert(at);
            });
        }
    }
}
