//! [`ClientParts`]: what every session of one client shares — the seams, the event sink, the
//! settings and the session-lost counter. The bottom of the session layer: the session state,
//! the heartbeat task and the acquire loop read it; it reads none of them.

use std::sync::Arc;

use crate::backoff::RngSource;
use crate::clock::Clock;
use crate::config::ClientConfig;
use crate::events::{ClientEvent, EventSink, SessionLostCounter};
use crate::spawn::Spawner;
use crate::transport::Transport;

/// The seams and settings of one client (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct ClientParts {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) spawner: Arc<dyn Spawner>,
    pub(crate) rng: Arc<dyn RngSource>,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) config: ClientConfig,
    pub(crate) sessions_lost: Arc<SessionLostCounter>,
}

impl ClientParts {
    /// Hands `event` to the client's sink.
    pub(crate) fn emit(&self, event: ClientEvent) {
        self.events.on_event(&event);
    }
}
