//! Accepting and serving HTTP connections, with the limits `axum::serve` cannot set.
//!
//! Why not `axum::serve`: it builds hyper's connection builder without a timer, and hyper
//! only enforces its header read timeout when it has one, so a slow-loris client (a request
//! head trickled a byte at a time, or never finished) would hold a connection and its buffer
//! forever. Here every HTTP/1 connection must deliver a complete request head within
//! `header_read_timeout` of starting to wait for one (that includes an idle keep-alive
//! connection waiting for its next request), or it is closed.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Largest buffered request head per connection (hyper's default is ~400 KB). Bigger heads are
/// refused with 431; a well-formed request to this API has a head under 1 KB.
const MAX_READ_BUFFER_BYTES: usize = 64 * 1024;

/// How long to back off after `accept` fails (e.g. out of file descriptors), so the loop does
/// not spin while the condition lasts.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting and waits for
/// the open connections to finish their in-flight requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(MAX_READ_BUFFER_BYTES);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    tracing::warn!(event = "accept_failed", error = %e);
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Responses are single small writes; without NODELAY a client's next request can
        // wait on a delayed ACK.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Errors here are per connection (timeouts, resets, malformed heads hyper already
            // answered); they never concern other clients.
            if let Err(e) = connection.await {
                tracing::debug!(event = "connection_closed", error = %e);
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
