//! [`CryptoRngSource`]: the production [`RngSource`] in wasm.

use std::cell::RefCell;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::backoff::RngSource;

/// Hands each acquire call its own fast [`SmallRng`], drawn from a master generator seeded
/// once from `crypto.getRandomValues` (getrandom's `wasm_js` backend) on first use, so no
/// two clients (tabs, processes) share a jitter sequence and an acquire does not cross into
/// the platform's CSPRNG.
#[derive(Default)]
pub struct CryptoRngSource {
    // wasm32 has one thread: a `RefCell` is enough.
    master: RefCell<Option<SmallRng>>,
}

impl CryptoRngSource {
    // The seam's implementation: the one place in wasm that draws from the platform.
    #[allow(clippy::disallowed_methods)]
    fn seeded() -> SmallRng {
        let mut seed = [0u8; 8];
        // getrandom fails only when the platform has no CSPRNG at all; jitter then still
        // decorrelates through the clock reading, which differs per caller.
        if getrandom::fill(&mut seed).is_err() {
            seed = (super::timer::monotonic_millis() * 1000.0)
                .to_bits()
                .to_le_bytes();
        }
        SmallRng::seed_from_u64(u64::from_le_bytes(seed))
    }
}

impl RngSource for CryptoRngSource {
    fn rng(&self) -> SmallRng {
        let mut master = self.master.borrow_mut();
        SmallRng::from_rng(master.get_or_insert_with(Self::seeded))
    }
}
