//! The SDK's runtime in WebAssembly: the core's seams over platform APIs that exist alike in
//! browsers, Node ≥ 20 and Deno, plus (feature `wasm`) the JS API the npm package wraps.
//!
//! Layout:
//! - [`timer`]: `setTimeout` as a future (cleared on drop, unref'd in Node when created as
//!   a background timer), `performance.now()`, `Date.now()`.
//! - `wake`: one JS callback, made once, that wakes the futures of timers and requests by
//!   number (no wasm-bindgen closure per wait).
//! - [`clock`]: [`JsClock`], the `Clock` seam over [`timer`].
//! - [`fetch`]: one HTTP exchange over the global `fetch` with an AbortController timeout,
//!   made by a JS helper (`fetch.js`) in one call; the npm package's Node build swaps in
//!   `fetch-node.cjs`, the same helper over `node:http`/`node:https`.
//! - [`transport`]: [`FetchTransport`], the `Transport` seam (L1–L9) over [`fetch`].
//! - [`trace_context`]: [`trace_context::TraceContexts`], the `traceparent` each request of
//!   a session carries, as the npm package's tracing hands them in per call.
//! - `wire`: the contract's bodies and option values read from / written to JS values by
//!   hand (no serde in the module: its error text links the float formatter).
//! - [`spawn`]: [`LocalSpawner`], the `Spawner` seam over `spawn_local`.
//! - [`rng`]: [`CryptoRngSource`], per-call `SmallRng`s from a master seeded by getrandom (`wasm_js`).
//! - [`abort`]: a JS `AbortSignal` as a future, for cancelling an acquire.
//! - [`events`]: [`JsEvents`], the `EventSink` seam delivering events to a JS listener.
//! - `options` (feature `wasm`): JS option objects → SDK settings, VALIDATION_FAILED naming
//!   the field.
//! - `js_error` (feature `wasm`): `LockError` → a JS `Error` with `code` and `retryable`.
//! - `api` (feature `wasm`): the exported `RawClient`, `RawSession`, `RawHandle`,
//!   `RawLeadership`.
//! - `election` (feature `wasm`): the exported `RawStream` (a watch or an observe, `next()`
//!   at a time, cancelled by an `AbortSignal`); events and leaders as JS objects.
//! - `testkit` (feature `testkit`): `RawKit`, the in-process lock service on a manual clock
//!   behind the npm package's `lock-wasm/testing` entry (a wasm module of its own).
//!
//! Everything is single-threaded (wasm32 has one thread per instance), so shared state is
//! `Rc`/`RefCell`; JS values are `!Send`, which the core's `MaybeSend` seams allow.

pub mod abort;
#[cfg(feature = "wasm")]
pub mod api;
pub mod clock;
#[cfg(feature = "wasm")]
pub mod election;
pub mod events;
pub mod fetch;
#[cfg(feature = "wasm")]
pub mod js_error;
#[cfg(feature = "wasm")]
pub mod options;
pub mod rng;
pub mod spawn;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod timer;
pub mod trace_context;
pub mod transport;
mod wake;
mod wire;

pub use clock::JsClock;
pub use events::JsEvents;
pub use rng::CryptoRngSource;
pub use spawn::LocalSpawner;
pub use transport::FetchTransport;
