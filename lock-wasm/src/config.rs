//! [`ClientConfig`]: a client's settings beyond its seams, their defaults (ASSUMPTIONS), and
//! the checks a lock TTL must pass under them.

use std::time::Duration;

use lock_api::limits::{validate_ttl, DEFAULT_LOCK_TTL_MILLIS};

use crate::backoff::millis;
use crate::error::LockError;
use crate::renewal::{safety_margin, shortest_lock_ttl};

/// Per-request timeout of every call (ASSUMPTION: 2 s, `lock.client.request-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// First round-trip estimate before any L4 was measured (ASSUMPTION: 50 ms).
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(50);
/// Fixed floor delay after 503 NOT_LEADER (ASSUMPTION: 100 ms).
pub const DEFAULT_NOT_LEADER_DELAY: Duration = Duration::from_millis(100);

/// Client settings beyond the seams. All have defaults (ASSUMPTIONS, see the constants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Session TTL asked for in L1; `None` takes the server default (15 s).
    pub session_ttl: Option<Duration>,
    /// Owner label sent in L1.
    pub owner: Option<String>,
    /// Timeout of every request (L4 adds its `waitMillis`).
    pub request_timeout: Duration,
    /// Fixed safety margin; `None` uses [`safety_margin`]'s rule.
    pub safety_margin: Option<Duration>,
    /// Backend label of `lock_session_lost{backend}` (e.g. `sqlite`, `etcd`).
    pub backend: String,
    /// Round-trip estimate until L4 calls have been measured.
    pub initial_rtt: Duration,
    /// Floor delay after 503.
    pub not_leader_delay: Duration,
    /// Lock TTL of [`crate::LockClientSession::acquire_default`].
    pub default_lock_ttl: Duration,
}

impl ClientConfig {
    /// The safety margin these settings give a TTL: the fixed one, or [`safety_margin`].
    pub fn margin(&self, ttl: Duration) -> Duration {
        self.safety_margin.unwrap_or_else(|| safety_margin(ttl))
    }

    /// The shortest lock TTL heartbeats can keep alive under this margin (see
    /// [`crate::renewal`]; 300 ms with the default margin); `None` if none can.
    pub fn shortest_lock_ttl(&self) -> Option<Duration> {
        shortest_lock_ttl(|ttl| self.margin(ttl))
    }

    /// Checks a lock TTL: the contract's range, then the renewal rule. VALIDATION_FAILED
    /// names `field` and, for a TTL too short to renew, the shortest one that works.
    pub fn check_lock_ttl(&self, ttl: Duration, field: &str) -> Result<(), LockError> {
        let ms = millis(ttl);
        validate_ttl(ms).map_err(|m| LockError::validation(field, m))?;
        match self.shortest_lock_ttl() {
            Some(shortest) if ttl >= shortest => Ok(()),
            Some(shortest) => Err(LockError::validation(
                field,
                format!(
                    "must be at least {} ms, got {ms}: a shorter lock's local deadline comes \
                     too soon after its scheduled renewal for the renewal to be answered",
                    millis(shortest)
                ),
            )),
            None => Err(LockError::validation(
                field,
                "the configured safety margin leaves no lock TTL time to be renewed",
            )),
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            session_ttl: None,
            owner: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            safety_margin: None,
            backend: "unknown".into(),
            initial_rtt: DEFAULT_INITIAL_RTT,
            not_leader_delay: DEFAULT_NOT_LEADER_DELAY,
            default_lock_ttl: Duration::from_millis(DEFAULT_LOCK_TTL_MILLIS),
        }
    }
}
