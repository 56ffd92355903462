//! The backoff strategies the experiments compare (Marc Brooker, "Exponential Backoff And
//! Jitter", AWS Architecture Blog, 2015), and the delays of one acquire under each.
//!
//! Full jitter is the SDK's one production strategy, and here it is the SDK's own
//! [`lock_wasm::Backoff`], called, never copied. The other three exist in this crate alone,
//! so the experiments can show why the SDK forbids them: each keeps a synchronised
//! component, so contenders that collided once collide again.

use std::time::Duration;

use lock_wasm::Backoff;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A retry-delay strategy. Every one grows the same window, the SDK's
/// `min(cap, base·2^attempt)` ([`Backoff::ceiling_millis`]), and differs in what it draws
/// from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strategy {
    /// `uniform[0, window]`: the SDK's strategy, drawn by the SDK's [`Backoff::delay`].
    FullJitter,
    /// `window`: plain exponential backoff, no randomness.
    NoJitter,
    /// `window/2 + uniform[0, window/2]`.
    EqualJitter,
    /// `min(cap, uniform[base, 3·previous])`, AWS's "decorrelated jitter".
    DecorrelatedJitter,
}

impl Strategy {
    /// Every strategy, full jitter first (the order of forms, legends and sweeps).
    pub const ALL: [Strategy; 4] = [
        Strategy::FullJitter,
        Strategy::NoJitter,
        Strategy::EqualJitter,
        Strategy::DecorrelatedJitter,
    ];

    /// Human label for forms, tables and legends.
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

    /// The style class charts draw the strategy with (coloured by the dashboard's
    /// `www/style.css` and by the style sheet of the bench's figures).
    pub fn class(self) -> &'static str {
        match self {
            Strategy::FullJitter => "s-full",
            Strategy::NoJitter => "s-none",
            Strategy::EqualJitter => "s-equal",
            Strategy::DecorrelatedJitter => "s-deco",
        }
    }
}

/// The delays of one acquire under one strategy: the SDK's window plus, for decorrelated
/// jitter, the delay drawn last. Delays are whole milliseconds, as the SDK sleeps them.
#[derive(Debug, Clone)]
pub struct Delays {
    strategy: Strategy,
    window: Backoff,
    base_millis: u64,
    cap_millis: u64,
    previous_millis: u64,
}

impl Delays {
    /// Fresh delays for one acquire with the SDK's `base` and `cap` (a base above the cap is
    /// clamped to it).
    pub fn new(strategy: Strategy, base: Duration, cap: Duration) -> Self {
        Delays {
            strategy,
            window: Backoff::new(base, cap),
            base_millis: whole_millis(base),
            cap_millis: whole_millis(cap),
            previous_millis: 0,
        }
    }

    /// The window for `attempt`: the SDK's `min(cap, base·2^attempt)`, the upper bound full
    /// jitter draws under (the dashboard's histogram overlays it).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        Duration::from_millis(self.window.ceiling_millis(attempt))
    }

    /// The delay before the next call after failed call `attempt`, counted from 0 as the
    /// SDK's loop counts: the first retry draws from the base window.
    pub fn next<R: Rng + ?Sized>(&mut self, attempt: u32, rng: &mut R) -> Duration {
        let window = self.window.ceiling_millis(attempt);
        let millis = match self.strategy {
            Strategy::FullJitter => whole_millis(self.window.delay(attempt, rng)),
            Strategy::NoJitter => window,
            Strategy::EqualJitter => window / 2 + rng.random_range(0..=window - window / 2),
            Strategy::DecorrelatedJitter => {
                let base = self.base_millis.min(self.cap_millis);
                let high = self.previous_millis.max(base).saturating_mul(3);
                rng.random_range(base..=high).min(self.cap_millis)
            }
        };
        self.previous_millis = millis;
        Duration::from_millis(millis)
    }
}

/// Saturating conversion to whole milliseconds.
pub(crate) fn whole_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const BASE: Duration = Duration::from_millis(10);
    const CAP: Duration = Duration::from_millis(500);

    fn draws(strategy: Strategy, attempt: u32) -> Vec<u64> {
        let mut rng = StdRng::seed_from_u64(1);
        let mut delays = Delays::new(strategy, BASE, CAP);
        (0..5_000)
            .map(|_| whole_millis(delays.next(attempt, &mut rng)))
            .collect()
    }

    #[test]
    fn the_window_is_the_sdks_and_clamps_without_overflow() {
        let d = Delays::new(Strategy::NoJitter, BASE, CAP);
        let ceilings: Vec<u64> = [0, 3, 6, 1_000, u32::MAX]
            .map(|a| whole_millis(d.ceiling(a)))
            .to_vec();
        assert_eq!(ceilings, [10, 80, 500, 500, 500]);
    }

    #[test]
    fn full_jitter_is_the_sdks_own_draw() {
        let sdk = Backoff::new(BASE, CAP);
        let (mut ours, mut theirs) = (StdRng::seed_from_u64(9), StdRng::seed_from_u64(9));
        let mut delays = Delays::new(Strategy::FullJitter, BASE, CAP);
        for attempt in 0..20 {
            assert_eq!(
                delays.next(attempt, &mut ours),
                sdk.delay(attempt, &mut theirs)
            );
        }
    }

    #[test]
    fn full_jitter_covers_the_whole_window() {
        let d = draws(Strategy::FullJitter, 3);
        assert!(d.iter().all(|&x| x <= 80));
        assert!(d.iter().any(|&x| x < 2) && d.iter().any(|&x| x > 78));
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        assert!((mean - 40.0).abs() < 2.0, "mean {mean}");
    }

    #[test]
    fn no_jitter_sleeps_the_window() {
        assert!(draws(Strategy::NoJitter, 3).iter().all(|&d| d == 80));
    }

    #[test]
    fn equal_jitter_stays_in_the_upper_half() {
        let d = draws(Strategy::EqualJitter, 3);
        assert!(d.iter().all(|&x| (40..=80).contains(&x)));
        assert!(d.iter().any(|&x| x < 42) && d.iter().any(|&x| x > 78));
    }

    #[test]
    fn decorrelated_jitter_grows_from_base_and_respects_the_cap() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut delays = Delays::new(Strategy::DecorrelatedJitter, BASE, CAP);
        let first = whole_millis(delays.next(0, &mut rng));
        assert!((10..=30).contains(&first), "first {first}");
        let later: Vec<u64> = (0..200)
            .map(|_| whole_millis(delays.next(0, &mut rng)))
            .collect();
        assert!(later.iter().all(|&x| (10..=500).contains(&x)));
        assert!(later.iter().any(|&x| x > 250), "never grew");
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let run = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut delays = Delays::new(Strategy::EqualJitter, BASE, CAP);
            (0..8).map(|a| delays.next(a, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn ids_round_trip_and_names_are_distinct() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::from_id(s.id()), Some(s));
        }
        assert_eq!(Strategy::from_id("bogus"), None);
        let labels: std::collections::BTreeSet<_> = Strategy::ALL.map(Strategy::label).into();
        assert_eq!(labels.len(), 4);
    }
}
