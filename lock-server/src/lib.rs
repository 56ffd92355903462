//! lock-server: the HTTP lock service (contract C3, `docs/contracts/C3-http-surfaces.md`).
//!
//! Layout (one concept per module):
//! - [`config`]: CLI flags and environment variables (C5), the `hash-token` subcommand.
//! - [`auth`]: clients, bearer tokens, key scopes, protected mode; the guard on every route.
//! - [`server`]: pick and open the configured store, bind, serve, graceful shutdown.
//! - [`connections`]: the accept loop (plain or TLS); the slow-loris guards of HTTP/1 and
//!   HTTP/2 (idle bound from accept, header read timeout, keep-alive pings, stream and
//!   head size caps); the per-connection cap on L8 event streams.
//! - [`tls`]: the rustls configuration (ring, ALPN `h2`/`http/1.1`), the self-signed
//!   certificate of `--tls-self-signed`.
//! - [`routes`]: the route table and router; `sessions`, `locks`, `watch` (L8 events, L9
//!   values), `admin`, `ledger`, `unfenced_ledger`, `ops`; `openapi`, the `/openapi.json`
//!   document.
//! - [`extract`]: body and path extractors whose rejections are contract errors.
//! - [`error`]: [`error::ApiError`], store and validation failures → JSON error bodies.
//! - [`state`]: what handlers share.
//! - [`metrics`]: `/metrics` (C4).
//! - [`readiness`]: whether the store accepts writes (`/readyz`): the write probe, the
//!   requests' store failures, the transition log lines.
//! - [`logging`]: the log's bounded, non-blocking sink; lines it had to drop are counted.
//! - [`trace_context`]: a request's W3C `traceparent` → the `traceId` of its log lines.
//! - [`store`]: the [`store::Store`] trait, what every backend shares (session ids and
//!   heartbeat cadence, wall-clock lease time, the wait queue's rules, waking waiters, the
//!   per-key event feeds of L8) and
//!   the backends, each in its
//!   folder: `store/sqlite/` (writer thread, fencing-token reservation, start-up recovery,
//!   ...) and `store/etcd/`.

pub mod auth;
pub mod config;
pub mod connections;
pub mod error;
pub mod extract;
pub mod logging;
pub mod metrics;
pub mod readiness;
pub mod routes;
pub mod server;
pub mod state;
pub mod store;
pub mod tls;
pub mod trace_context;
