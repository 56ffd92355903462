//! How a replica reaches a secured etcd: TLS (a CA, a client certificate for mutual TLS),
//! etcd auth (a user and a password read from a file), and the start-up check that proves
//! those credentials can read and write the prefix before the replica answers anyone.
//!
//! Why a check at start: etcd-client connects lazily, so a replica with a wrong CA, a wrong
//! password or a user without a role on the prefix would start, answer `/healthz`, and fail
//! every request. Misconfiguration is found once, at start, as one `fatal` line naming it
//! (TLS, authentication, permission, unreachable), and the process exits 1.
//!
//! Secrets: the password and the key's contents are never formatted; [`Credentials`]' Debug
//! names files, not contents, and errors are built from etcd's messages, which carry neither.

use std::path::{Path, PathBuf};

use etcd_client::{
    Certificate, Client, ConnectOptions, DeleteOptions, GetOptions, Identity, TlsOptions,
};

use super::EtcdStore;

/// TLS and auth settings of the etcd connection (`--etcd-ca-file`, `--etcd-cert-file`,
/// `--etcd-key-file`, `--etcd-user`, `--etcd-password-file`).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
}

/// Why the replica cannot use etcd; each is fatal at start.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The flags do not make sense together, or a file cannot be read.
    #[error("etcd configuration: {0}")]
    Config(String),
    /// The TLS handshake failed (unknown CA, wrong name, client certificate refused).
    #[error("etcd TLS handshake failed: {0}")]
    Tls(String),
    /// etcd refused the user and password, or auth is on and no user was given.
    #[error("etcd authentication failed: {0}")]
    Authentication(String),
    /// The user has no read-write role on the prefix.
    #[error("etcd permission denied on prefix {prefix:?}: {message}")]
    Permission { prefix: String, message: String },
    /// No member answered.
    #[error("etcd unreachable: {0}")]
    Unreachable(String),
}

impl AccessError {
    /// How specific the cause is: when several endpoints fail, the most specific is told
    /// (a member down says less than a password refused by the others).
    fn rank(&self) -> u8 {
        match self {
            AccessError::Unreachable(_) => 0,
            AccessError::Tls(_) => 1,
            AccessError::Config(_) => 2,
            AccessError::Authentication(_) | AccessError::Permission { .. } => 3,
        }
    }
}

/// The password, never printed.
struct Password(String);

/// Adds TLS and auth from `credentials` to `options`, checking them against `endpoints`.
pub(super) fn apply(
    credentials: &Credentials,
    endpoints: &[String],
    mut options: ConnectOptions,
) -> Result<ConnectOptions, AccessError> {
    let https = endpoints
        .iter()
        .filter(|e| e.starts_with("https://"))
        .count();
    if https != 0 && https != endpoints.len() {
        return Err(AccessError::Config(
            "mix of http:// and https:// endpoints; use one scheme".into(),
        ));
    }
    let tls_files = credentials.ca_file.is_some() || credentials.cert_file.is_some();
    if https == 0 && tls_files {
        return Err(AccessError::Config(
            "--etcd-ca-file/--etcd-cert-file need https:// endpoints".into(),
        ));
    }
    if https != 0 {
        options = options.with_tls(tls_options(credentials)?);
    }
    if let (Some(user), Some(file)) = (&credentials.user, &credentials.password_file) {
        let Password(password) = read_password(file)?;
        options = options.with_user(user.clone(), password);
    }
    Ok(options)
}

/// The CA (or the system roots) and the client identity.
fn tls_options(credentials: &Credentials) -> Result<TlsOptions, AccessError> {
    let mut tls = TlsOptions::new();
    tls = match &credentials.ca_file {
        Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca, "--etcd-ca-file")?)),
        None => tls.with_native_roots(),
    };
    if let (Some(cert), Some(key)) = (&credentials.cert_file, &credentials.key_file) {
        let identity = Identity::from_pem(
            read(cert, "--etcd-cert-file")?,
            read(key, "--etcd-key-file")?,
        );
        tls = tls.identity(identity);
    }
    Ok(tls)
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, AccessError> {
    std::fs::read(path)
        .map_err(|e| AccessError::Config(format!("cannot read {flag} {}: {e}", path.display())))
}

/// The password file's first line; a warning when others than its owner may read it.
fn read_password(path: &Path) -> Result<Password, AccessError> {
    warn_if_readable_by_others(path);
    let bytes = read(path, "--etcd-password-file")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| AccessError::Config("--etcd-password-file is not UTF-8".into()))?;
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        return Err(AccessError::Config("--etcd-password-file is empty".into()));
    }
    Ok(Password(line.to_owned()))
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                event = "etcd_password_file_open",
                path = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the etcd password file can be read by others than its owner; chmod 600 it",
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// Connects one endpoint. With a user, etcd-client authenticates here, so a refused password
/// (or a failed handshake) is told now.
pub(super) async fn connect_one(
    endpoint: &str,
    options: &ConnectOptions,
) -> Result<Client, AccessError> {
    Client::connect([endpoint], Some(options.clone()))
        .await
        .map_err(|e| classify(&e, ""))
}

/// Connects every endpoint; one client each. Without a user this touches no network. With
/// one, a member that cannot be reached now is left out (a warning names it; a restart
/// uses it again) as long as another one authenticated: one member down must not keep
/// every replica of a healthy cluster from starting. Any other failure is fatal.
pub(super) async fn connect_all(
    endpoints: &[String],
    options: &ConnectOptions,
) -> Result<Vec<Client>, AccessError> {
    let mut clients = Vec::with_capacity(endpoints.len());
    let mut unreachable = None;
    for endpoint in endpoints {
        match connect_one(endpoint, options).await {
            Ok(client) => clients.push(client),
            Err(AccessError::Unreachable(message)) => {
                tracing::warn!(
                    event = "etcd_endpoint_skipped",
                    endpoint = %endpoint,
                    error = %message,
                    "etcd member unreachable at start; left out until this replica restarts",
                );
                unreachable = Some(AccessError::Unreachable(message));
            }
            Err(other) => return Err(other),
        }
    }
    match (clients.is_empty(), unreachable) {
        (true, Some(error)) => Err(error),
        _ => Ok(clients),
    }
}

/// An etcd-client error → the cause an operator acts on. Reads the whole source chain: a
/// failed handshake is a transport error whose cause names the certificate.
fn classify(error: &etcd_client::Error, prefix: &str) -> AccessError {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    let lower = text.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if has(&["permission denied"]) {
        return AccessError::Permission {
            prefix: prefix.to_owned(),
            message: text,
        };
    }
    if has(&[
        "authentication failed",
        "user name is empty",
        "invalid auth token",
        "user name not found",
        "unauthenticated",
    ]) {
        return AccessError::Authentication(text);
    }
    if has(&[
        "certificate",
        "tls",
        "handshake",
        "unknownissuer",
        "invalid peer",
        "alert",
    ]) {
        return AccessError::Tls(text);
    }
    AccessError::Unreachable(text)
}

/// What the start-up check found besides "it works".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessReport {
    /// The cluster's revision when checked.
    pub revision: i64,
    /// Whether history back to revision 1 is still kept at a revision past
    /// [`NEVER_COMPACTED_WARN_REVISION`]: compaction looks off.
    pub never_compacted: bool,
}

/// Rounds of the start-up check while no member answers (ASSUMPTION: 5 rounds 500 ms apart,
/// each bounded by `--etcd-timeout-ms` per endpoint: about 2 s with etcd refusing
/// connections, longer than an etcd election at default settings).
const STARTUP_ROUNDS: u32 = 5;
const STARTUP_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// ASSUMPTION: 100,000 revisions. Past it, a history still readable from revision 1 means
/// nothing ever compacted etcd; each grant costs one or two revisions, so an uncompacted
/// cluster grows until its quota stops every write (NOSPACE).
pub const NEVER_COMPACTED_WARN_REVISION: i64 = 100_000;

/// Whether history at `revision` still reaching back to revision 1 looks like compaction is
/// off.
pub fn compaction_looks_off(revision: i64, first_revision_readable: bool) -> bool {
    revision > NEVER_COMPACTED_WARN_REVISION && first_revision_readable
}

impl EtcdStore {
    /// The start-up check: put, read back and delete a probe key under the prefix, and read
    /// the prefix as a range (the store reads ranges), on the first endpoint that answers.
    /// Then whether revision 1 is still readable (one cheap count-only read), for the
    /// compaction warning. The first success wins; when all fail, the most specific cause.
    /// Only "unreachable" (which covers an election under way: no leader) is tried again,
    /// for [`STARTUP_ROUNDS`] rounds: a replica restarted while a member is being replaced
    /// must not die of it. TLS, authentication and permission never heal by waiting.
    pub async fn check_access(&self) -> Result<AccessReport, AccessError> {
        let mut round = 1;
        loop {
            match self.check_round().await {
                Err(AccessError::Unreachable(_)) if round < STARTUP_ROUNDS => {
                    round += 1;
                    tokio::time::sleep(STARTUP_PAUSE).await;
                }
                result => return result,
            }
        }
    }

    async fn check_round(&self) -> Result<AccessReport, AccessError> {
        let mut worst: Option<AccessError> = None;
        for client in self.clients.iter() {
            match self.check_one(client.clone()).await {
                Ok(report) => return Ok(report),
                Err(error) => {
                    if worst.as_ref().is_none_or(|w| error.rank() > w.rank()) {
                        worst = Some(error);
                    }
                }
            }
        }
        Err(worst.unwrap_or_else(|| AccessError::Unreachable("no endpoint".into())))
    }

    async fn check_one(&self, mut client: Client) -> Result<AccessReport, AccessError> {
        let prefix = self.keys.prefix().to_owned();
        // Not the readiness probe's key: deleting this one never races a probe's put.
        let key = format!("{prefix}k/startup-probe");
        within(
            self.timeout,
            client.put(key.clone(), b"1".to_vec(), None),
            &prefix,
        )
        .await?;
        let range = within(
            self.timeout,
            client.get(
                prefix.clone(),
                Some(GetOptions::new().with_prefix().with_count_only()),
            ),
            &prefix,
        )
        .await?;
        within(
            self.timeout,
            client.delete(key, None::<DeleteOptions>),
            &prefix,
        )
        .await?;
        let revision = range.header().map_or(0, |h| h.revision());
        let first_readable = revision > NEVER_COMPACTED_WARN_REVISION
            && client
                .get(
                    prefix.clone(),
                    Some(
                        GetOptions::new()
                            .with_prefix()
                            .with_count_only()
                            .with_revision(1),
                    ),
                )
                .await
                .is_ok();
        Ok(AccessReport {
            revision,
            never_compacted: compaction_looks_off(revision, first_readable),
        })
    }
}

/// One call of the check under the per-request timeout.
async fn within<T>(
    timeout: std::time::Duration,
    call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    prefix: &str,
) -> Result<T, AccessError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(|e| classify(&e, prefix)),
        Err(_) => Err(AccessError::Unreachable(
            "no answer within --etcd-timeout-ms".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_warning_needs_a_long_history_still_readable_from_the_start() {
        assert!(compaction_looks_off(
            NEVER_COMPACTED_WARN_REVISION + 1,
            true
        ));
        assert!(!compaction_looks_off(
            NEVER_COMPACTED_WARN_REVISION + 1,
            false
        ));
        assert!(!compaction_looks_off(10, true));
    }

    #[test]
    fn tls_files_with_http_endpoints_are_a_configuration_error() {
        let credentials = Credentials {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        };
        let result = apply(
            &credentials,
            &["http://127.0.0.1:2379".to_owned()],
            ConnectOptions::new(),
        );
        assert!(matches!(result, Err(AccessError::Config(_))));
    }

    #[test]
    fn a_password_file_is_read_to_its_first_line_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret-value\nignored\n").unwrap();
        let credentials = Credentials {
            user: Some("app".into()),
            password_file: Some(path),
            ..Default::default()
        };
        let options = apply(
            &credentials,
            &["http://127.0.0.1:2379".to_owned()],
            ConnectOptions::new(),
        )
        .unwrap();
        assert!(format!("{options:?}").contains("app"));
        assert!(!format!("{credentials:?}").contains("s3cret-value"));
    }
}
