//! Running the server: pick and open the configured store, bind, print the `listening` line,
//! serve until SIGTERM/SIGINT, then close the store (which writes the clean-shutdown marker).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::{self, Auth, AuthFileError};
use crate::config::{Backend, Config};
use crate::connections;
use crate::metrics::Metrics;
use crate::readiness::{self, Readiness};
use crate::routes;
use crate::state::AppState;
use crate::store::{sqlite, Store, StoreError};
use crate::tls::{self, TlsError};

/// Fatal start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    ProtectedMode(String),
    #[error("{0}")]
    AuthFile(#[from] AuthFileError),
    #[error("cannot open store: {0}")]
    Store(#[from] OpenError),
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// Why the configured store could not be opened (fatal at start-up).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Unsupported(String),
    /// etcd's TLS, auth or permissions refuse this replica, or no member answers.
    #[cfg(feature = "etcd")]
    #[error("{0}")]
    EtcdAccess(#[from] crate::store::etcd::AccessError),
}

/// Builds the configured backend. Routes only ever see the `Arc<dyn Store>`.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, OpenError> {
    match config.backend {
        Backend::Sqlite => {
            let options = sqlite::SqliteOptions {
                data_dir: config.data_dir.clone(),
                boot_id_path: config.boot_id_path.clone(),
                unclean_holdback_millis: config.unclean_holdback_ms,
                feed_limits: config.feed_limits(),
            };
            let store = sqlite::SqliteStore::open(&options)?;
            let start = store.start_state();
            tracing::info!(
                event = "store_opened",
                backend = "sqlite",
                clean = start.clean,
                fresh = start.fresh,
                rebooted = start.rebooted,
                holdback_until_millis = start.holdback_until_millis,
            );
            Ok(store)
        }
        #[cfg(feature = "etcd")]
        Backend::Etcd => {
            use crate::store::etcd::{EtcdOptions, EtcdStore};
            let options = EtcdOptions {
                endpoints: config.etcd_endpoints.clone(),
                prefix: config.etcd_prefix.clone(),
                timeout: Duration::from_millis(config.etcd_timeout_ms),
                feed_limits: config.feed_limits(),
                credentials: config.etcd_access.credentials(),
            };
            let store = EtcdStore::connect(options).await?;
            // Misconfigured TLS, auth or roles would otherwise start a replica that fails
            // every request: prove the prefix can be read and written first.
            let access = store.check_access().await?;
            if access.never_compacted {
                tracing::warn!(
                    event = "etcd_compaction_off",
                    revision = access.revision,
                    "etcd keeps every revision since the first: set \
                     --auto-compaction-mode/--auto-compaction-retention (docs/etcd.md, Upkeep)",
                );
            }
            tracing::info!(
                event = "store_opened",
                backend = "etcd",
                endpoints = ?config.etcd_endpoints,
                prefix = %config.etcd_prefix,
            );
            Ok(Arc::new(store))
        }
        #[cfg(not(feature = "etcd"))]
        Backend::Etcd => Err(OpenError::Unsupported(
            "etcd backend not available in this build".into(),
        )),
    }
}

/// Builds the shared state around an opened store; reads the auth file, if any.
pub fn app_state(
    config: &Config,
    store: Arc<dyn Store>,
    shutdown: watch::Receiver<bool>,
) -> Result<AppState, AuthFileError> {
    Ok(state_with(
        config,
        store,
        shutdown,
        Arc::new(load_auth(config)?),
    ))
}

/// The credentials the configuration names.
fn load_auth(config: &Config) -> Result<Auth, AuthFileError> {
    Auth::load(
        config.auth_file.clone(),
        config.admin_token.as_deref(),
        config.public_ops,
    )
}

fn state_with(
    config: &Config,
    store: Arc<dyn Store>,
    shutdown: watch::Receiver<bool>,
    auth: Arc<Auth>,
) -> AppState {
    let metrics = Arc::new(Metrics::default());
    AppState {
        store,
        max_waiters_per_key: config.max_waiters_per_key,
        queue_grace_ms: config.queue_grace_ms,
        readiness: Arc::new(Readiness::new(metrics.clone())),
        metrics,
        default_lock_ttl_ms: config.default_lock_ttl_ms,
        default_session_ttl_ms: config.default_session_ttl_ms,
        auth,
        shutdown,
    }
}

/// Runs until a shutdown signal; returns after the store is closed.
pub async fn run(config: Config) -> Result<(), ServeError> {
    auth::check_protected_mode(
        config.listen,
        config.auth_file.is_some(),
        config.allow_unauthenticated,
    )
    .map_err(ServeError::ProtectedMode)?;
    // Read before the store opens, so a broken file fails the start before anything else.
    let auth = Arc::new(load_auth(&config)?);
    let tls = tls_acceptor(&config)?;
    let store = open_store(&config).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let state = state_with(&config, store.clone(), stop_rx.clone(), auth.clone());
    tokio::spawn(auth::reload_on_hangup(auth, state.metrics.clone()));
    readiness::spawn_probe(store.clone(), state.readiness.clone(), stop_rx);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let app = routes::router(state, &config);
    // The one line tools wait for.
    let scheme = if tls.is_some() { "https" } else { "http" };
    print_line(
        serde_json::json!({ "event": "listening", "addr": addr.to_string(), "scheme": scheme }),
    );
    let limits = connections::Limits::from(&config);
    connections::serve(listener, tls, app, limits, async move {
        shutdown_signal().await;
        tracing::info!(event = "shutting_down");
        let _ = stop_tx.send(true);
    })
    .await;
    match store.close().await {
        Ok(()) => tracing::info!(event = "stopped", clean = true),
        Err(e) => tracing::error!(event = "stopped", clean = false, error = %e),
    }
    Ok(())
}

/// The configured TLS acceptor, if any; for `--tls-self-signed` the certificate is made (or
/// found) in the data dir first and announced.
fn tls_acceptor(config: &Config) -> Result<Option<tokio_rustls::TlsAcceptor>, TlsError> {
    if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
        return tls::acceptor(cert, key).map(Some);
    }
    if !config.tls_self_signed {
        return Ok(None);
    }
    let own = tls::self_signed(&config.data_dir, config.listen)?;
    print_line(serde_json::json!({
        "event": "tls_self_signed",
        "cert": own.cert.display().to_string(),
        "sha256": own.sha256,
        "created": own.created,
    }));
    tls::acceptor(&own.cert, &own.key).map(Some)
}

/// A JSON line printed directly to stdout, so it is there whatever the log filter.
fn print_line(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
