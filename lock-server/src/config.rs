//! Command line and environment configuration (contract C5). Every flag is also an
//! environment variable; flags win over the environment.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lock_api::limits::{DEFAULT_LOCK_TTL_MILLIS, DEFAULT_SESSION_TTL_MILLIS, TTL_MILLIS_MAX};

use crate::store::queue::DEFAULT_GRACE_MILLIS;

/// Which [`crate::store::Store`] backs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Embedded SQLite in `--data-dir` (default, single replica).
    Sqlite,
    /// An etcd v3 cluster (scale-out, any number of replicas).
    Etcd,
}

/// Default of `--header-read-timeout-ms`.
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 30_000;
/// Default of `--http2-max-streams`.
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 512;
/// Default of `--http2-keepalive-ms`.
pub const DEFAULT_HTTP2_KEEPALIVE_MS: u64 = 20_000;
/// Default of `--max-streams-per-connection`.
pub const DEFAULT_STREAMS_PER_CONNECTION: usize = 16;

/// TLS and auth of the etcd connection, for the server and for `etcd-restored` alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct EtcdAccess {
    /// PEM CA bundle that signed the etcd members' certificates (`https://` endpoints).
    /// Without it the system's trust roots are used.
    #[arg(long = "etcd-ca-file", env = "LOCK_ETCD_CA_FILE")]
    pub ca_file: Option<PathBuf>,

    /// PEM client certificate for etcd's `--client-cert-auth` (mutual TLS). Needs
    /// `--etcd-key-file`.
    #[arg(
        long = "etcd-cert-file",
        env = "LOCK_ETCD_CERT_FILE",
        requires = "key_file"
    )]
    pub cert_file: Option<PathBuf>,

    /// PEM private key of `--etcd-cert-file`.
    #[arg(
        long = "etcd-key-file",
        env = "LOCK_ETCD_KEY_FILE",
        requires = "cert_file"
    )]
    pub key_file: Option<PathBuf>,

    /// etcd user (etcd auth enabled). Needs `--etcd-password-file`.
    #[arg(long = "etcd-user", env = "LOCK_ETCD_USER", requires = "password_file")]
    pub user: Option<String>,

    /// File holding the etcd user's password (one line; the line end is not part of it).
    /// Never on the command line; a file others than its owner can read gets a warning.
    #[arg(
        long = "etcd-password-file",
        env = "LOCK_ETCD_PASSWORD_FILE",
        requires = "user"
    )]
    pub password_file: Option<PathBuf>,
}

#[cfg(feature = "etcd")]
impl EtcdAccess {
    /// The etcd store's view of these flags.
    pub fn credentials(&self) -> crate::store::etcd::Credentials {
        crate::store::etcd::Credentials {
            ca_file: self.ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            user: self.user.clone(),
            password_file: self.password_file.clone(),
        }
    }
}

/// What to do instead of serving.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Read a bearer token from stdin (one line) and print its SHA-256 in hex, the
    /// `tokenSha256` of an auth-file client.
    HashToken,
    /// Write a consistent copy of the SQLite store to a file, also while a server is serving
    /// on the data dir (that server takes the copy); the copy carries the token mark.
    Backup {
        /// The data dir of the store to copy.
        #[arg(long, env = "LOCK_DATA_DIR")]
        data_dir: PathBuf,
        /// The backup file (written beside it first, then renamed; replaced if present).
        #[arg(long)]
        to: PathBuf,
    },
    /// Restore a backup into a data dir no server is running on; the restored store issues
    /// tokens only from the next token epoch on.
    Restore {
        /// A file written by `lock-server backup`.
        #[arg(long)]
        from: PathBuf,
        /// The data dir to restore into (created if missing).
        #[arg(long, env = "LOCK_DATA_DIR")]
        data_dir: PathBuf,
        /// Replace the store of a data dir that is not empty.
        #[arg(long)]
        force: bool,
    },
    /// After `etcdctl snapshot restore` (and restarting etcd on the restored data): raise the
    /// deployment's token epoch by one, so no token is granted twice. Replicas that saw the
    /// rewind refuse grants (503) until it has run.
    EtcdRestored {
        /// etcd client URLs (comma separated or repeated).
        #[arg(
            long,
            env = "LOCK_ETCD_ENDPOINTS",
            value_delimiter = ',',
            required = true
        )]
        etcd_endpoints: Vec<String>,
        /// The deployment's prefix (`--etcd-prefix` of its replicas).
        #[arg(long, env = "LOCK_ETCD_PREFIX", default_value = "/lock-server/")]
        etcd_prefix: String,
        /// Bound on each etcd request, in milliseconds.
        #[arg(long, env = "LOCK_ETCD_TIMEOUT_MS", default_value_t = 2_000)]
        etcd_timeout_ms: u64,
        /// TLS and etcd auth, as the replicas connect.
        #[command(flatten)]
        etcd_access: EtcdAccess,
        /// Raise the epoch to at least this (when the snapshot is older than an earlier
        /// `etcd-restored`: one above the epoch the replicas logged last, `etcd_epoch`).
        #[arg(long, default_value_t = 0)]
        min_epoch: u64,
    },
}

/// lock-server configuration.
#[derive(Debug, Clone, Parser)]
#[command(name = "lock-server", version, about = "Fencing-token lock service")]
pub struct Config {
    /// Without a subcommand the server runs.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Address to listen on; port 0 picks a free port (printed in the `listening` line).
    #[arg(long, env = "LOCK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Directory of the embedded store (SQLite file, token reservation, markers).
    #[arg(long, env = "LOCK_DATA_DIR", default_value = "./lock-data")]
    pub data_dir: PathBuf,

    /// Storage backend.
    #[arg(long, env = "LOCK_BACKEND", value_enum, default_value_t = Backend::Sqlite)]
    pub backend: Backend,

    /// etcd client URLs (comma separated or repeated), for `--backend etcd`.
    #[arg(
        long,
        env = "LOCK_ETCD_ENDPOINTS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:2379"
    )]
    pub etcd_endpoints: Vec<String>,

    /// Prefix of every etcd key this deployment writes.
    #[arg(long, env = "LOCK_ETCD_PREFIX", default_value = "/lock-server/")]
    pub etcd_prefix: String,

    /// Bound on every etcd request, in milliseconds.
    #[arg(long, env = "LOCK_ETCD_TIMEOUT_MS", default_value_t = 2_000)]
    pub etcd_timeout_ms: u64,

    /// TLS and etcd auth of the etcd connection.
    #[command(flatten)]
    pub etcd_access: EtcdAccess,

    /// Lock TTL when L4 carries none (`lock.default.ttl`).
    #[arg(long, env = "LOCK_DEFAULT_LOCK_TTL_MS", default_value_t = DEFAULT_LOCK_TTL_MILLIS,
          value_parser = parse_ttl)]
    pub default_lock_ttl_ms: u64,

    /// Session TTL when L1 carries none (`lock.session.ttl`).
    #[arg(long, env = "LOCK_DEFAULT_SESSION_TTL_MS", default_value_t = DEFAULT_SESSION_TTL_MILLIS,
          value_parser = parse_ttl)]
    pub default_session_ttl_ms: u64,

    /// Bearer token for the admin surface (R1). Unset: R1 is disabled and answers 403
    /// (with an auth file, admin clients may still call it).
    #[arg(long, env = "LOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    // --- Client authentication (see the README's "Security" and C3) ---
    /// JSON file of the clients allowed to call `/v1`: names, SHA-256 hashes of their bearer
    /// tokens, key prefixes, admin rights. Re-read on SIGHUP (a bad file is logged and the
    /// clients in force stay). Unset: no client authentication.
    #[arg(long, env = "LOCK_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,

    /// Protected mode's opt-out: listen on a non-loopback address without an auth file, so
    /// that anyone who can reach it may use and end every session.
    #[arg(long, env = "LOCK_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,

    /// With an auth file, serve `/metrics` and `/openapi.json` without a token (they need
    /// any known token otherwise). Without an auth file they are always public.
    #[arg(long, env = "LOCK_PUBLIC_OPS")]
    pub public_ops: bool,
    // --- end of client authentication ---
    /// Origins allowed by CORS (comma separated or repeated). None by default: no CORS.
    #[arg(long = "cors-origin", env = "LOCK_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Directory served as static files at `/` (the dashboard in `www/`).
    #[arg(long, env = "LOCK_WEB_ROOT")]
    pub web_root: Option<PathBuf>,

    /// Serve the demo fenced ledger (`/v1/demo/ledger/{key}`, used by the dashboard, the
    /// examples and the chaos runs) and its unfenced twin (`/v1/demo/unfenced-ledger/{key}`,
    /// the dashboard's fault lab). `false` answers their paths 404: their records have no TTL,
    /// so on a shared server (on etcd above all) they grow for as long as anyone writes.
    #[arg(long, env = "LOCK_DEMO_LEDGER", default_value_t = true, action = clap::ArgAction::Set)]
    pub demo_ledger: bool,

    /// Per-key cap on the wait queue (tickets of L4 requests with `waitMillis` > 0, counted
    /// across all replicas on etcd); one more is 429 CONTENTION_EXCEEDED. 0 disables
    /// server-side waiting.
    #[arg(long, env = "LOCK_MAX_WAITERS_PER_KEY", default_value_t = 64)]
    pub max_waiters_per_key: u32,

    /// How long a wait-queue ticket keeps its place after the last L4 of its session for that
    /// key ended, so a client that re-sends keeps its turn and one that went away loses it.
    #[arg(long, env = "LOCK_QUEUE_GRACE_MS", default_value_t = DEFAULT_GRACE_MILLIS,
          value_parser = clap::value_parser!(u64).range(1..=lock_api::limits::WAIT_MILLIS_MAX))]
    pub queue_grace_ms: u64,

    // --- L8 watches (C3, "Watching a key") ---
    /// Watchers of one key at once on this server (SSE streams and long polls together); one
    /// more is 429 CONTENTION_EXCEEDED. ASSUMPTION: 1,000.
    #[arg(long, env = "LOCK_MAX_WATCHERS_PER_KEY", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_watchers_per_key: u64,

    /// SSE streams open at once on one connection; one more is 429 CONTENTION_EXCEEDED.
    /// ASSUMPTION: 16 (a browser tab watches a few keys; more should long-poll).
    #[arg(long, env = "LOCK_MAX_STREAMS_PER_CONNECTION",
          default_value_t = DEFAULT_STREAMS_PER_CONNECTION as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_streams_per_connection: u64,

    /// Events an SSE watcher may fall behind before it is sent `reset` and its stream is
    /// closed (the slow-consumer bound). ASSUMPTION: 1,024; tests lower it.
    #[arg(long, env = "LOCK_WATCH_BUFFER_EVENTS", default_value_t = 1_024,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub watch_buffer_events: u64,
    // --- end of L8 watches ---
    /// Largest request body in bytes; larger is 413 PAYLOAD_TOO_LARGE.
    #[arg(long, env = "LOCK_MAX_BODY_BYTES", default_value_t = 16 * 1024)]
    pub max_body_bytes: usize,

    /// A connection must deliver a complete request head within this many milliseconds of
    /// starting to wait for one (idle keep-alive included), or it is closed: the slow-loris
    /// guard. ASSUMPTION: 30 s, hyper's own default; clients' idle pools close sooner.
    #[arg(long, env = "LOCK_HEADER_READ_TIMEOUT_MS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,

    // --- TLS and HTTP/2 (C3's Connections rule) ---
    /// PEM certificate chain: serve HTTPS, with ALPN `h2` and `http/1.1` on the listen port.
    /// Needs `--tls-key`.
    #[arg(long, env = "LOCK_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of `--tls-cert`.
    #[arg(long, env = "LOCK_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS with a self-signed certificate for the listen host (and the loopback
    /// names), generated into the data dir on first start and reused after; its path and
    /// SHA-256 fingerprint are printed at start.
    #[arg(long, env = "LOCK_TLS_SELF_SIGNED", conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,

    /// Concurrent HTTP/2 streams per connection; more are refused (`REFUSED_STREAM`).
    /// ASSUMPTION: 512, room for the dashboard's 200 contenders with an acquire and a
    /// heartbeat each in flight on one connection.
    #[arg(long, env = "LOCK_HTTP2_MAX_STREAMS", default_value_t = DEFAULT_HTTP2_MAX_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_streams: u32,

    /// HTTP/2 keep-alive: a ping this often, and a connection whose ping goes unanswered
    /// this long is closed. ASSUMPTION: 20 s, hyper's own ping timeout.
    #[arg(long, env = "LOCK_HTTP2_KEEPALIVE_MS", default_value_t = DEFAULT_HTTP2_KEEPALIVE_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub http2_keepalive_ms: u64,
    // --- end of TLS and HTTP/2 ---
    /// Where the kernel's boot id is read (hidden: tests point it at a file to fake a reboot).
    #[arg(
        long,
        env = "LOCK_BOOT_ID_PATH",
        default_value = "/proc/sys/kernel/random/boot_id",
        hide = true
    )]
    pub boot_id_path: PathBuf,

    /// How long grants are held back after an unclean start across a reboot. Must be at least
    /// the largest TTL for the guarantee to hold; lowered only by tests (hidden).
    #[arg(long, env = "LOCK_UNCLEAN_HOLDBACK_MS", default_value_t = TTL_MILLIS_MAX, hide = true)]
    pub unclean_holdback_ms: u64,
}

fn parse_ttl(s: &str) -> Result<u64, String> {
    let ttl: u64 = s.parse().map_err(|e| format!("{e}"))?;
    lock_api::limits::validate_ttl(ttl)?;
    Ok(ttl)
}

impl Config {
    /// What the key feeds keep and allow (L8): the window and linger are fixed (C3's
    /// ASSUMPTIONS), the caps come from the flags.
    pub fn feed_limits(&self) -> crate::store::feeds::FeedLimits {
        crate::store::feeds::FeedLimits {
            watchers_per_key: self.max_watchers_per_key as usize,
            buffer: self.watch_buffer_events as usize,
            ..Default::default()
        }
    }

    /// A configuration with every default, for tests and the bench.
    pub fn for_data_dir(data_dir: PathBuf) -> Config {
        let mut config = Config::parse_from(["lock-server"]);
        config.data_dir = data_dir;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_defaults_hold() {
        let c = Config::parse_from([
            "lock-server",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            "etcd",
            "--cors-origin",
            "http://a,http://b",
            "--cors-origin",
            "http://c",
        ]);
        assert_eq!(c.backend, Backend::Etcd);
        assert_eq!(c.cors_origins, ["http://a", "http://b", "http://c"]);
        assert_eq!(c.default_lock_ttl_ms, 10_000);
        assert_eq!(c.default_session_ttl_ms, 15_000);
        assert_eq!(c.max_waiters_per_key, 64);
        assert_eq!(c.queue_grace_ms, 1_000);
        assert_eq!(c.command, None);
        assert_eq!(c.auth_file, None);
        assert!(!c.allow_unauthenticated && !c.public_ops);
    }

    #[test]
    fn hash_token_is_a_subcommand() {
        let c = Config::parse_from(["lock-server", "hash-token"]);
        assert_eq!(c.command, Some(Command::HashToken));
        let c = Config::parse_from([
            "lock-server",
            "--auth-file",
            "a.json",
            "--public-ops",
            "--allow-unauthenticated",
        ]);
        assert_eq!(c.auth_file, Some(PathBuf::from("a.json")));
        assert!(c.public_ops && c.allow_unauthenticated);
    }

    #[test]
    fn backup_and_restore_are_subcommands_with_their_own_flags() {
        let c = Config::parse_from(["lock-server", "backup", "--data-dir", "d", "--to", "f"]);
        assert_eq!(
            c.command,
            Some(Command::Backup {
                data_dir: "d".into(),
                to: "f".into()
            })
        );
        let c = Config::parse_from([
            "lock-server",
            "restore",
            "--from",
            "f",
            "--data-dir",
            "d",
            "--force",
        ]);
        assert_eq!(
            c.command,
            Some(Command::Restore {
                from: "f".into(),
                data_dir: "d".into(),
                force: true
            })
        );
        assert!(Config::try_parse_from(["lock-server", "restore", "--data-dir", "d"]).is_err());
    }

    #[test]
    fn tls_flags_come_as_a_pair_or_self_signed() {
        let parse = |args: &[&str]| Config::try_parse_from([&["lock-server"], args].concat());
        assert!(
            parse(&["--tls-cert", "c.pem"]).is_err(),
            "a cert needs its key"
        );
        assert!(
            parse(&["--tls-key", "k.pem"]).is_err(),
            "a key needs its cert"
        );
        let both = parse(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]).unwrap();
        assert_eq!(both.tls_cert, Some(PathBuf::from("c.pem")));
        let clash = [
            "--tls-self-signed",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ];
        assert!(
            parse(&clash).is_err(),
            "a certificate or self-signed, not both"
        );
        let defaults = parse(&[]).unwrap();
        assert!(defaults.tls_cert.is_none() && !defaults.tls_self_signed);
        assert_eq!(defaults.http2_max_streams, 512);
        assert_eq!(defaults.http2_keepalive_ms, 20_000);
        assert!(parse(&["--http2-max-streams", "0"]).is_err());
    }

    #[test]
    fn out_of_range_default_ttls_are_refused() {
        assert!(Config::try_parse_from(["lock-server", "--default-lock-ttl-ms", "5"]).is_err());
    }
}
