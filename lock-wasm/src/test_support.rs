//! Unit-test fixtures (feature `test-util`, native only): a client over a
//! [`ScriptedTransport`] on simulated time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backoff::SeededRngSource;
use crate::clock::ManualClock;
use crate::config::ClientConfig;
use crate::events::{ClientEvent, EventSink};
use crate::session::{LockClient, LockClientSession};
use crate::sim::{run_with, SimExecutor};
use crate::transport::ScriptedTransport;

/// Everything a unit test drives.
pub struct Fixture {
    /// The simulated time.
    pub clock: ManualClock,
    /// Runs the tests' futures and the session's background task.
    pub exec: SimExecutor,
    /// The scripted server.
    pub transport: ScriptedTransport,
    /// The client under test.
    pub client: LockClient,
    /// Every event the client emitted.
    pub events: Arc<Mutex<Vec<ClientEvent>>>,
}

struct Collect(Arc<Mutex<Vec<ClientEvent>>>);

impl EventSink for Collect {
    fn on_event(&self, event: &ClientEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// A client with a 15 s session (heartbeat every 5 s) and seed 1.
    pub fn new() -> Self {
        let clock = ManualClock::new();
        let exec = SimExecutor::new(clock.clone());
        let transport = ScriptedTransport::new();
        let events = Arc::new(Mutex::new(Vec::new()));
        let client = LockClient::new(
            Arc::new(transport.clone()),
            Arc::new(clock.clone()),
            exec.spawner(1),
            Arc::new(SeededRngSource::new(1)),
        )
        .with_events(Arc::new(Collect(events.clone())))
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_secs(15)),
            ..ClientConfig::default()
        });
        Fixture {
            clock,
            exec,
            transport,
            client,
            events,
        }
    }

    /// Runs `fut` on simulated time.
    pub fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        run_with(&self.exec, fut)
    }

    /// Opens a session.
    pub fn session(&self) -> LockClientSession {
        let client = self.client.clone();
        let session = self.run(async move { client.open_session().await.unwrap() });
        // Let the heartbeat task start (and arm its timer) before the test moves time.
        self.run(async {});
        session
    }

    /// Names of the events so far.
    pub fn event_names(&self) -> Vec<&'static str> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.name())
            .collect()
    }
}
