//! lock-server: the HTTP lock service (contract C3, `docs/contracts/C3-http-surfaces.md`).
//!
//! Layout (one concept per module):
//! - [`config`]: CLI flags and environment variables (C5).
//! - [`server`]: open the store, bind, serve, graceful shutdown.
//! - [`connections`]: the accept loop; header read timeout (slow-loris guard), head size cap.
//! - [`routes`]: the route table and router; `sessions`, `locks`, `admin`, `ledger`, `ops`.
//! - [`extract`]: body and path extractors whose rejections are contract errors.
//! - [`error`]: [`error::ApiError`], store and validation failures → JSON error bodies.
//! - [`state`]: what handlers share.
//! - [`contention`]: server-side waiters per key (`waiterCount`, CONTENTION_EXCEEDED).
//! - [`metrics`]: `/metrics` (C4).
//! - [`openapi`]: the `/openapi.json` document.
//! - [`store`]: the [`store::Store`] trait and backends (`sqlite`, `etcd`).
//! - [`fencing`]: token allocation with durable reserved blocks (never a repeated token).
//! - [`recovery`]: start-up classification (clean marker, boot id, grant hold-back).
//! - [`lease`]: wall-clock lease time.
//! - [`session_id`]: 128-bit random session ids.

pub mod config;
pub mod connections;
pub mod contention;
pub mod error;
pub mod extract;
pub mod fencing;
pub mod lease;
pub mod metrics;
pub mod openapi;
pub mod recovery;
pub mod routes;
pub mod server;
pub mod session_id;
pub mod state;
pub mod store;
