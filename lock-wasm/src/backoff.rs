//! Full-jitter backoff: `delay = uniform[0, min(cap, base · 2^attempt)]`, and the RNG seam.
//!
//! The forbidden alternatives, one line each on why:
//! - fixed delay: every waiter that collided once wakes together and collides again forever;
//! - plain exponential (no jitter): same as fixed, just slower — the herd stays in lockstep;
//! - equal jitter (`c/2 + rand(c/2)`): the fixed `c/2` floor is a synchronised component that
//!   keeps waiters bunched in the upper half of the window.
//!
//! Full jitter spreads waiters over the whole window, which decorrelates them permanently.

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::{SmallRng, StdRng};
use rand::{Rng, SeedableRng};

use crate::spawn::{MaybeSend, MaybeSync};

/// The growth rule of the jitter window; the randomness comes from the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base_millis: u64,
    cap_millis: u64,
}

impl Backoff {
    /// A window starting at `base` and clamped at `cap` (callers validate `base <= cap`;
    /// here a larger base is simply clamped).
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base_millis: millis(base),
            cap_millis: millis(cap),
        }
    }

    /// The window's upper end for `attempt` (0-based): `min(cap, base · 2^attempt)`.
    ///
    /// Clamped *before* multiplying: `base << attempt` overflows `u64` past attempt ~63 (or
    /// sooner for a large base) and would wrap to a tiny or zero window.
    pub fn ceiling_millis(&self, attempt: u32) -> u64 {
        if self.base_millis == 0 {
            return 0;
        }
        // base · 2^attempt ≥ cap  ⇔  base ≥ cap / 2^attempt (checked without multiplying).
        if attempt >= 63 || self.base_millis >= self.cap_millis >> attempt {
            return self.cap_millis;
        }
        (self.base_millis << attempt).min(self.cap_millis)
    }

    /// One delay for `attempt`, uniform over `[0, ceiling]` in whole milliseconds.
    pub fn delay<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> Duration {
        let ceiling = self.ceiling_millis(attempt);
        Duration::from_millis(rng.random_range(0..=ceiling))
    }
}

/// Saturating conversion to whole milliseconds.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The RNG seam: hands each acquire call its own generator.
///
/// Per call, not shared: a generator shared by concurrent acquires would serialise them on
/// its lock and make the sequence each one sees depend on scheduling. Production seeds a fast
/// [`SmallRng`] from the OS per call (`native::OsRngSource`, the wasm layer's own); tests and
/// the simulation use [`SeededRngSource`]. `SmallRng`'s algorithm differs between 64- and
/// 32-bit targets, so a seed reproduces a run on the same target only.
pub trait RngSource: MaybeSend + MaybeSync {
    /// A fresh generator for one acquire call.
    fn rng(&self) -> SmallRng;
}

/// Deterministic per-call generators drawn from one seeded master generator: the n-th call
/// always gets the same generator for the same seed.
pub struct SeededRngSource {
    master: Mutex<StdRng>,
}

impl SeededRngSource {
    /// A source whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRngSource {
            master: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }
}

impl RngSource for SeededRngSource {
    fn rng(&self) -> SmallRng {
        let mut master = self.master.lock().unwrap();
        SmallRng::from_rng(&mut *master)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 2_000;

    fn default_backoff() -> Backoff {
        Backoff::new(Duration::from_millis(50), Duration::from_millis(CAP))
    }

    #[test]
    fn ceiling_doubles_then_clamps_without_overflow() {
        let b = default_backoff();
        assert_eq!(b.ceiling_millis(0), 50);
        assert_eq!(b.ceiling_millis(1), 100);
        assert_eq!(b.ceiling_millis(5), 1_600);
        assert_eq!(b.ceiling_millis(6), CAP);
        for attempt in [62, 63, 64, 100, u32::MAX] {
            assert_eq!(b.ceiling_millis(attempt), CAP, "attempt {attempt}");
        }
        let huge = Backoff::new(Duration::from_millis(u64::MAX / 2), Duration::MAX);
        assert_eq!(huge.ceiling_millis(3), u64::MAX);
    }

    /// C2 ct2-pinned, *Uniform jitter*: ≥ 10,000 delays at attempt 5 spread uniformly over
    /// that attempt's window — with the defaults (window 1.6 s) and with a base whose window
    /// is clamped at the cap.
    #[test]
    fn delays_at_attempt_five_are_uniform_over_the_window() {
        for base in [50, 100] {
            let b = Backoff::new(Duration::from_millis(base), Duration::from_millis(CAP));
            let window = b.ceiling_millis(5);
            assert_eq!(window, (base * 32).min(CAP));
            let mut rng = StdRng::seed_from_u64(7);
            let draws: Vec<u64> = (0..20_000).map(|_| millis(b.delay(5, &mut rng))).collect();
            let min = *draws.iter().min().unwrap();
            let max = *draws.iter().max().unwrap();
            let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
            println!(
                "base {base} ms, attempt 5, window {window} ms, n {}: min {min} mean {mean:.1} max {max}",
                draws.len()
            );
            assert!(min < window * 5 / 100, "min {min}");
            assert!(max > window * 95 / 100, "max {max}");
            assert!(max <= window, "max {max}");
            let half = window as f64 / 2.0;
            assert!((mean - half).abs() < half * 0.10, "mean {mean}");
        }
    }

    /// C2 ct2-pinned, *Seeded jitter*: a fixed seed gives a byte-identical sequence.
    #[test]
    fn a_seed_reproduces_the_sequence_byte_for_byte() {
        let run = || {
            let source = SeededRngSource::new(42);
            let b = default_backoff();
            let mut bytes = Vec::new();
            for _ in 0..3 {
                let mut rng = source.rng();
                for attempt in 0..12 {
                    bytes.extend_from_slice(&millis(b.delay(attempt, &mut rng)).to_le_bytes());
                }
            }
            bytes
        };
        let first = run();
        assert_eq!(first, run());
        assert_ne!(first, vec![0; first.len()], "delays must not all be zero");
    }
}
