//! [`HeartbeatWatch`]: the clients' transport as the simulation's invariants see it. In front
//! of it (an [`Intercept`]), it records each L2 as its client saw it: when it was sent, and
//! when its success arrived (never, if it failed, timed out or was dropped).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::transport::{Answer, Intercept, Outgoing, Route};

/// One L2 as its client saw it.
#[derive(Debug, Clone)]
struct Sent {
    session: String,
    at: Duration,
    answered: Option<Duration>,
}

/// Records every L2 on its way through. Cheap to clone; clones share the record.
#[derive(Clone)]
pub struct HeartbeatWatch {
    clock: ManualClock,
    sent: Arc<Mutex<Vec<Sent>>>,
}

impl HeartbeatWatch {
    /// Watches the L2 calls made through it, timed on `clock`.
    pub fn new(clock: ManualClock) -> Self {
        HeartbeatWatch {
            clock,
            sent: Arc::default(),
        }
    }

    /// Whether every L2 of `session` sent up to `until` came back successfully within
    /// `within` of being sent.
    pub fn all_answered(&self, session: &str, until: Duration, within: Duration) -> bool {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.session == session && s.at <= until)
            .all(|s| s.answered.is_some_and(|a| a - s.at <= within))
    }
}

impl Intercept for HeartbeatWatch {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        // Unanswered until its success arrives; a failure, or a future dropped on timeout,
        // leaves it so.
        let request = call.request();
        let index = match (request.route(), request.session_id()) {
            (Route::Heartbeat, Some(session)) => {
                let mut sent = self.sent.lock().unwrap();
                sent.push(Sent {
                    session: session.to_owned(),
                    at: self.clock.now(),
                    answered: None,
                });
                Some(sent.len() - 1)
            }
            _ => None,
        };
        let answer = call.send().await;
        if let (Some(index), true) = (index, answer.is_ok()) {
            self.sent.lock().unwrap()[index].answered = Some(self.clock.now());
        }
        answer
    }
}
