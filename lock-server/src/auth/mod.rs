//! Client authentication and authorisation (C3, "Authentication and authorisation").
//!
//! Without an auth file every request is [`Caller::Anonymous`]: all keys, every session for
//! whoever knows its id, R1 behind `--admin-token` alone (protected mode keeps such a server
//! on loopback unless told otherwise). With `--auth-file`, every `/v1` request names a client
//! by its bearer token; a client sees only the sessions it opened and the keys under its
//! `keyPrefixes`, and R1 needs an admin client or the admin token.
//!
//! Layout: this file ([`Auth`], the client table with its SIGHUP reload; [`Client`];
//! [`Caller`], who a request is from), `file` (the auth-file format and its checks), `bearer`
//! (the `Authorization` header, token hashes, the constant-time match), `guard` (the
//! middleware that applies each route's [`guard::Access`]).

pub mod bearer;
pub mod file;
pub mod guard;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use lock_api::ErrorCode;

use self::bearer::TokenHash;
pub use self::file::AuthFileError;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::store::SessionRef;

/// One client of the auth file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// Its name: the owner of its sessions, and what log lines call it.
    pub name: String,
    /// SHA-256 of each bearer token it may present (several while one is rotated).
    pub tokens_sha256: Vec<TokenHash>,
    /// It may use exactly the keys that start with one of these (`""`: every key).
    pub key_prefixes: Vec<String>,
    /// It may call R1.
    pub admin: bool,
}

impl Client {
    /// Whether `key` is within this client's scope.
    pub fn may_use(&self, key: &str) -> bool {
        self.key_prefixes
            .iter()
            .any(|prefix| key.starts_with(prefix.as_str()))
    }
}

/// Who a request is from, as the guard found it.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A server without an auth file: everyone is this one caller.
    Anonymous,
    /// With an auth file: the `--admin-token` bearer, which may call R1 and nothing else.
    AdminToken,
    /// With an auth file: one of its clients.
    Client(Arc<Client>),
}

impl Caller {
    /// The client name sessions are stored under and checked against (`None` without an
    /// auth file).
    pub fn client(&self) -> Option<&str> {
        match self {
            Caller::Client(client) => Some(&client.name),
            Caller::Anonymous | Caller::AdminToken => None,
        }
    }

    /// The session `id` as this caller names it (the store answers SESSION_NOT_FOUND for
    /// another client's session).
    pub fn session<'a>(&'a self, id: &'a str) -> SessionRef<'a> {
        SessionRef::new(id, self.client())
    }

    /// The name log lines give the caller.
    pub fn log_name(&self) -> &str {
        match self {
            Caller::Anonymous => "",
            Caller::AdminToken => "admin-token",
            Caller::Client(client) => &client.name,
        }
    }

    /// 403 FORBIDDEN unless `key` is within the caller's scope (L4, L6, L7, ledger, R1).
    pub fn check_key(&self, key: &str) -> Result<(), ApiError> {
        match self {
            Caller::Client(client) if !client.may_use(key) => Err(ApiError::new(
                ErrorCode::Forbidden,
                "this key is outside the client's keyPrefixes",
            )),
            _ => Ok(()),
        }
    }
}

/// Handlers take the caller the guard put into the request. A route the guard did not wrap
/// is a bug, answered 500 rather than run as anyone.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            tracing::error!(event = "unguarded_route");
            ApiError::new(ErrorCode::Internal, "internal error")
        })
    }
}

/// The credentials a server accepts: the auth file's clients (reloadable) and the admin
/// token, both as SHA-256 hashes.
#[derive(Debug)]
pub struct Auth {
    /// `None`: no auth file, every request is [`Caller::Anonymous`].
    file: Option<PathBuf>,
    clients: RwLock<Arc<Vec<Arc<Client>>>>,
    admin_token: Option<TokenHash>,
    /// With an auth file, `/metrics` and `/openapi.json` need no token.
    public_ops: bool,
}

/// What a presented token turned out to be.
enum Credential {
    AdminToken,
    Client(Arc<Client>),
}

impl Auth {
    /// Reads the auth file, if one is configured.
    pub fn load(
        file: Option<PathBuf>,
        admin_token: Option<&str>,
        public_ops: bool,
    ) -> Result<Auth, AuthFileError> {
        let clients = match &file {
            Some(path) => file::load(path)?.into_iter().map(Arc::new).collect(),
            None => Vec::new(),
        };
        Ok(Auth {
            file,
            clients: RwLock::new(Arc::new(clients)),
            admin_token: admin_token.map(bearer::hash),
            public_ops,
        })
    }

    /// Whether an auth file is configured (so `/v1` needs a client token).
    pub fn required(&self) -> bool {
        self.file.is_some()
    }

    /// Whether an admin token is configured (without one and without an auth file, R1 is
    /// disabled).
    pub fn has_admin_token(&self) -> bool {
        self.admin_token.is_some()
    }

    /// Whether `token` is the admin token, compared in constant time (see [`bearer::find`]).
    pub fn is_admin_token(&self, token: &str) -> bool {
        self.admin_token
            .is_some_and(|admin| bearer::find(&bearer::hash(token), &[admin]).is_some())
    }

    /// Re-reads the auth file. On any error the clients in force stay as they are.
    pub fn reload(&self) -> Result<usize, AuthFileError> {
        let Some(path) = &self.file else {
            return Ok(0);
        };
        let clients: Vec<Arc<Client>> = file::load(path)?.into_iter().map(Arc::new).collect();
        let count = clients.len();
        *self.clients.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(clients);
        Ok(count)
    }

    /// The client or admin token `token` belongs to. Every known hash is compared, without
    /// an early exit (see [`bearer::find`]).
    fn identify(&self, token: &str) -> Option<Credential> {
        let presented = bearer::hash(token);
        let clients = self
            .clients
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // Every hash of every client, each with the client it names (`None`: the admin token).
        let (hashes, owners): (Vec<TokenHash>, Vec<Option<&Arc<Client>>>) = clients
            .iter()
            .flat_map(|c| c.tokens_sha256.iter().map(move |hash| (*hash, Some(c))))
            .chain(self.admin_token.map(|hash| (hash, None)))
            .unzip();
        let index = bearer::find(&presented, &hashes)?;
        Some(match owners[index] {
            Some(client) => Credential::Client(client.clone()),
            None => Credential::AdminToken,
        })
    }
}

/// Protected mode: without an auth file, anyone who can reach the server can use and end
/// every session, so it listens only on loopback unless `--allow-unauthenticated` says so.
pub fn check_protected_mode(
    listen: SocketAddr,
    auth_file: bool,
    allow_unauthenticated: bool,
) -> Result<(), String> {
    if listen.ip().is_loopback() || auth_file || allow_unauthenticated {
        return Ok(());
    }
    Err(format!(
        "protected mode: refusing to listen on {listen} without --auth-file (anyone who can \
         reach it could end every session); give --auth-file FILE, or --allow-unauthenticated \
         to serve without client authentication"
    ))
}

/// Re-reads the auth file on every SIGHUP, for as long as the server runs. A bad file is
/// logged at warn and counted (`lock_auth_reload_failures_total`), and the clients in force
/// stay: the server goes on serving, but the file on disk is not what it enforces.
pub async fn reload_on_hangup(auth: Arc<Auth>, metrics: Arc<Metrics>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!(event = "auth_reload_unavailable");
        return;
    };
    while hangups.recv().await.is_some() {
        match auth.reload() {
            Ok(clients) if auth.required() => {
                tracing::info!(event = "auth_reloaded", clients = clients);
            }
            Ok(_) => tracing::info!(event = "auth_reload_skipped", reason = "no auth file"),
            Err(error) => {
                metrics.count_auth_reload_failure();
                tracing::warn!(event = "auth_reload_failed", error = %error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_refuses_only_an_open_non_loopback_listen() {
        let any: SocketAddr = "0.0.0.0:80".parse().unwrap();
        let v6: SocketAddr = "[::]:80".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let lo6: SocketAddr = "[::1]:80".parse().unwrap();
        let refused = check_protected_mode(any, false, false).unwrap_err();
        assert!(refused.contains("--allow-unauthenticated"), "{refused}");
        assert!(!refused.contains('\n'), "one line");
        assert!(check_protected_mode(v6, false, false).is_err());
        assert!(check_protected_mode(lo, false, false).is_ok());
        assert!(check_protected_mode(lo6, false, false).is_ok());
        assert!(check_protected_mode(any, true, false).is_ok());
        assert!(check_protected_mode(any, false, true).is_ok());
    }

    #[test]
    fn tokens_identify_their_client_or_the_admin_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let entry = |name: &str, token: &str| {
            format!(
                r#"{{"name":"{name}","tokenSha256":"{}","keyPrefixes":[""]}}"#,
                bearer::to_hex(&bearer::hash(token))
            )
        };
        std::fs::write(&path, format!(r#"{{"clients":[{}]}}"#, entry("a", "ta"))).unwrap();
        let auth = Auth::load(Some(path.clone()), Some("admin"), false).unwrap();
        let name = |token: &str| match auth.identify(token) {
            Some(Credential::Client(c)) => c.name.clone(),
            Some(Credential::AdminToken) => "<admin>".into(),
            None => "<none>".into(),
        };
        assert_eq!(name("ta"), "a");
        assert_eq!(name("admin"), "<admin>");
        assert_eq!(name("tb"), "<none>");
        // Reload: b joins, a leaves; a broken file changes nothing.
        std::fs::write(&path, format!(r#"{{"clients":[{}]}}"#, entry("b", "tb"))).unwrap();
        assert_eq!(auth.reload().unwrap(), 1);
        assert_eq!((name("ta"), name("tb")), ("<none>".into(), "b".into()));
        std::fs::write(&path, "{").unwrap();
        assert!(auth.reload().is_err());
        assert_eq!(name("tb"), "b");
        // A rotation: b lists its old and new token, both are b; then only the new one.
        let rotating = |tokens: &[&str]| {
            let hashes: Vec<String> = tokens
                .iter()
                .map(|t| format!("\"{}\"", bearer::to_hex(&bearer::hash(t))))
                .collect();
            let b = format!(
                r#"{{"name":"b","tokenSha256":[{}],"keyPrefixes":[""]}}"#,
                hashes.join(",")
            );
            format!(r#"{{"clients":[{},{b}]}}"#, entry("a", "ta"))
        };
        std::fs::write(&path, rotating(&["tb", "tb2"])).unwrap();
        auth.reload().unwrap();
        assert_eq!(
            (name("ta"), name("tb"), name("tb2")),
            ("a".into(), "b".into(), "b".into())
        );
        assert_eq!(name("admin"), "<admin>");
        std::fs::write(&path, rotating(&["tb2"])).unwrap();
        auth.reload().unwrap();
        assert_eq!((name("tb"), name("tb2")), ("<none>".into(), "b".into()));
    }
}
