//! Running background work (the heartbeat task) without naming a runtime, and the
//! `Send`-or-not future types every seam shares.
//!
//! Natively the heartbeat runs on tokio's multi-threaded runtime, so futures must be `Send`;
//! in wasm they hold JS values, which are `!Send`. Rather than two copies of every trait, the
//! seams use [`MaybeSend`]/[`MaybeSync`] (`Send`/`Sync` natively, nothing on wasm32) and
//! [`BoxFuture`] (a boxed future that is `Send` natively only). Async trait methods use
//! `async_trait` with the same switch:
//!
//! ```
//! use std::time::Duration;
//!
//! use lock_wasm::transport::{Answer, Reply, Request, Transport};
//! use lock_wasm::TransportError;
//!
//! /// A transport with no server behind it (a sketch): closing and releasing succeed, every
//! /// other call fails as a refused connection does.
//! struct Offline;
//!
//! #[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
//! #[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
//! impl Transport for Offline {
//!     async fn send(&self, request: Request<'_>, _timeout: Duration) -> Answer {
//!         match request {
//!             Request::CloseSession(_) | Request::Release(..) => Ok(Reply::Done),
//!             _ => Err(TransportError::Network("offline".to_owned())),
//!         }
//!     }
//! }
//! ```

use std::future::Future;
use std::pin::Pin;

/// `Send` on native targets, no bound on wasm32 (JS values are `!Send`).
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSend: Send {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + ?Sized> MaybeSend for T {}

/// `Send` on native targets, no bound on wasm32 (JS values are `!Send`).
#[cfg(target_arch = "wasm32")]
pub trait MaybeSend {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSend for T {}

/// `Sync` on native targets, no bound on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSync: Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Sync + ?Sized> MaybeSync for T {}

/// `Sync` on native targets, no bound on wasm32.
#[cfg(target_arch = "wasm32")]
pub trait MaybeSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSync for T {}

/// A boxed future: `Send` natively, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed future: `Send` natively, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Starts a detached background task (the session's heartbeat loop). Implementations:
/// tokio's `spawn` ([`crate::native::TokioSpawner`]), `wasm_bindgen_futures::spawn_local`
/// in wasm, and the deterministic executor of [`crate::sim`].
///
/// The task ends on its own when its session is closed or lost; the spawner never needs to
/// cancel it, so no join handle is returned.
pub trait Spawner: MaybeSend + MaybeSync {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);
}
