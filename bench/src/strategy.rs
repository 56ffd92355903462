//! The backoff strategies Brooker compared ("Exponential Backoff And Jitter", AWS Architecture
//! Blog, 2015), as pure functions of the attempt, the previous delay and a random source.
//!
//! These exist ONLY for the experiments: the SDK's one production strategy is full jitter
//! (`lock-wasm/src/backoff.rs`), and DESIGN §4 forbids the others in the SDK because each
//! leaves a synchronised component. They live here so the benchmark can show why.

use rand::Rng;

/// One backoff strategy. Delays are in (fractional) milliseconds so the simulation can use
/// Brooker's continuous model; the live sweep rounds them to whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// No backoff at all: retry right away (Brooker's "None", a reference point).
    NoBackoff,
    /// Plain exponential, no jitter: `min(cap, base · 2^n)`.
    NoJitter,
    /// Equal jitter: `v/2 + uniform(0, v/2)` with `v = min(cap, base · 2^n)`.
    EqualJitter,
    /// Full jitter: `uniform(0, min(cap, base · 2^n))` — the SDK's strategy.
    FullJitter,
    /// Decorrelated jitter: `min(cap, uniform(base, previous · 3))`, starting at `base`.
    Decorrelated,
}

impl Strategy {
    /// The four strategies of the comparison, in the order the tables list them.
    pub const COMPARED: [Strategy; 4] = [
        Strategy::NoJitter,
        Strategy::EqualJitter,
        Strategy::FullJitter,
        Strategy::Decorrelated,
    ];

    /// A short name for tables and chart legends.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::NoBackoff => "no backoff",
            Strategy::NoJitter => "no jitter (exponential)",
            Strategy::EqualJitter => "equal jitter",
            Strategy::FullJitter => "full jitter",
            Strategy::Decorrelated => "decorrelated jitter",
        }
    }

    /// Chart colour, fixed per strategy so every chart reads the same.
    pub fn colour(self) -> &'static str {
        match self {
            Strategy::NoBackoff => "#7f7f7f",
            Strategy::NoJitter => "#d62728",
            Strategy::EqualJitter => "#ff7f0e",
            Strategy::FullJitter => "#2ca02c",
            Strategy::Decorrelated => "#1f77b4",
        }
    }
}

/// Base and cap of the exponential window, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// First window (Brooker: 5 ms).
    pub base: f64,
    /// Largest window (Brooker: 2 s).
    pub cap: f64,
}

impl Window {
    /// `min(cap, base · 2^n)`. The exponent is clamped first, so a large `n` cannot overflow
    /// to infinity (2^64 · base is far above any cap worth having).
    pub fn expo(&self, n: u32) -> f64 {
        (self.base * 2f64.powi(n.min(64) as i32)).min(self.cap)
    }
}

/// One client's backoff state: the strategy plus the previous delay (decorrelated jitter
/// is the only strategy that needs it).
#[derive(Debug, Clone)]
pub struct Backoff {
    strategy: Strategy,
    window: Window,
    previous: f64,
}

impl Backoff {
    /// Fresh state for one client.
    pub fn new(strategy: Strategy, window: Window) -> Self {
        Backoff {
            strategy,
            window,
            previous: window.base,
        }
    }

    /// The delay before retry number `n` (Brooker counts from 1 for the first retry).
    pub fn delay<R: Rng + ?Sized>(&mut self, n: u32, rng: &mut R) -> f64 {
        let v = self.window.expo(n);
        match self.strategy {
            Strategy::NoBackoff => 0.0,
            Strategy::NoJitter => v,
            Strategy::EqualJitter => v / 2.0 + uniform(rng, 0.0, v / 2.0),
            Strategy::FullJitter => uniform(rng, 0.0, v),
            Strategy::Decorrelated => {
                let next = uniform(rng, self.window.base, self.previous * 3.0).min(self.window.cap);
                self.previous = next;
                next
            }
        }
    }
}

/// `uniform(lo, hi)` like Python's `random.uniform` (either order, inclusive-ish ends).
fn uniform<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const W: Window = Window {
        base: 5.0,
        cap: 2_000.0,
    };

    fn draws(strategy: Strategy, n: u32) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(1);
        let mut b = Backoff::new(strategy, W);
        (0..5_000).map(|_| b.delay(n, &mut rng)).collect()
    }

    #[test]
    fn window_doubles_then_clamps_without_overflow() {
        assert_eq!(W.expo(0), 5.0);
        assert_eq!(W.expo(3), 40.0);
        assert_eq!(W.expo(9), 2_000.0);
        assert_eq!(W.expo(u32::MAX), 2_000.0);
    }

    #[test]
    fn no_jitter_and_no_backoff_are_fixed() {
        assert!(draws(Strategy::NoJitter, 4).iter().all(|&d| d == 80.0));
        assert!(draws(Strategy::NoBackoff, 4).iter().all(|&d| d == 0.0));
    }

    #[test]
    fn equal_jitter_stays_in_the_upper_half() {
        let d = draws(Strategy::EqualJitter, 4);
        assert!(d.iter().all(|&x| (40.0..=80.0).contains(&x)));
        assert!(d.iter().any(|&x| x < 42.0) && d.iter().any(|&x| x > 78.0));
    }

    #[test]
    fn full_jitter_covers_the_whole_window() {
        let d = draws(Strategy::FullJitter, 4);
        assert!(d.iter().all(|&x| (0.0..=80.0).contains(&x)));
        assert!(d.iter().any(|&x| x < 2.0) && d.iter().any(|&x| x > 78.0));
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        assert!((mean - 40.0).abs() < 2.0, "mean {mean}");
    }

    #[test]
    fn decorrelated_grows_from_base_and_respects_the_cap() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut b = Backoff::new(Strategy::Decorrelated, W);
        let first = b.delay(1, &mut rng);
        assert!((5.0..=15.0).contains(&first), "first {first}");
        let later: Vec<f64> = (0..200).map(|_| b.delay(1, &mut rng)).collect();
        assert!(later.iter().all(|&x| (5.0..=2_000.0).contains(&x)));
        assert!(later.iter().any(|&x| x > 500.0), "never grew");
    }
}
