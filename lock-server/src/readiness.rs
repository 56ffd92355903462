//! Readiness: whether the store accepts writes now, for `GET /readyz`, the
//! `lock_store_ready` gauge and the `store_unavailable` / `store_ready` log lines (C3, C4).
//!
//! Two sources feed it: a probe task that makes one tiny real write ([`Store::probe`]) every
//! [`PROBE_INTERVAL`], and the outcome of the requests' own writes (the route layer
//! [`observe`]): a write that fails with a store cause marks the replica unavailable at
//! once, a write that succeeds (or a good probe) marks it ready. Each transition, and only a
//! transition, logs one line; `/healthz` (liveness) knows nothing of this.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use lock_api::Unavailability;
use tokio::sync::watch;

use crate::metrics::{Metrics, StoreRoute};
use crate::store::lease::now_millis;
use crate::store::{Store, StoreError};

/// How often the probe writes (ASSUMPTION: 1 s; one tiny write a second costs nothing, and
/// a balancer polling `/readyz` sees a fault within about a second even with no traffic).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Longest a probe may take before it counts as failed (ASSUMPTION: 10 s, past SQLite's busy
/// timeout and the etcd per-request timeout, so each backend reports its own cause first).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/readyz` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The store accepts writes.
    Ready,
    /// It does not, for `cause`, since `since_millis` (wall clock).
    Unavailable {
        cause: Unavailability,
        since_millis: u64,
    },
}

/// The readiness state, shared by the probe task and every route.
#[derive(Debug)]
pub struct Readiness {
    status: Mutex<Status>,
    metrics: Arc<Metrics>,
}

impl Readiness {
    /// Ready (a store that just opened accepted its writes), reporting to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        metrics.set_store_ready(true);
        Readiness {
            status: Mutex::new(Status::Ready),
            metrics,
        }
    }

    /// The status now.
    pub fn status(&self) -> Status {
        *self.lock()
    }

    /// A write failed for `cause`, seen by `route`: counted, and unavailable from now (one
    /// `store_unavailable` line when this is the transition; a later cause replaces the
    /// reason without another line).
    pub fn failed(&self, route: StoreRoute, cause: Unavailability) {
        self.metrics.count_store_error(route, cause);
        let mut status = self.lock();
        match *status {
            Status::Ready => {
                *status = Status::Unavailable {
                    cause,
                    since_millis: now_millis(),
                };
                self.metrics.set_store_ready(false);
                tracing::warn!(
                    event = "store_unavailable",
                    reason = cause.label(),
                    route = route.label()
                );
            }
            Status::Unavailable { since_millis, .. } => {
                *status = Status::Unavailable {
                    cause,
                    since_millis,
                };
            }
        }
    }

    /// A write succeeded: ready (one `store_ready` line when this is the transition).
    pub fn succeeded(&self) {
        let mut status = self.lock();
        if let Status::Unavailable { since_millis, .. } = *status {
            *status = Status::Ready;
            self.metrics.set_store_ready(true);
            tracing::info!(
                event = "store_ready",
                unavailableMillis = now_millis().saturating_sub(since_millis)
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Status> {
        // The state is a plain value, whole after any panic.
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs the probe every [`PROBE_INTERVAL`] until `shutdown` turns true. Its first write is
/// at once, so a store that cannot write is reported before traffic finds it.
pub fn spawn_probe(
    store: Arc<dyn Store>,
    readiness: Arc<Readiness>,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PROBE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.wait_for(|stopping| *stopping) => return,
            }
            probe_once(store.as_ref(), &readiness).await;
        }
    });
}

/// One probe and what it says. A probe that outlives [`PROBE_TIMEOUT`] counts as `busy`
/// (the writer is stuck behind the disk) on no backend-specific cause; any other failure (a
/// bug, a closing store) changes nothing.
pub async fn probe_once(store: &dyn Store, readiness: &Readiness) {
    match tokio::time::timeout(PROBE_TIMEOUT, store.probe()).await {
        Ok(Ok(())) => readiness.succeeded(),
        Ok(Err(StoreError::StoreUnavailable { cause, .. })) => {
            readiness.failed(StoreRoute::Probe, cause)
        }
        Ok(Err(error)) => tracing::debug!(event = "store_probe_failed", error = %error),
        Err(_) => readiness.failed(StoreRoute::Probe, Unavailability::Busy),
    }
}

/// What the route layer needs: the shared state and which route it wraps.
#[derive(Clone)]
pub struct Observed {
    /// The readiness state.
    pub readiness: Arc<Readiness>,
    /// The route's label.
    pub route: StoreRoute,
    /// Whether a 2xx of this route proves the store took a write (L1, L2, L3, L4, L6, R1,
    /// either demo ledger's append, L9): reads prove nothing, as etcd serves them without quorum.
    pub writes: bool,
}

/// The route layer: an answer that carries a store cause (`ApiError` puts it in the
/// response's extensions) counts and marks unavailable; a 2xx of a writing route marks
/// ready.
pub async fn observe(State(observed): State<Observed>, req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    if let Some(cause) = response.extensions().get::<Unavailability>() {
        observed.readiness.failed(observed.route, *cause);
    } else if observed.writes && response.status().is_success() {
        observed.readiness.succeeded();
    }
    response
}
