//! An SDK client over a transport of the caller's choice (a [`crate::counting::Counting`]
//! one, typically) on the current tokio runtime. `LockClient::native` builds its own HTTP
//! transport; the experiments need to see the calls, so they bring theirs.

use std::sync::Arc;

use lock_wasm::native::{OsRngSource, TokioClock, TokioSpawner};
use lock_wasm::{LockClient, Transport};

/// A client over `transport` with the SDK's native seams: tokio clock and spawner,
/// OS-seeded RNG.
pub fn client_over(transport: Arc<dyn Transport>) -> LockClient {
    LockClient::new(
        transport,
        Arc::new(TokioClock::new()),
        Arc::new(TokioSpawner),
        Arc::new(OsRngSource),
    )
}
