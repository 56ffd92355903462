//! [`LostRecorder`]: each simulated client's event sink, writing what the client reported
//! into the run's [`World`].

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::clock::{Clock, ManualClock};
use crate::events::{ClientEvent, EventSink};

use super::world::World;

/// Records the sessions a client declares lost (invariant 3) and when each `lock_lost`
/// event is emitted (invariant 5).
pub(super) struct LostRecorder {
    pub(super) lost: Arc<Mutex<BTreeSet<String>>>,
    pub(super) world: Arc<World>,
    pub(super) clock: ManualClock,
}

impl EventSink for LostRecorder {
    fn on_event(&self, event: &ClientEvent) {
        match event {
            ClientEvent::SessionLost { holder_id } => {
                self.lost.lock().unwrap().insert(holder_id.clone());
            }
            ClientEvent::Lost {
                key,
                fencing_token,
                reason,
            } => {
                let grant = (key.clone(), *fencing_token);
                let event = (grant, self.clock.now(), *reason);
                self.world.events.lock().unwrap().push(event);
            }
            _ => {}
        }
    }
}
