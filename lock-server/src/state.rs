//! What every handler shares.

use std::sync::Arc;

use tokio::sync::watch;

use crate::auth::Auth;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::store::Store;

/// Shared handler state; cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct AppState {
    /// The backend; routes never see which one.
    pub store: Arc<dyn Store>,
    /// Most tickets in one key's wait queue (`--max-waiters-per-key`); 0: nobody queues.
    pub max_waiters_per_key: u32,
    /// A wait-queue ticket's grace period (`--queue-grace-ms`).
    pub queue_grace_ms: u64,
    /// `/metrics` state.
    pub metrics: Arc<Metrics>,
    /// Whether the store accepts writes (`/readyz`), fed by the probe and every route.
    pub readiness: Arc<Readiness>,
    /// Default lock TTL for L4 without `ttlMillis`.
    pub default_lock_ttl_ms: u64,
    /// Default session TTL for L1 without `ttlMillis`.
    pub default_session_ttl_ms: u64,
    /// Clients and the admin token: who may call what.
    pub auth: Arc<Auth>,
    /// Flips to `true` on shutdown so waiting L4 requests end (503) instead of holding the
    /// graceful shutdown up for up to 30 s.
    pub shutdown: watch::Receiver<bool>,
}
