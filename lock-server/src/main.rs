//! `lock-server` binary: parse the configuration, set up JSON logs, run (or run a
//! subcommand).

use std::io::{Read, Write};
use std::path::Path;

use clap::Parser;
use lock_server::auth::bearer;
use lock_server::config::{Command, Config, EtcdAccess};
use lock_server::store::sqlite::backup::{self, BackupError};

#[tokio::main]
async fn main() {
    let config = Config::parse();
    match &config.command {
        Some(Command::HashToken) => hash_token(),
        Some(Command::Backup { data_dir, to }) => backup(data_dir, to),
        Some(Command::Restore {
            from,
            data_dir,
            force,
        }) => restore(from, data_dir, *force),
        Some(Command::EtcdRestored {
            etcd_endpoints,
            etcd_prefix,
            etcd_timeout_ms,
            etcd_access,
            min_epoch,
        }) => {
            let options = etcd_options(etcd_endpoints, etcd_prefix, *etcd_timeout_ms, etcd_access);
            etcd_restored(options, *min_epoch).await
        }
        None => {}
    }
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .map_event_format(lock_server::trace_context::WithTraceId)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // Never stdout directly: a full disk or a stalled log collector must not fail or
        // block a request (see `logging`).
        .with_writer(lock_server::logging::Sink::stdout())
        .init();
    let result = lock_server::server::run(config).await;
    if let Err(e) = &result {
        tracing::error!(event = "fatal", error = %e);
        // Not eprintln!: it panics when stderr cannot be written (a full disk).
        let _ = writeln!(std::io::stderr(), "lock-server: {e}");
    }
    lock_server::logging::drain(LAST_LINES_WAIT);
    if result.is_err() {
        std::process::exit(1);
    }
}

/// How long the last log lines may take to be written before the process exits.
const LAST_LINES_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `lock-server hash-token`: the token on stdin (one line; the line end is not part of it)
/// → its SHA-256 in hex on stdout.
fn hash_token() -> ! {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("lock-server hash-token: cannot read stdin: {e}");
        std::process::exit(1);
    }
    let token = input.strip_suffix('\n').unwrap_or(&input);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if let Err(rule) = lock_api::limits::validate_token(token) {
        eprintln!("lock-server hash-token: the token (one line on stdin) {rule}");
        std::process::exit(1);
    }
    println!("{}", bearer::to_hex(&bearer::hash(token)));
    std::process::exit(0);
}

/// `lock-server backup`: one JSON line on stdout, or the reason on stderr and exit 1.
fn backup(data_dir: &Path, to: &Path) -> ! {
    match backup::backup(data_dir, to) {
        Ok(report) => finish(serde_json::json!({
            "event": "backup_written",
            "file": to.display().to_string(),
            "reservedUpto": report.reserved_upto,
            "online": report.online,
            "bytes": report.bytes,
        })),
        Err(e) => fail("backup", &e),
    }
}

/// `lock-server restore`: one JSON line on stdout, or the reason on stderr and exit 1.
fn restore(from: &Path, data_dir: &Path, force: bool) -> ! {
    match backup::restore(from, data_dir, force) {
        Ok(report) => finish(serde_json::json!({
            "event": "restored",
            "dataDir": data_dir.display().to_string(),
            "backupReservedUpto": report.backup_reserved_upto,
            "previousReservedUpto": report.previous_reserved_upto,
            "firstToken": report.floor,
        })),
        Err(e) => fail("restore", &e),
    }
}

fn finish(line: serde_json::Value) -> ! {
    println!("{line}");
    std::process::exit(0);
}

fn fail(command: &str, e: &BackupError) -> ! {
    fail_with(command, e)
}

fn fail_with(command: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("lock-server {command}: {e}");
    std::process::exit(1);
}

#[cfg(feature = "etcd")]
type EtcdOptions = lock_server::store::etcd::EtcdOptions;
#[cfg(not(feature = "etcd"))]
type EtcdOptions = ();

#[cfg(feature = "etcd")]
fn etcd_options(
    endpoints: &[String],
    prefix: &str,
    timeout_ms: u64,
    access: &EtcdAccess,
) -> EtcdOptions {
    let mut options = EtcdOptions::new(endpoints.to_vec());
    options.prefix = prefix.to_string();
    options.timeout = std::time::Duration::from_millis(timeout_ms);
    options.credentials = access.credentials();
    options
}

#[cfg(not(feature = "etcd"))]
fn etcd_options(_: &[String], _: &str, _: u64, _: &EtcdAccess) -> EtcdOptions {}

/// `lock-server etcd-restored`: one JSON line on stdout, or the reason on stderr and exit 1.
#[cfg(feature = "etcd")]
async fn etcd_restored(options: EtcdOptions, min_epoch: u64) -> ! {
    use lock_server::store::etcd::EtcdStore;
    // The same access check as a replica's start: a TLS, auth or permission failure is told
    // as such, not as a failed epoch write.
    let store = match EtcdStore::connect(options).await {
        Ok(store) => store,
        Err(e) => fail_with("etcd-restored", &e),
    };
    if let Err(e) = store.check_access().await {
        fail_with("etcd-restored", &e);
    }
    match store.raise_epoch(min_epoch).await {
        Ok(raised) => finish(serde_json::json!({
            "event": "etcd_epoch_raised",
            "before": raised.before,
            "epoch": raised.epoch,
            "revision": raised.revision,
            "firstToken": lock_server::store::epoch::epoch_start(raised.epoch),
        })),
        Err(e) => {
            eprintln!("lock-server etcd-restored: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "etcd"))]
async fn etcd_restored(_: EtcdOptions, _: u64) -> ! {
    eprintln!("lock-server etcd-restored: the etcd backend is not in this build");
    std::process::exit(1);
}
