//! Client SDK of the fencing-token lock service (contract C2): sessions kept alive by
//! heartbeats, conservative local deadlines, a bounded deadline-driven acquire loop with
//! full-jitter backoff, and per-session reentrancy.
//!
//! The core is runtime-agnostic: it never reads a clock, sleeps, spawns or draws randomness
//! except through the seams below, so the same logic runs natively (tokio + reqwest), in
//! WebAssembly (fetch + JS timers, `src/wasm/`) and in a seeded deterministic simulation.
//!
//! Layout:
//! - [`spawn`]: the `Spawner` seam for the heartbeat task and the `Send`-or-not future types.
//! - [`clock`]: the `Clock` seam (monotonic now + async sleep), the simulated `ManualClock`,
//!   and `BackgroundClock`, the heartbeat task's view of a clock.
//! - [`transport`]: the `Transport` seam (L1–L7), the status mapping HTTP transports share,
//!   and the `ScriptedTransport` for unit tests.
//! - [`error`]: `TransportError`, `LockError` and the DESIGN §3 mapping between them.
//! - [`backoff`]: full-jitter delays and the `RngSource` seam.
//! - [`policy`]: `AcquirePolicy`, immutable and validated at construction.
//! - [`events`]: the `EventSink` seam (grant, contention, lost) and the session-lost counter.
//! - [`handle`]: `LockHandle` (key, fencing token, conservative deadline, lost report) and
//!   `LostReason`.
//! - `reentrancy` (private): per-session key → handle + hold depth, and the in-flight guard.
//! - [`schedule`]: the renewal rule (when the next heartbeat is due, the shortest lock TTL
//!   heartbeats keep alive).
//! - [`session`]: `LockClient`, `LockClientSession`, heartbeat loop, deadline watchdog,
//!   release.
//! - [`acquire`]: the bounded acquire loop.
//! - [`sim`]: deterministic executor, simulated lock service and injectable infrastructure
//!   faults for the seeded simulation.
//! - `native` (feature `native`, non-wasm targets): tokio clock/spawner, reqwest transport,
//!   OS-seeded RNG.
//! - [`wasm`] (wasm32 only): fetch transport, JS-timer clock, `spawn_local`, crypto RNG, and
//!   (feature `wasm`) the JS API that the npm package (`lock-wasm/npm/`) wraps.

// `TransportError` carries the wire error body by value so every transport (reqwest, fetch,
// scripted, simulated) builds it directly; ~200 bytes on a path that just waited on the
// network is immaterial, and boxing would complicate the seam for no gain.
#![allow(clippy::result_large_err)]
// On wasm32 the seams are deliberately `!Send` (they hold JS values), so the `Arc`s that
// share them are too; one code path with `Arc` for both targets beats an `Rc` fork.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod acquire;
pub mod backoff;
pub mod clock;
pub mod error;
pub mod events;
pub mod handle;
pub mod policy;
pub(crate) mod reentrancy;
pub mod schedule;
pub mod session;
pub mod sim;
pub mod spawn;
// Native only: the fixture runs on the multi-threaded simulated executor (Send futures).
#[cfg(all(test, not(target_arch = "wasm32")))]
mod test_support;
pub mod transport;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod native;

pub use backoff::{Backoff, RngSource, SeededRngSource};
pub use clock::{Clock, ManualClock};
pub use error::{LockError, TransportError};
pub use events::{ClientEvent, EventSink, NoEvents};
pub use handle::{LockHandle, LostReason};
pub use policy::{AcquirePolicy, PolicySettings};
pub use session::{ClientConfig, LockClient, LockClientSession};
pub use spawn::{BoxFuture, MaybeSend, MaybeSync, Spawner};
pub use transport::{ScriptedTransport, Transport};
