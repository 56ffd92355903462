//! [`AcquirePolicy`]: how long and how often one acquire may try. Immutable and validated
//! once at construction, so the loop never meets a nonsensical budget.
//!
//! Defaults (ASSUMPTIONS, in C2 ct2-config and the README): base backoff 50 ms, max
//! backoff 2 s, total budget 10 s, max attempts 12, waitMillis 0.

use std::time::Duration;

use lock_api::limits::WAIT_MILLIS_MAX;

use crate::error::LockError;

/// Default total budget (ASSUMPTION).
pub const DEFAULT_TOTAL_BUDGET: Duration = Duration::from_secs(10);
/// Default base backoff (ASSUMPTION).
pub const DEFAULT_BASE_BACKOFF: Duration = Duration::from_millis(50);
/// Default backoff cap (ASSUMPTION).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Default attempt cap (ASSUMPTION).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 12;
/// Default server-side wait per attempt (ASSUMPTION): 0, so waiting is client-side and
/// observable rather than hidden in a server thread.
pub const DEFAULT_WAIT_MILLIS: u64 = 0;

/// The raw, unvalidated knobs; turn them into a policy with [`AcquirePolicy::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicySettings {
    /// Deadline of the whole acquire, measured from its start (`totalBudgetMillis`).
    pub total_budget: Duration,
    /// First backoff window (`baseBackoffMillis`).
    pub base_backoff: Duration,
    /// Largest backoff window (`maxBackoffMillis`).
    pub max_backoff: Duration,
    /// Secondary cap on L4 calls (`maxAttempts`); the deadline is the primary bound.
    pub max_attempts: u32,
    /// Server-side wait per attempt, 0…30000 (`waitMillis`).
    pub wait_millis: u64,
}

impl Default for PolicySettings {
    fn default() -> Self {
        PolicySettings {
            total_budget: DEFAULT_TOTAL_BUDGET,
            base_backoff: DEFAULT_BASE_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            wait_millis: DEFAULT_WAIT_MILLIS,
        }
    }
}

/// A validated acquire policy. Fields are private so an invalid one cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquirePolicy {
    settings: PolicySettings,
}

impl AcquirePolicy {
    /// Validates `settings`: budget > 0, attempts ≥ 1, base ≤ cap, waitMillis ≤ 30000 and
    /// waitMillis below the budget (a server wait longer than the budget would overrun it).
    /// Invalid → [`LockError::Validation`] naming the field.
    pub fn new(settings: PolicySettings) -> Result<Self, LockError> {
        if settings.total_budget.is_zero() {
            return Err(LockError::validation("totalBudgetMillis", "must be > 0"));
        }
        if settings.max_attempts == 0 {
            return Err(LockError::validation("maxAttempts", "must be >= 1"));
        }
        if settings.base_backoff > settings.max_backoff {
            return Err(LockError::validation(
                "baseBackoffMillis",
                "must be <= maxBackoffMillis",
            ));
        }
        if settings.wait_millis > WAIT_MILLIS_MAX {
            return Err(LockError::validation(
                "waitMillis",
                format!("must be between 0 and {WAIT_MILLIS_MAX}"),
            ));
        }
        if Duration::from_millis(settings.wait_millis) >= settings.total_budget {
            return Err(LockError::validation(
                "waitMillis",
                "must be below totalBudgetMillis",
            ));
        }
        Ok(AcquirePolicy { settings })
    }

    /// Total budget of one acquire.
    pub fn total_budget(&self) -> Duration {
        self.settings.total_budget
    }
    /// First backoff window.
    pub fn base_backoff(&self) -> Duration {
        self.settings.base_backoff
    }
    /// Backoff cap.
    pub fn max_backoff(&self) -> Duration {
        self.settings.max_backoff
    }
    /// Attempt cap.
    pub fn max_attempts(&self) -> u32 {
        self.settings.max_attempts
    }
    /// Server-side wait per attempt.
    pub fn wait_millis(&self) -> u64 {
        self.settings.wait_millis
    }
    /// The settings this policy was built from.
    pub fn settings(&self) -> PolicySettings {
        self.settings
    }
}

impl Default for AcquirePolicy {
    /// The ASSUMPTION defaults listed in the module docs.
    fn default() -> Self {
        AcquirePolicy {
            settings: PolicySettings::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(settings: PolicySettings) -> String {
        match AcquirePolicy::new(settings) {
            Err(LockError::Validation { field, .. }) => field,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid_and_match_the_assumptions() {
        let p = AcquirePolicy::new(PolicySettings::default()).unwrap();
        assert_eq!(p, AcquirePolicy::default());
        assert_eq!(p.base_backoff(), Duration::from_millis(50));
        assert_eq!(p.max_backoff(), Duration::from_secs(2));
        assert_eq!(p.total_budget(), Duration::from_secs(10));
        assert_eq!(p.max_attempts(), 12);
        assert_eq!(p.wait_millis(), 0);
    }

    #[test]
    fn invalid_settings_are_refused_with_the_field_named() {
        let d = PolicySettings::default();
        assert_eq!(
            field_of(PolicySettings {
                wait_millis: 30_001,
                ..d
            }),
            "waitMillis"
        );
        assert_eq!(
            field_of(PolicySettings {
                base_backoff: Duration::from_secs(3),
                ..d
            }),
            "baseBackoffMillis"
        );
        assert_eq!(
            field_of(PolicySettings {
                total_budget: Duration::ZERO,
                ..d
            }),
            "totalBudgetMillis"
        );
        assert_eq!(
            field_of(PolicySettings {
                max_attempts: 0,
                ..d
            }),
            "maxAttempts"
        );
        assert_eq!(
            field_of(PolicySettings {
                wait_millis: 10_000,
                ..d
            }),
            "waitMillis"
        );
        assert!(AcquirePolicy::new(PolicySettings {
            wait_millis: 30_000,
            total_budget: Duration::from_secs(31),
            ..d
        })
        .is_ok());
    }
}
