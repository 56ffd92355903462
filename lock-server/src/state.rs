//! What every handler shares.

use std::sync::Arc;

use tokio::sync::watch;

use crate::auth::Auth;
use crate::contention::Waiters;
use crate::metrics::Metrics;
use crate::store::Store;

/// Shared handler state; cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct AppState {
    /// The backend; routes never see which one.
    pub store: Arc<dyn Store>,
    /// Server-side waiters per key.
    pub waiters: Arc<Waiters>,
    /// `/metrics` state.
    pub metrics: Arc<Metrics>,
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
