//! Backoff strategies compared by the experiments.
//!
//! Full jitter is the SDK's only production strategy; in a full-jitter run the dashboard
//! calls the SDK's own acquire loop and merely records what it slept. The other three exist
//! here, in the experiment code alone, so the dashboard can show why the SDK forbids them
//! (each keeps a synchronised component: contenders that collided once collide again).

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::config::Policy;

/// A retry-delay strategy for the acquire loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strategy {
    /// `uniform[0, min(cap, base·2^attempt)]`: the SDK's acquire, unchanged.
    FullJitter,
    /// `min(cap, base·2^attempt)`: plain exponential backoff, no randomness.
    NoJitter,
    /// `v/2 + uniform[0, v/2]` with `v = min(cap, base·2^attempt)`.
    EqualJitter,
    /// `min(cap, uniform[base, 3·previous])`, AWS's "decorrelated jitter".
    DecorrelatedJitter,
}

impl Strategy {
    /// Every strategy, full jitter first (the order of legends and sweeps).
    pub const ALL: [Strategy; 4] = [
        Strategy::FullJitter,
        Strategy::NoJitter,
        Strategy::EqualJitter,
        Strategy::DecorrelatedJitter,
    ];

    /// Human label for forms and legends.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::FullJitter => "full jitter (SDK)",
            Strategy::NoJitter => "no jitter",
            Strategy::EqualJitter => "equal jitter",
            Strategy::DecorrelatedJitter => "decorrelated jitter",
        }
    }

    /// Stable identifier used in form values and CSV.
    pub fn id(self) -> &'static str {
        match self {
            Strategy::FullJitter => "full",
            Strategy::NoJitter => "none",
            Strategy::EqualJitter => "equal",
            Strategy::DecorrelatedJitter => "decorrelated",
        }
    }

    /// Inverse of [`Strategy::id`].
    pub fn from_id(id: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The delay before retry number `attempt + 1`, after `attempt + 1` failed calls
    /// (`attempt` counts from 0). `previous` is the delay slept last time (0 before the
    /// first sleep); only decorrelated jitter uses it.
    ///
    /// Full jitter is included so the model is complete and testable, but the runner never
    /// calls it: full-jitter runs go through the SDK's loop.
    pub fn delay<R: Rng + ?Sized>(
        self,
        policy: &Policy,
        attempt: u32,
        previous: u64,
        rng: &mut R,
    ) -> u64 {
        let ceiling = exponential_ceiling(policy, attempt);
        match self {
            Strategy::FullJitter => rng.random_range(0..=ceiling),
            Strategy::NoJitter => ceiling,
            Strategy::EqualJitter => ceiling / 2 + rng.random_range(0..=ceiling - ceiling / 2),
            Strategy::DecorrelatedJitter => {
                let base = policy.base_millis.min(policy.cap_millis);
                let high = previous.max(base).saturating_mul(3).max(base);
                rng.random_range(base..=high).min(policy.cap_millis)
            }
        }
    }
}

/// `min(cap, base·2^attempt)` without overflow: the shift is clamped before it can wrap,
/// exactly as DESIGN §4 asks of the SDK. It is also the upper bound of the uniform
/// distribution full jitter draws from, which the histogram overlays.
pub fn exponential_ceiling(policy: &Policy, attempt: u32) -> u64 {
    let shift = attempt.min(62);
    let factor = 1u64 << shift;
    policy
        .base_millis
        .saturating_mul(factor)
        .min(policy.cap_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    fn policy() -> Policy {
        Policy {
            base_millis: 10,
            cap_millis: 500,
            budget_millis: 5_000,
            max_attempts: 20,
        }
    }

    #[test]
    fn ceiling_doubles_then_clamps_without_overflow() {
        let p = policy();
        assert_eq!(exponential_ceiling(&p, 0), 10);
        assert_eq!(exponential_ceiling(&p, 3), 80);
        assert_eq!(exponential_ceiling(&p, 6), 500);
        assert_eq!(exponential_ceiling(&p, 1_000), 500);
        let huge = Policy {
            base_millis: u64::MAX / 2,
            cap_millis: u64::MAX,
            ..p
        };
        assert_eq!(exponential_ceiling(&huge, 40), u64::MAX);
    }

    #[test]
    fn each_strategy_stays_in_its_range() {
        let p = policy();
        let mut rng = StdRng::seed_from_u64(7);
        for attempt in 0..10 {
            let ceiling = exponential_ceiling(&p, attempt);
            for _ in 0..200 {
                let full = Strategy::FullJitter.delay(&p, attempt, 0, &mut rng);
                assert!(full <= ceiling);
                assert_eq!(Strategy::NoJitter.delay(&p, attempt, 0, &mut rng), ceiling);
                let equal = Strategy::EqualJitter.delay(&p, attempt, 0, &mut rng);
                assert!(
                    equal >= ceiling / 2 && equal <= ceiling,
                    "{equal} vs {ceiling}"
                );
                let deco = Strategy::DecorrelatedJitter.delay(&p, attempt, 40, &mut rng);
                assert!((10..=120).contains(&deco), "{deco}");
            }
        }
    }

    #[test]
    fn decorrelated_jitter_respects_the_cap() {
        let p = policy();
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..200 {
            assert!(Strategy::DecorrelatedJitter.delay(&p, 0, 10_000, &mut rng) <= 500);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let p = policy();
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..8)
                .map(|a| Strategy::EqualJitter.delay(&p, a, 0, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn ids_round_trip() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::from_id(s.id()), Some(s));
        }
        assert_eq!(Strategy::from_id("bogus"), None);
    }
}
