//! Client SDK of the fencing-token lock service (contract C2): sessions kept alive by
//! heartbeats, conservative local deadlines, a bounded deadline-driven acquire loop with
//! full-jitter backoff, one caller at a time per key within a session, and explicit nesting.
//!
//! The core is runtime-agnostic: it never reads a clock, sleeps, spawns or draws randomness
//! except through the seams below (`clippy.toml` refuses the direct calls), so the same logic
//! runs natively (tokio + reqwest), in WebAssembly (fetch + JS timers, `src/wasm/`) and in a
//! seeded deterministic simulation.
//!
//! Layout, bottom to top (no module imports one above it; the workspace's
//! `tests/tests/module_graph.rs` checks that the modules form no cycle):
//! - Seams and leaves: [`spawn`] (the `Spawner` seam, the `Send`-or-not future types),
//!   [`signal`] (`Signal`, `Notify`), `spans` (the `tracing` spans `lock.acquire` and
//!   `lock.hold`, feature `native`; nothing without it), [`clock`] (the `Clock` seam,
//!   `BackgroundClock`, the heartbeat task's view of a clock), [`transport`] (the
//!   `Transport` seam: one `send` of a `Request` L1–L7, the typed calls over it, what HTTP
//!   does with each call and the status mapping both HTTP transports share, timed calls),
//!   [`error`] (`TransportError`, `LockError` and the mapping between them), [`backoff`]
//!   (full-jitter delays, the `RngSource` seam), [`policy`] (`AcquirePolicy`, validated at
//!   construction).
//! - Rules and records: [`renewal`] (the safety margin, when a renewal is due, the shortest
//!   lock TTL heartbeats keep alive), [`config`] (`ClientConfig`, its defaults, the TTL
//!   check), [`handle`] (`LockHandle`: key, token, deadline, lost report; `LostReason`),
//!   [`events`] (the `EventSink` seam, `ClientEvent`, the session-lost counter),
//!   `turns` (per session and key, one caller at a time, the others waiting in arrival
//!   order), `held_view` (what the server lists at the last applied L2 answer and its
//!   version, the next L2's `since`).
//! - A session: `parts` (the seams and settings a client's sessions share), `session_state`
//!   (one session's shared state and its transitions; the acquire loop reaches it through
//!   two doors only), `heartbeat` (the background task: heartbeat loop, deadline watchdog,
//!   orphan release), [`acquire`] (the bounded loop), [`session`] (`LockClient`,
//!   `LockClientSession`: the public API on top), [`semaphore`] (`Semaphore`: N permits on a
//!   key as shared holds, taken on a session or on the client's own), [`watch`] (a key's L8
//!   events as a stream: long polls, resume after failures), [`election`] (`campaign` →
//!   `Leadership`, `leader`, `observe`: an election as a queued exclusive hold with a value).
//! - Injected faults: [`fault`] (`FaultSwitch`: one contender's pause, partition or crash,
//!   acting through the clock and the transport it hands that contender's client; the
//!   dashboard's fault lab runs it live and in `sim::lab`).
//! - Runtimes: `native` (feature `native`, non-wasm targets: tokio clock and spawner, reqwest
//!   transport, OS-seeded RNG) and [`wasm`] (wasm32 only: fetch transport, JS-timer clock,
//!   `spawn_local`, crypto RNG and, feature `wasm`, the JS API the npm package wraps).
//! - The seeded simulation (feature `sim`, which the dashboard's in-page sweeps use; never in
//!   the npm package or a native build): `sim` (deterministic executor, simulated lock
//!   service with its wait queue, injectable faults; the run's record, scenario, invariants,
//!   simulated client processes and seed runners, a file each) and `clock::ManualClock`.
//! - Test helpers (feature `test-util`, never in a shipped build): the simulation plus
//!   `transport::ScriptedTransport` and `test_support::Fixture`.

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
pub mod config;
pub mod election;
pub mod error;
pub mod events;
pub mod fault;
pub mod handle;
pub(crate) mod heartbeat;
pub(crate) mod held_view;
pub(crate) mod parts;
pub mod policy;
pub mod renewal;
pub mod semaphore;
pub mod session;
pub(crate) mod session_state;
pub mod signal;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub(crate) mod spans;
pub mod spawn;
pub(crate) mod turns;
// Native only: the fixture runs on the multi-threaded simulated executor (Send futures).
#[cfg(all(any(test, feature = "test-util"), not(target_arch = "wasm32")))]
pub mod test_support;
pub mod transport;
#[cfg(target_arch = "wasm32")]
pub mod wasm;
pub mod watch;

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod native;

pub use backoff::{Backoff, RngSource, SeededRngSource};
pub use clock::Clock;
#[cfg(any(test, feature = "sim"))]
pub use clock::ManualClock;
pub use config::ClientConfig;
pub use election::{CampaignOptions, Leader, Leadership};
pub use error::{LockError, TransportError};
pub use events::{ClientEvent, EventSink, NoEvents};
pub use fault::{Fault, FaultKind, FaultSpan, FaultSwitch};
pub use handle::{LockHandle, LostReason};
/// L8's events (`lock-api`'s own types).
pub use lock_api::{EventKind, WatchEvent};
/// The hold an acquire asks for and the mode a grant has (`lock-api`'s own types).
pub use lock_api::{HoldKind, LockMode};
pub use policy::{AcquirePolicy, PolicySettings};
pub use semaphore::Semaphore;
pub use session::{LockClient, LockClientSession};
pub use spawn::{BoxFuture, MaybeSend, MaybeSync, Spawner};
#[cfg(any(test, feature = "test-util"))]
pub use transport::ScriptedTransport;
pub use transport::{SessionRef, Transport, TransportExt};
