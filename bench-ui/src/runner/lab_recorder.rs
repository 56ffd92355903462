//! The shared, growing [`LabRecord`] of a fault-lab run (a [`Recorder`] of it: stamped with
//! the run's clock), its updates, and the event sink that stamps each contender's `lost`
//! report into it.

use std::sync::Arc;

use lock_wasm::fault::FaultSwitch;
use lock_wasm::{ClientEvent, EventSink};

use crate::model::lab_record::{LabContender, LabRecord};

use super::recorder::Recorder;

/// A handle on the record of the lab run in progress.
pub type LabRecorder = Recorder<LabRecord>;

impl Recorder<LabRecord> {
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
            let at = self.recorder.elapsed_millis();
            self.recorder.contender(self.side, self.contender, |c| {
                c.lost_at.get_or_insert(at);
            });
        }
    }
}
