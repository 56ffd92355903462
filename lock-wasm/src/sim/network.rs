//! [`SimTransport`]: a seeded, lossy network in front of the modelled server, and
//! [`LostSessions`], the check "no call after a lost session" it makes as calls reach it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::Clock;
use crate::transport::{Answer, Request, Transport};

use super::service::{sim_holder_id, SimService};

/// Network behaviour of a [`SimTransport`].
#[derive(Debug, Clone, Copy)]
pub struct Network {
    /// One-way delay, uniform in `[min, max]` milliseconds.
    pub delay_millis: (u64, u64),
    /// Probability that a request or an answer is lost (the caller's timeout fires).
    pub loss: f64,
}

/// The invariant "no call after a lost session": sessions the clients declared lost are
/// registered in [`LostSessions::sessions`] by their holder ids (what `session_lost` events
/// name them by), and any later call naming one is a violation.
/// Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct LostSessions {
    lost: Arc<Mutex<BTreeSet<String>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl LostSessions {
    /// The holder ids of the sessions the clients have declared lost (shared with the
    /// harness).
    pub fn sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.clone()
    }

    /// Calls made after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// Records a violation if `what`, sent at `now`, names a session declared lost.
    pub fn check(&self, what: &str, session_id: &str, now: Duration) {
        if self
            .lost
            .lock()
            .unwrap()
            .contains(&sim_holder_id(session_id))
        {
            self.violations.lock().unwrap().push(format!(
                "{what} sent at {now:?} for session {session_id} after it was declared lost"
            ));
        }
    }
}

/// A lossy network in front of a [`SimService`]. It also checks [`LostSessions`] as calls
/// reach it.
#[derive(Clone)]
pub struct SimTransport {
    service: SimService,
    network: Network,
    rng: Arc<Mutex<StdRng>>,
    lost: LostSessions,
    /// `SIM_TRACE` set: print every call and answer with its simulated time (for replaying a
    /// failing seed by hand).
    trace: bool,
}

impl SimTransport {
    /// A transport to `service` whose delays and losses are drawn from `seed`.
    pub fn new(service: SimService, network: Network, seed: u64) -> Self {
        SimTransport {
            service,
            network,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            lost: LostSessions::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    /// The set of sessions the client has declared lost (shared with the harness).
    pub fn lost_sessions(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.lost.sessions()
    }

    /// Calls made after their session was declared lost.
    pub fn violations(&self) -> Vec<String> {
        self.lost.violations()
    }

    fn check_session(&self, what: &str, session_id: &str) {
        if self.trace {
            eprintln!("{:?} {session_id} sends {what}", self.service.clock().now());
        }
        self.lost
            .check(what, session_id, self.service.clock().now());
    }

    /// One network hop: a seeded delay, or forever if the packet is lost.
    async fn hop(&self) {
        let (delay, lost) = {
            let mut rng = self.rng.lock().unwrap();
            let (lo, hi) = self.network.delay_millis;
            (
                rng.random_range(lo..=hi),
                rng.random_bool(self.network.loss),
            )
        };
        if lost {
            std::future::pending::<()>().await;
        }
        self.service
            .clock()
            .sleep(Duration::from_millis(delay))
            .await;
    }

    /// Request hop, the server's work from arrival time, answer hop.
    async fn exchange(&self, request: Request<'_>) -> Answer {
        self.hop().await;
        let answer = self.service.answer(request).await;
        if self.trace {
            eprintln!(
                "{:?} server answered {answer:?}",
                self.service.clock().now()
            );
        }
        self.hop().await;
        answer
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for SimTransport {
    async fn send(&self, request: Request<'_>, _timeout: Duration) -> Answer {
        if let Some(id) = request.session_id() {
            self.check_session(request.route().label(), id);
        }
        self.exchange(request).await
    }
}
