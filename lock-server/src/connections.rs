//! Accepting and serving connections (plain HTTP, or TLS with ALPN `h2` / `http/1.1`), with
//! the limits `axum::serve` cannot set, on both HTTP versions.
//!
//! Why not `axum::serve`: it builds hyper's connection builder without a timer, and hyper only
//! enforces its header read timeout when it has one, so a slow-loris client (a request head
//! trickled a byte at a time, or never finished) would hold a connection and its buffer for
//! ever. And that timeout covers HTTP/1 only; the HTTP/2 guards are ours:
//!
//! - **Idle bound** (both versions): a connection with no request in flight for
//!   `header_read_timeout` is shut down gracefully, and dropped if it has still had none
//!   for the bound after that (a peer that ignores the HTTP/2 GOAWAY). The first window
//!   starts at accept, so the TLS handshake and the first request share it: a client that
//!   completes TLS (or the HTTP/2 preface) and then sends nothing, or never finishes a
//!   header block, is closed. On HTTP/1 hyper's header read timeout also closes a head
//!   trickled within a request.
//! - **Keep-alive pings** (HTTP/2): a ping every `http2_keepalive`; no answer within the same
//!   time closes the connection, so a dead peer cannot hold its streams.
//! - **Streams** (HTTP/2): at most `http2_max_streams` concurrent streams per connection;
//!   more are refused with `REFUSED_STREAM`.
//! - **Head size**: 64 KiB per request head on HTTP/1 (431) and per header list on HTTP/2
//!   (431 and the stream reset).
//! - **Event streams** (L8 SSE, both versions): each request carries the connection's
//!   [`ConnectionStreams`]; a stream holds a [`StreamSlot`] while it is open, which caps the
//!   streams per connection and counts the stream as a request in flight until its body
//!   ends (the handler returned long before), so neither the idle bound nor a graceful
//!   shutdown's drop cuts a live stream: it ends when the server's shutdown flag ends it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::config::{
    Config, DEFAULT_HEADER_READ_TIMEOUT_MS, DEFAULT_HTTP2_KEEPALIVE_MS, DEFAULT_HTTP2_MAX_STREAMS,
    DEFAULT_STREAMS_PER_CONNECTION,
};

/// Largest request head (HTTP/1) or header list (HTTP/2) per request; hyper's defaults are
/// ~400 KB and 16 KiB. Bigger are refused with 431; a well-formed request to this API has a
/// head under 1 KB.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// How long to back off after `accept` fails (e.g. out of file descriptors), so the loop does
/// not spin while the condition lasts.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The per-connection bounds (C3's Connections rule).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Idle bound, and HTTP/1's whole-request-head bound.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub http2_max_streams: u32,
    /// HTTP/2 keep-alive ping interval, and how long a ping may go unanswered.
    pub http2_keepalive: Duration,
    /// L8 SSE streams open at once per connection.
    pub streams_per_connection: usize,
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
            http2_max_streams: config.http2_max_streams,
            http2_keepalive: Duration::from_millis(config.http2_keepalive_ms),
            streams_per_connection: config.max_streams_per_connection as usize,
        }
    }
}

impl Default for Limits {
    /// The defaults of C5.
    fn default() -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(DEFAULT_HEADER_READ_TIMEOUT_MS),
            http2_max_streams: DEFAULT_HTTP2_MAX_STREAMS,
            http2_keepalive: Duration::from_millis(DEFAULT_HTTP2_KEEPALIVE_MS),
            streams_per_connection: DEFAULT_STREAMS_PER_CONNECTION,
        }
    }
}

/// Serves `app` on `listener` (over TLS when `tls` is set) until `shutdown` completes, then
/// stops accepting and waits for the open connections to finish their in-flight requests.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let builder = Arc::new(builder(&limits));
    // Every connection task holds a receiver: the flag tells it to shut down gracefully, and
    // `closed()` tells the loop when the last one is gone.
    let (stop_tx, stop_rx) = watch::channel(false);
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
        let connection = Connection {
            accepted: Instant::now(),
            builder: builder.clone(),
            app: app.clone(),
            limits,
            stop: stop_rx.clone(),
        };
        tokio::spawn(connection.run(stream, tls.clone()));
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(true);
    stop_tx.closed().await;
}

fn builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_streams)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .keep_alive_interval(limits.http2_keepalive)
        .keep_alive_timeout(limits.http2_keepalive);
    builder
}

/// One accepted connection, until it closes.
struct Connection {
    accepted: Instant,
    builder: Arc<Builder<TokioExecutor>>,
    app: Router,
    limits: Limits,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn run(mut self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        // Responses are single small writes; without NODELAY a client's next request can
        // wait on a delayed ACK.
        let _ = stream.set_nodelay(true);
        let Some(tls) = tls else {
            return self.serve(stream).await;
        };
        let deadline = self.accepted + self.limits.header_read_timeout;
        let handshake = tokio::time::timeout_at(deadline, tls.accept(stream));
        let done = tokio::select! {
            done = handshake => done,
            _ = self.stop.wait_for(|stop| *stop) => return,
        };
        // Failed or slow handshakes are the client's business (scanners, wrong CA, plain
        // HTTP sent to the TLS port): logged at debug only.
        match done {
            Ok(Ok(stream)) => self.serve(stream).await,
            Ok(Err(e)) => tracing::debug!(event = "tls_handshake_failed", error = %e),
            Err(_) => tracing::debug!(event = "tls_handshake_timed_out"),
        }
    }

    /// Serves HTTP on `io` until the peer is done, the idle bound passes or the server shuts
    /// down (the last two gracefully: requests in flight are answered first).
    async fn serve<IO>(mut self, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (in_flight, watch_in_flight) = watch::channel(0usize);
        let in_flight = Arc::new(in_flight);
        let service = Tracked {
            inner: TowerToHyperService::new(self.app),
            in_flight: in_flight.clone(),
            streams: ConnectionStreams {
                open: Arc::new(AtomicUsize::new(0)),
                cap: self.limits.streams_per_connection,
                in_flight,
            },
        };
        let connection = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(io), service);
        let mut connection = std::pin::pin!(connection);
        let bound = self.limits.header_read_timeout;
        let idle = idle_for(watch_in_flight.clone(), bound, self.accepted);
        let result = tokio::select! {
            result = connection.as_mut() => Some(result),
            () = idle => None,
            _ = self.stop.wait_for(|stop| *stop) => None,
        };
        let result = match result {
            Some(result) => result,
            None => {
                connection.as_mut().graceful_shutdown();
                // A peer that takes no part in the close (on HTTP/2 it must acknowledge the
                // GOAWAY's ping) is dropped once it has had no request in flight for the
                // bound again: nothing is lost then.
                tokio::select! {
                    result = connection => result,
                    () = idle_for(watch_in_flight, bound, Instant::now()) => {
                        return tracing::debug!(event = "connection_dropped");
                    }
                }
            }
        };
        // Errors here are per connection (timeouts, resets, malformed heads hyper already
        // answered); they never concern other clients.
        if let Err(e) = result {
            tracing::debug!(event = "connection_closed", error = %e);
        }
    }
}

/// Completes once the connection has had no request in flight for `bound`: the first window
/// runs from `since` (or from the end of the requests in flight then), later ones from the
/// end of the last request in flight.
async fn idle_for(mut in_flight: watch::Receiver<usize>, bound: Duration, since: Instant) {
    let mut deadline = since + bound;
    loop {
        if *in_flight.borrow_and_update() > 0 {
            if in_flight.wait_for(|n| *n == 0).await.is_err() {
                // The service is gone, so is the connection: nothing left to bound.
                return std::future::pending().await;
            }
            deadline = Instant::now() + bound;
        }
        match tokio::time::timeout_at(deadline, in_flight.changed()).await {
            Err(_elapsed) => return,
            Ok(Err(_closed)) => return std::future::pending().await,
            // A request began (and may have ended already): a new window after it.
            Ok(Ok(())) => deadline = Instant::now() + bound,
        }
    }
}

/// The connection's service, counting its requests in flight for [`idle_for`] and handing
/// each request the connection's [`ConnectionStreams`].
struct Tracked<S> {
    inner: S,
    in_flight: Arc<watch::Sender<usize>>,
    streams: ConnectionStreams,
}

/// A connection's L8 event streams, as a request extension: the handler takes a
/// [`StreamSlot`] for a stream it opens.
#[derive(Clone)]
pub struct ConnectionStreams {
    open: Arc<AtomicUsize>,
    cap: usize,
    in_flight: Arc<watch::Sender<usize>>,
}

impl ConnectionStreams {
    /// A slot for one more stream; `None` when the connection has as many as it may.
    pub fn open(&self) -> Option<StreamSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .is_ok();
        taken.then(|| StreamSlot {
            open: self.open.clone(),
            _in_flight: InFlight::enter(self.in_flight.clone()),
        })
    }
}

/// One open event stream of a connection: counted against its cap and as a request in
/// flight until dropped (when the stream's body ends).
pub struct StreamSlot {
    open: Arc<AtomicUsize>,
    _in_flight: InFlight,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> hyper::service::Service<hyper::Request<B>> for Tracked<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn call(&self, mut request: hyper::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.streams.clone());
        let guard = InFlight::enter(self.in_flight.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let _guard = guard;
            response.await
        })
    }
}

/// One request in flight; leaving (answered or dropped) counts it out.
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn enter(counter: Arc<watch::Sender<usize>>) -> InFlight {
        counter.send_modify(|n| *n += 1);
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_fires_after_the_bound_without_requests() {
        let (_tx, rx) = watch::channel(0usize);
        let start = Instant::now();
        idle_for(rx, Duration::from_secs(5), start).await;
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_requests_in_flight_and_restarts_after_them() {
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let start = Instant::now();
        let idle = tokio::spawn(idle_for(rx, Duration::from_secs(5), start));
        tokio::time::sleep(Duration::from_secs(4)).await;
        let request = InFlight::enter(tx.clone());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!idle.is_finished(), "a request in flight keeps it open");
        drop(request);
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(
            !idle.is_finished(),
            "the window restarts when the request ends"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(idle.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_opened_while_busy_starts_when_the_requests_end() {
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let request = InFlight::enter(tx.clone());
        let idle = tokio::spawn(idle_for(rx, Duration::from_secs(5), Instant::now()));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!idle.is_finished(), "busy since the window opened");
        drop(request);
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(!idle.is_finished());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(idle.is_finished());
    }
}
