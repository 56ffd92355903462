//! [`CryptoRngSource`]: the production [`RngSource`] in wasm.

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::backoff::RngSource;

/// Seeds a fast [`SmallRng`] per acquire call from `crypto.getRandomValues` (getrandom's
/// `wasm_js` backend), so no two clients (tabs, processes) share a jitter sequence.
#[derive(Debug, Clone, Copy, Default)]
pub struct CryptoRngSource;

impl RngSource for CryptoRngSource {
    // The seam's implementation: the one place in wasm that draws from the platform.
    #[allow(clippy::disallowed_methods)]
    fn rng(&self) -> SmallRng {
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
