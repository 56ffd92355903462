//! The authentication and authorisation rules of C3, as functions over running servers, so
//! every backend runs the same checks: start a server with an [`AuthFile`] and [`options`]
//! (plus backend flags) and call [`run_all`]; the start-up rules ([`protected_mode`],
//! [`public_ops`]) start their own servers with the backend flags given.
//!
//! The attacker's view throughout: a client that has learnt other clients' session ids, keys,
//! fencing tokens and holder ids (they leak; the rules must hold anyway), and anyone on the
//! network with hostile `Authorization` headers. Every refused attempt is followed by a check
//! that nothing changed for the victim.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lock_api::{paths, LockState, SessionOpened, SessionStatus};
use serde_json::{json, Value};

use crate::client::{Api, Reply};
use crate::contract::{eventually, EVENTUALLY};
use crate::launcher::{server_binary, Launch};
use crate::{ServerOptions, TestServer};

/// One client of the suite's auth file.
#[derive(Debug, Clone, Copy)]
pub struct TestClient {
    pub name: &'static str,
    pub token: &'static str,
    pub prefixes: &'static [&'static str],
    pub admin: bool,
}

/// An ordinary client.
pub const ALPHA: TestClient = TestClient {
    name: "alpha",
    token: "alpha-token-5f1c0e9a",
    prefixes: &["alpha/"],
    admin: false,
};
/// An ordinary client with two prefixes.
pub const BETA: TestClient = TestClient {
    name: "beta",
    token: "beta-token-9e2d41b7",
    prefixes: &["beta/", "shared/"],
    admin: false,
};
/// An admin client over every key.
pub const OPS: TestClient = TestClient {
    name: "ops",
    token: "ops-token-77aa03c2",
    prefixes: &[""],
    admin: true,
};
/// An admin client over `alpha/` only.
pub const AUDITOR: TestClient = TestClient {
    name: "auditor",
    token: "auditor-token-31bb6d08",
    prefixes: &["alpha/"],
    admin: true,
};
/// Joins through a SIGHUP reload.
pub const GAMMA: TestClient = TestClient {
    name: "gamma",
    token: "gamma-token-c4e81f55",
    prefixes: &["gamma/"],
    admin: false,
};
/// The clients the suite's server starts with.
pub const CLIENTS: [TestClient; 4] = [ALPHA, BETA, OPS, AUDITOR];
/// `--admin-token` of the suite's server.
pub const ADMIN_TOKEN: &str = "auth-admin-token-0d93";
/// An id of the right shape that no session has.
const UNKNOWN_ID: &str = "0123456789abcdef0123456789abcdef";

/// The auth file, in a temp dir that lives as long as the value.
pub struct AuthFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl AuthFile {
    /// A file listing `clients`.
    pub fn new(clients: &[TestClient]) -> AuthFile {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = AuthFile {
            path: dir.path().join("auth.json"),
            _dir: dir,
        };
        file.write(clients);
        file
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with one listing `clients`, token hashes made by
    /// `lock-server hash-token`.
    pub fn write(&self, clients: &[TestClient]) {
        self.write_rotating(clients, &[]);
    }

    /// As [`AuthFile::write`], but the clients named in `tokens` list those tokens (a
    /// rotation: the old one and the new one) instead of their own.
    pub fn write_rotating(&self, clients: &[TestClient], tokens: &[(&str, &[&str])]) {
        let clients: Vec<Value> = clients
            .iter()
            .map(|c| {
                let hashes = match tokens.iter().find(|(name, _)| *name == c.name) {
                    Some((_, list)) => {
                        json!(list.iter().map(|t| hash_token(t)).collect::<Vec<_>>())
                    }
                    None => json!(hash_token(c.token)),
                };
                json!({
                    "name": c.name,
                    "tokenSha256": hashes,
                    "keyPrefixes": c.prefixes,
                    "admin": c.admin,
                })
            })
            .collect();
        self.write_raw(&json!({ "clients": clients }).to_string());
    }

    /// Replaces the file with `text`.
    pub fn write_raw(&self, text: &str) {
        std::fs::write(&self.path, text).expect("write auth file");
    }
}

/// `lock-server hash-token` with `input` on stdin: its stdout line, or `None` when it fails.
pub fn hash_token_output(input: &str) -> Option<String> {
    let mut child = Command::new(server_binary())
        .arg("hash-token")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lock-server hash-token");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("hash-token output");
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned()
    })
}

/// The `tokenSha256` of `token`.
fn hash_token(token: &str) -> String {
    hash_token_output(&format!("{token}\n")).expect("hash-token succeeds")
}

/// The options the suite expects: the auth file, the admin token, a CORS origin, debug logs
/// (so the checks that no line carries a token or session id cover them too).
pub fn options(file: &AuthFile) -> ServerOptions {
    ServerOptions::new()
        .admin_token(ADMIN_TOKEN)
        .args(["--auth-file".to_string(), file.path().display().to_string()])
        .args(["--cors-origin", CORS_ORIGIN])
        .env("RUST_LOG", "info,lock_server=debug")
}

/// `--cors-origin` of the suite's server: the page a browser client with a token runs on.
const CORS_ORIGIN: &str = "http://app.example";

/// Every session id the suite opened, so that no answer, log line or metric may show one.
static SESSION_IDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn session_ids() -> Vec<String> {
    SESSION_IDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// L1 as `api`'s client, with an owner label; the id is remembered.
async fn open(api: &Api, owner: &str) -> SessionOpened {
    let reply = api
        .open_session_with(json!({ "ttlMillis": 60_000, "owner": owner }))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let opened: SessionOpened = reply.parse();
    SESSION_IDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(opened.session_id.clone());
    opened
}

/// L7 as `api`'s client, checked to show no session id the suite ever opened.
async fn l7(api: &Api, key: &str) -> Reply {
    let reply = api.lock_state_reply(key).await;
    for id in session_ids() {
        assert!(
            !reply.text.contains(&id),
            "L7 shows a session id: {reply:?}"
        );
    }
    reply
}

/// A key under `prefix` no other check uses, with characters that need percent-encoding.
fn scoped(prefix: &str, name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{name} ü#{n}-{}", std::process::id())
}

fn as_client(server: &TestServer, client: TestClient) -> Api {
    server.api().with_token(client.token)
}

async fn find_log(server: &TestServer, event: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    eventually(&format!("a {event} log line"), || {
        let hit = server
            .logs()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|v| v["event"] == event && pred(v));
        let done = hit.is_some();
        found = hit;
        async move { done }
    })
    .await;
    found.expect("found")
}

/// Runs every check against a server started with [`options`]; the reload check last, since
/// it rewrites the file (and restores it).
pub async fn run_all(server: &TestServer, file: &AuthFile) {
    hash_token_reads_one_line(server).await;
    ops_surfaces_need_a_known_token(server).await;
    browser_preflights_need_no_token(server).await;
    every_v1_route_needs_a_known_token(server).await;
    hostile_authorization_headers_are_unauthorized(server).await;
    the_admin_token_is_for_r1_only(server).await;
    sessions_belong_to_the_client_that_opened_them(server).await;
    keys_outside_the_prefixes_are_forbidden(server).await;
    r1_needs_an_admin_client_or_the_admin_token(server).await;
    l7_names_holders_by_holder_id(server).await;
    refusals_are_counted_and_logged_without_credentials(server).await;
    sighup_reload_adds_and_removes_clients(server, file).await;
    a_token_is_rotated_without_an_outage(server, file).await;
    no_log_line_or_metric_shows_a_session_id(server).await;
}

/// `lock-server hash-token`: one line from stdin (its line end not part of the token) → the
/// SHA-256 in lowercase hex; an empty or multi-word token is refused.
pub async fn hash_token_reads_one_line(_server: &TestServer) {
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    assert_eq!(hash_token_output("abc\n").as_deref(), Some(abc));
    assert_eq!(hash_token_output("abc\r\n").as_deref(), Some(abc));
    assert_eq!(hash_token_output("abc").as_deref(), Some(abc));
    for bad in ["", "\n", "a b\n", "abc\n\n", "ü\n"] {
        assert_eq!(hash_token_output(bad), None, "{bad:?} must be refused");
    }
}

/// `/healthz` is open; `/metrics` and `/openapi.json` need a known token (a client's or the
/// admin token) without `--public-ops`.
pub async fn ops_surfaces_need_a_known_token(server: &TestServer) {
    let anyone = server.api();
    assert_eq!(anyone.raw("GET", "/healthz", None, &[]).await.status, 200);
    for path in ["/metrics", "/openapi.json"] {
        let reply = anyone.raw("GET", path, None, &[]).await;
        reply.assert_error(401, "UNAUTHORIZED");
        for token in [ALPHA.token, ADMIN_TOKEN] {
            let reply = anyone.with_token(token).raw("GET", path, None, &[]).await;
            assert_eq!(reply.status, 200, "{path} with a known token: {reply:?}");
        }
    }
}

/// A browser sends no `Authorization` header on a CORS preflight, so the preflight of a
/// request that will carry one is answered without a token, allowing that header to the
/// configured origin only.
pub async fn browser_preflights_need_no_token(server: &TestServer) {
    let http = reqwest::Client::new();
    for origin in [CORS_ORIGIN, "http://evil.example"] {
        let answer = http
            .request(
                reqwest::Method::OPTIONS,
                format!("{}{}", server.base_url(), paths::SESSIONS),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
            .await
            .expect("preflight");
        let header = |name: &str| {
            answer
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_ascii_lowercase)
        };
        if origin == CORS_ORIGIN {
            assert!(answer.status().is_success(), "preflight: {answer:?}");
            assert_eq!(
                header("access-control-allow-origin").as_deref(),
                Some(origin)
            );
            let allowed = header("access-control-allow-headers").unwrap_or_default();
            assert!(allowed.contains("authorization"), "{allowed}");
        } else {
            assert_eq!(header("access-control-allow-origin"), None, "{origin}");
        }
    }
}

/// Every `/v1` route, called without a token or with an unknown one, is 401 UNAUTHORIZED
/// with `WWW-Authenticate: Bearer`, before its body is even parsed; the session, lock and
/// ledger it named are untouched.
pub async fn every_v1_route_needs_a_known_token(server: &TestServer) {
    let alpha = as_client(server, ALPHA);
    let key = scoped("alpha/", "needs-token");
    let s = open(&alpha, "victim").await;
    let grant = alpha.acquire_ok(&key, &s.session_id, 60_000).await;
    let sid = s.session_id.as_str();
    let token = grant.fencing_token;
    let routes: Vec<(&str, String, Option<Value>)> = vec![
        ("POST", paths::SESSIONS.to_string(), Some(json!({}))),
        ("POST", paths::heartbeat(&s.holder_id), None),
        ("DELETE", paths::session(&s.holder_id), None),
        ("GET", paths::session(&s.holder_id), None),
        (
            "POST",
            paths::acquire(&key),
            Some(json!({ "sessionId": sid })),
        ),
        (
            "POST",
            paths::release(&key),
            Some(json!({ "fencingToken": token })),
        ),
        ("GET", paths::lock(&key), None),
        ("POST", paths::revoke(&key), Some(json!({ "reason": "x" }))),
        (
            "POST",
            paths::ledger(&key),
            Some(json!({ "fencingToken": token, "entry": "x" })),
        ),
        ("GET", paths::ledger(&key), None),
        (
            "POST",
            paths::unfenced_ledger(&key),
            Some(json!({ "fencingToken": token, "entry": "x" })),
        ),
        ("GET", paths::unfenced_ledger(&key), None),
        ("POST", "/v1/locks//acquire".to_string(), Some(json!({}))),
        (
            "POST",
            "/v1/demo/unfenced-ledger/".to_string(),
            Some(json!({})),
        ),
    ];
    let nobody = server.api();
    let stranger = server.api().with_token("not-a-known-token");
    for (method, path, body) in &routes {
        for api in [&nobody, &stranger] {
            let body = body.as_ref().map(|b| b.to_string().into_bytes());
            let reply = api.raw(method, path, body, &[]).await;
            reply.assert_error(401, "UNAUTHORIZED");
            assert_eq!(
                reply.www_authenticate.as_deref(),
                Some("Bearer"),
                "{reply:?}"
            );
        }
    }
    // Authentication comes before the body: malformed JSON is still 401, not 400.
    nobody
        .raw(
            "POST",
            &paths::acquire(&key),
            Some(b"{not json".to_vec()),
            &[],
        )
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_untouched(&alpha, sid, &key, token).await;
}

/// The victim's session is alive, still holds `key` with `token`, and the key's ledgers
/// (fenced and unfenced) are empty.
async fn assert_untouched(owner: &Api, session_id: &str, key: &str, token: u64) {
    let status: SessionStatus = owner.session_status(session_id).await.parse();
    let held: Vec<u64> = status
        .locks
        .iter()
        .filter(|l| l.key == key)
        .map(|l| l.fencing_token)
        .collect();
    assert_eq!(held, [token], "the victim still holds {key:?}");
    let state: LockState = l7(owner, key).await.parse();
    assert_eq!(state.holder.map(|h| h.fencing_token), Some(token));
    assert!(owner.ledger_read(key).await.entries.is_empty());
    assert!(owner.unfenced_read(key).await.entries.is_empty());
}

/// Anything but exactly one `Authorization: Bearer <known token>` is unauthorized: no
/// token, other schemes, extra words, another case, the token's hash, a huge token,
/// non-ASCII bytes, two headers (even two good ones). A head over 64 KiB is 431. The
/// victim's session answers none of them, and the server lives on.
pub async fn hostile_authorization_headers_are_unauthorized(server: &TestServer) {
    let alpha = as_client(server, ALPHA);
    let key = scoped("alpha/", "hostile");
    let s = open(&alpha, "victim").await;
    let grant = alpha.acquire_ok(&key, &s.session_id, 60_000).await;
    let path = paths::session(&s.holder_id);
    let good = format!("Bearer {}", ALPHA.token);
    let huge = format!("Bearer {}", "a".repeat(4096));
    let with_suffix = format!("{good} extra");
    let upper = format!("Bearer {}", ALPHA.token.to_uppercase());
    let hash = format!("Bearer {}", hash_token(ALPHA.token));
    let basic = format!("Basic {}", ALPHA.token);
    let anyone = server.api();
    for header in [
        "Bearer",
        "Bearer ",
        "bearer",
        "Token x",
        basic.as_str(),
        with_suffix.as_str(),
        upper.as_str(),
        hash.as_str(),
        huge.as_str(),
    ] {
        anyone
            .raw("GET", &path, None, &[("authorization", header)])
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    for pair in [
        [good.as_str(), "Bearer nope"],
        [good.as_str(), good.as_str()],
    ] {
        let headers = [("authorization", pair[0]), ("authorization", pair[1])];
        anyone
            .raw("GET", &path, None, &headers)
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    // Bytes reqwest would refuse to send: raw HTTP.
    let non_ascii = raw_request(server.addr(), &path, b"Bearer alpha-token-\xc3\xbc");
    assert!(non_ascii.starts_with("HTTP/1.1 401"), "{non_ascii:.200}");
    let oversized = format!("Bearer {}", "b".repeat(70 * 1024));
    let answer = raw_request(server.addr(), &path, oversized.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.200}");
    assert_untouched(&alpha, &s.session_id, &key, grant.fencing_token).await;
}

/// `GET path` with `Authorization: <value>` (any bytes) on a fresh connection; the answer.
fn raw_request(addr: &str, path: &str, value: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(EVENTUALLY))
        .expect("read timeout");
    let mut head =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: ")
            .into_bytes();
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n\r\n");
    // The server may close before it read everything; what it answered is still there.
    let _ = stream.write_all(&head);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The admin token opens R1 and nothing else: 403 FORBIDDEN on the client surfaces.
pub async fn the_admin_token_is_for_r1_only(server: &TestServer) {
    let admin = server.api().with_token(ADMIN_TOKEN);
    admin
        .open_session_with(json!({}))
        .await
        .assert_error(403, "FORBIDDEN");
    admin
        .lock_state_reply(&scoped("alpha/", "admin"))
        .await
        .assert_error(403, "FORBIDDEN");
    admin
        .unfenced_append(&scoped("alpha/", "admin"), 1, "x")
        .await
        .assert_error(403, "FORBIDDEN");
}

/// A session belongs to the client that opened it. Another client (an admin one too) naming
/// it on L2, L3, L4 or L5 gets 404 SESSION_NOT_FOUND with exactly the body an unknown id
/// gets, and so does anyone trying the session's public holder id as a session id. The
/// owner's session and lock are untouched.
pub async fn sessions_belong_to_the_client_that_opened_them(server: &TestServer) {
    let alpha = as_client(server, ALPHA);
    let key = scoped("alpha/", "owned");
    let s = open(&alpha, "victim").await;
    let grant = alpha.acquire_ok(&key, &s.session_id, 60_000).await;
    for intruder in [BETA, OPS] {
        let api = as_client(server, intruder);
        let own_key = scoped(intruder.prefixes[0], "intruder");
        for id in [s.session_id.as_str(), s.holder_id.as_str()] {
            let answers = [
                (api.heartbeat(id).await, api.heartbeat(UNKNOWN_ID).await),
                (
                    api.session_status(id).await,
                    api.session_status(UNKNOWN_ID).await,
                ),
                (
                    api.acquire(&own_key, id, None, None).await,
                    api.acquire(&own_key, UNKNOWN_ID, None, None).await,
                ),
                (
                    api.close_session(id).await,
                    api.close_session(UNKNOWN_ID).await,
                ),
            ];
            for (theirs, unknown) in answers {
                theirs.assert_error(404, "SESSION_NOT_FOUND");
                assert_eq!(
                    theirs.body, unknown.body,
                    "no oracle: another client's session reads as an unknown one"
                );
            }
        }
    }
    // The holder id is not a session id for its owner either.
    alpha
        .heartbeat(&s.holder_id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    assert_untouched(&alpha, &s.session_id, &key, grant.fencing_token).await;
    alpha.heartbeat_ok(&s.session_id).await;
}

/// A key outside the client's `keyPrefixes` is 403 FORBIDDEN on L4, L6, L7 and both demo
/// ledgers (fenced and unfenced), whatever session or token the request names (another client's included). The
/// prefix is a plain byte prefix: `alphabet` is not under `alpha/`. The owner's lock and
/// ledger are untouched.
pub async fn keys_outside_the_prefixes_are_forbidden(server: &TestServer) {
    let (alpha, beta) = (as_client(server, ALPHA), as_client(server, BETA));
    let theirs = scoped("beta/", "scope");
    let sb = open(&beta, "victim").await;
    let grant = beta.acquire_ok(&theirs, &sb.session_id, 60_000).await;
    let sa = open(&alpha, "intruder").await;
    for session in [&sa.session_id, &sb.session_id] {
        alpha
            .acquire(&theirs, session, None, None)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    alpha
        .release(&theirs, grant.fencing_token, Some(&sb.session_id))
        .await
        .assert_error(403, "FORBIDDEN");
    l7(&alpha, &theirs).await.assert_error(403, "FORBIDDEN");
    alpha
        .ledger_append(&theirs, grant.fencing_token, "forged")
        .await
        .assert_error(403, "FORBIDDEN");
    alpha
        .ledger_read_reply(&theirs)
        .await
        .assert_error(403, "FORBIDDEN");
    alpha
        .unfenced_append(&theirs, grant.fencing_token, "forged")
        .await
        .assert_error(403, "FORBIDDEN");
    alpha
        .unfenced_read_reply(&theirs)
        .await
        .assert_error(403, "FORBIDDEN");
    alpha
        .unfenced_append(&scoped("alphabet/", "near"), 1, "forged")
        .await
        .assert_error(403, "FORBIDDEN");
    alpha
        .acquire(&scoped("alphabet/", "near"), &sa.session_id, None, None)
        .await
        .assert_error(403, "FORBIDDEN");
    assert_untouched(&beta, &sb.session_id, &theirs, grant.fencing_token).await;
    // Within the prefixes everything works: alpha's own key, beta's second prefix.
    alpha
        .acquire_ok(&scoped("alpha/", "mine"), &sa.session_id, 10_000)
        .await;
    let shared = scoped("shared/", "second-prefix");
    let g = beta.acquire_ok(&shared, &sb.session_id, 10_000).await;
    assert_eq!(
        beta.ledger_append(&shared, g.fencing_token, "ok")
            .await
            .status,
        204
    );
    assert!(
        !beta
            .unfenced_append_ok(&shared, g.fencing_token, "ok")
            .await
    );
    assert_eq!(beta.unfenced_read(&shared).await.entries.len(), 1);
    assert_eq!(
        beta.release(&shared, g.fencing_token, None).await.status,
        204
    );
}

/// R1: no token or an unknown one 401; a non-admin client 403; an admin client outside its
/// prefixes 403 (nothing revoked by any of them); an admin client within its prefixes and
/// the admin token 200.
pub async fn r1_needs_an_admin_client_or_the_admin_token(server: &TestServer) {
    let beta = as_client(server, BETA);
    let key = scoped("beta/", "revoke");
    let s = open(&beta, "victim").await;
    let grant = beta.acquire_ok(&key, &s.session_id, 60_000).await;
    let anyone = server.api();
    let bearer = |token: &str| format!("Bearer {token}");
    for (auth, status, code) in [
        (None, 401, "UNAUTHORIZED"),
        (Some(bearer("unknown")), 401, "UNAUTHORIZED"),
        (Some(bearer(BETA.token)), 403, "FORBIDDEN"),
        (Some(bearer(ALPHA.token)), 403, "FORBIDDEN"),
        (Some(bearer(AUDITOR.token)), 403, "FORBIDDEN"),
    ] {
        anyone
            .revoke_with_auth(&key, "try", auth.as_deref())
            .await
            .assert_error(status, code);
    }
    assert_untouched(&beta, &s.session_id, &key, grant.fencing_token).await;
    let reply = anyone
        .revoke_with_auth(&key, "ops", Some(&bearer(OPS.token)))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["revokedToken"], grant.fencing_token);
    let again = beta.acquire_ok(&key, &s.session_id, 60_000).await;
    let reply = anyone
        .revoke_with_auth(&key, "admin token", Some(&bearer(ADMIN_TOKEN)))
        .await;
    assert_eq!(reply.body["revokedToken"], again.fencing_token, "{reply:?}");
    let alpha = as_client(server, ALPHA);
    let own = scoped("alpha/", "audited");
    let sa = open(&alpha, "audited").await;
    let g = alpha.acquire_ok(&own, &sa.session_id, 60_000).await;
    let reply = anyone
        .revoke_with_auth(&own, "audit", Some(&bearer(AUDITOR.token)))
        .await;
    assert_eq!(reply.body["revokedToken"], g.fencing_token, "{reply:?}");
}

/// L7's holder is `{holderId, owner, fencingToken, remainingMillis}`: the holder id L1 gave
/// the session (never its id), and the owner label it was opened with.
pub async fn l7_names_holders_by_holder_id(server: &TestServer) {
    let (alpha, ops) = (as_client(server, ALPHA), as_client(server, OPS));
    let key = scoped("alpha/", "holder");
    let s = open(&alpha, "alpha-worker-7").await;
    let grant = alpha.acquire_ok(&key, &s.session_id, 60_000).await;
    for api in [&alpha, &ops] {
        let reply = l7(api, &key).await;
        let holder = &reply.body["holder"];
        assert_eq!(holder["holderId"], s.holder_id.as_str(), "{reply:?}");
        assert_eq!(holder["owner"], "alpha-worker-7");
        assert_eq!(holder["fencingToken"], grant.fencing_token);
        assert!(holder["remainingMillis"].as_u64().is_some_and(|m| m > 0));
        let mut fields: Vec<&str> = holder
            .as_object()
            .expect("holder object")
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            ["fencingToken", "holderId", "owner", "remainingMillis"]
        );
    }
    // Holder ids are per session.
    let other = open(&alpha, "other").await;
    assert_ne!(other.holder_id, s.holder_id);
}

/// `lock_requests_refused_total` counts 401s and 403s (its only label is `outcome`); the
/// `request_refused` log line names the client and route, and no log line carries a token.
pub async fn refusals_are_counted_and_logged_without_credentials(server: &TestServer) {
    let ops = as_client(server, OPS);
    let count = |text: &str, outcome: &str| -> u64 {
        let prefix = format!("lock_requests_refused_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    };
    let before = ops.metrics().await;
    server
        .api()
        .open_session_with(json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    let alpha = as_client(server, ALPHA);
    l7(&alpha, &scoped("beta/", "count"))
        .await
        .assert_error(403, "FORBIDDEN");
    let after = ops.metrics().await;
    for outcome in ["unauthorized", "forbidden"] {
        assert!(
            count(&after, outcome) > count(&before, outcome),
            "{outcome} not counted"
        );
    }
    for line in after.lines().filter(|l| !l.starts_with('#')) {
        if let Some(labels) = line.split('{').nth(1) {
            // `mode` (a closed set of two) is the hold gauge's only label, `reason` (a closed
            // set of three) the watch resets', `route` and `reason` the store errors'.
            let holds_by_mode = line.starts_with("lock_holds{") && labels.starts_with("mode=");
            let resets_by_reason =
                line.starts_with("lock_watch_resets_total{") && labels.starts_with("reason=");
            let store_errors = line.starts_with("lock_store_errors_total{")
                && labels.starts_with("route=")
                && labels.contains(",reason=");
            assert!(
                labels.starts_with("outcome=")
                    || labels.starts_with("le=")
                    || holds_by_mode
                    || resets_by_reason
                    || store_errors,
                "label beyond the budget: {line}"
            );
        }
    }
    find_log(server, "request_refused", |v| {
        v["status"] == 403 && v["client"] == "alpha" && v["route"] == "/v1/locks/{key}"
    })
    .await;
    let tokens = [
        ALPHA.token,
        BETA.token,
        OPS.token,
        AUDITOR.token,
        GAMMA.token,
        ADMIN_TOKEN,
    ];
    for line in server.logs() {
        for token in tokens {
            assert!(!line.contains(token), "a token in a log line: {line}");
        }
    }
}

/// SIGHUP re-reads the auth file: a client added can call at once, a client removed is 401
/// (its sessions with it); a broken file is logged and the clients in force stay. The file
/// is restored at the end.
pub async fn sighup_reload_adds_and_removes_clients(server: &TestServer, file: &AuthFile) {
    let (beta, gamma) = (as_client(server, BETA), as_client(server, GAMMA));
    gamma
        .open_session_with(json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    let sb = open(&beta, "removed").await;
    file.write(&[ALPHA, OPS, AUDITOR, GAMMA]);
    server.hangup();
    eventually("gamma is accepted after the reload", || async {
        gamma.open_session_with(json!({})).await.status == 201
    })
    .await;
    beta.open_session_with(json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    beta.heartbeat(&sb.session_id)
        .await
        .assert_error(401, "UNAUTHORIZED");
    find_log(server, "auth_reloaded", |v| v["clients"] == 4).await;

    file.write_raw("{\"clients\": [");
    server.hangup();
    find_log(server, "auth_reload_failed", |_| true).await;
    assert_eq!(gamma.open_session_with(json!({})).await.status, 201);
    assert_eq!(
        as_client(server, ALPHA)
            .open_session_with(json!({}))
            .await
            .status,
        201
    );

    file.write(&CLIENTS);
    server.hangup();
    eventually("beta is back after the restore", || async {
        beta.heartbeat(&sb.session_id).await.status == 200
    })
    .await;
}

/// BETA's next token, in the rotation check.
const BETA_NEXT: &str = "beta-token-next-3c7a90d2";

/// A token rotated without an outage: the client lists its old and new token, so callers on
/// either are served, as the same client (a session opened with the old token is heartbeat
/// and its lock released with the new one); then only the new one, and the old one is 401,
/// logged at info as client `unknown`. A reload that fails is counted and logged at warn.
/// The file is restored at the end.
pub async fn a_token_is_rotated_without_an_outage(server: &TestServer, file: &AuthFile) {
    let old = as_client(server, BETA);
    let next = server.api().with_token(BETA_NEXT);
    let s = open(&old, "rotating").await;
    let key = scoped("beta/", "rotation");
    let token = old
        .acquire_ok(&key, &s.session_id, 60_000)
        .await
        .fencing_token;

    file.write_rotating(&CLIENTS, &[("beta", &[BETA.token, BETA_NEXT])]);
    server.hangup();
    eventually("the next token is accepted after the reload", || async {
        next.heartbeat(&s.session_id).await.status == 200
    })
    .await;
    assert_eq!(
        old.heartbeat(&s.session_id).await.status,
        200,
        "the old token still serves"
    );
    let state: LockState = l7(&next, &key).await.parse();
    let held = state.holder.as_ref().map(|h| h.fencing_token);
    assert_eq!(
        held,
        Some(token),
        "the old token's hold, seen with the new: {state:?}"
    );

    let failures_before = reload_failures(server).await;
    file.write_raw("{\"clients\": [");
    server.hangup();
    find_log(server, "auth_reload_failed", |v| v["level"] == "WARN").await;
    eventually("the failed reload is counted", || async {
        reload_failures(server).await > failures_before
    })
    .await;
    assert_eq!(
        next.heartbeat(&s.session_id).await.status,
        200,
        "the clients in force stay"
    );

    file.write_rotating(&CLIENTS, &[("beta", &[BETA_NEXT])]);
    server.hangup();
    eventually("the old token is refused once dropped", || async {
        old.heartbeat(&s.session_id).await.status == 401
    })
    .await;
    find_log(server, "request_refused", |v| {
        v["status"] == 401 && v["client"] == "unknown" && v["level"] == "INFO"
    })
    .await;
    let released = next.release(&key, token, Some(&s.session_id)).await;
    assert_eq!(
        released.status, 204,
        "the session outlives its token: {released:?}"
    );
    for line in server.logs() {
        assert!(!line.contains(BETA_NEXT), "a token in a log line: {line}");
    }

    file.write(&CLIENTS);
    server.hangup();
    eventually("the old token is back after the restore", || async {
        old.heartbeat(&s.session_id).await.status == 200
    })
    .await;
}

/// `lock_auth_reload_failures_total` as the ops client reads it.
async fn reload_failures(server: &TestServer) -> u64 {
    let text = as_client(server, OPS).metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("lock_auth_reload_failures_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no lock_auth_reload_failures_total in\n{text}"))
}

/// C4: no log line and no metric carries any session id the suite opened.
pub async fn no_log_line_or_metric_shows_a_session_id(server: &TestServer) {
    let ids = session_ids();
    assert!(ids.len() >= 5, "the suite opened sessions: {}", ids.len());
    let metrics = as_client(server, OPS).metrics().await;
    for id in &ids {
        assert!(!metrics.contains(id.as_str()), "session id in /metrics");
        for line in server.logs() {
            assert!(
                !line.contains(id.as_str()),
                "session id in a log line: {line}"
            );
        }
    }
}

/// A session's holder id is the same after a restart (the key lives in the store), and the
/// session still belongs to its client. Restarts the server (kill -9).
pub async fn holder_ids_survive_a_restart(server: &mut TestServer) {
    let key = scoped("alpha/", "restart");
    let s = open(&as_client(server, ALPHA), "restarted").await;
    as_client(server, ALPHA)
        .acquire_ok(&key, &s.session_id, 60_000)
        .await;
    tokio::task::block_in_place(|| server.restart());
    let alpha = as_client(server, ALPHA);
    let state: LockState = l7(&alpha, &key).await.parse();
    assert_eq!(state.holder.map(|h| h.holder_id), Some(s.holder_id.clone()));
    alpha.heartbeat_ok(&s.session_id).await;
    as_client(server, BETA)
        .heartbeat(&s.session_id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
}

/// Protected mode: without an auth file the server refuses to listen on a non-loopback
/// address, with one line on stderr naming `--allow-unauthenticated`; with that flag, or
/// with an auth file, it starts. `backend` carries the backend flags.
pub fn protected_mode(backend: &ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(server_binary())
        .args(["--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .args(&backend.extra_args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lock-server");
    let deadline = Instant::now() + EVENTUALLY;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("an open server kept running on 0.0.0.0");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        !status.success(),
        "an open server on 0.0.0.0 exited cleanly"
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(
        lines[0].starts_with("lock-server: protected mode"),
        "{stderr}"
    );
    assert!(lines[0].contains("--allow-unauthenticated"), "{stderr}");
    assert!(lines[0].contains("--auth-file"), "{stderr}");
    let launch = |args: &[String]| {
        Launch::new(&server_binary(), dir.path())
            .host("0.0.0.0")
            .args(backend.extra_args.iter().cloned())
            .args(args.iter().cloned())
            .start()
    };
    let open = launch(&["--allow-unauthenticated".to_string()]).expect("opt-out starts");
    assert!(open.addr().starts_with("0.0.0.0:"), "{}", open.addr());
    drop(open);
    let file = AuthFile::new(&CLIENTS);
    let args = ["--auth-file".to_string(), file.path().display().to_string()];
    let authenticated = launch(&args).expect("an auth file starts");
    assert_eq!(
        crate::launcher::http_get_status(authenticated.addr(), "/v1/locks/k"),
        Some(401)
    );
}

/// `--public-ops`: `/metrics` and `/openapi.json` need no token, `/v1` still does.
/// `options` is [`options`] plus the backend flags.
pub async fn public_ops(options: ServerOptions) {
    let server = TestServer::start(options.args(["--public-ops"]));
    let anyone = server.api();
    for path in ["/metrics", "/openapi.json"] {
        assert_eq!(
            anyone.raw("GET", path, None, &[]).await.status,
            200,
            "{path}"
        );
    }
    anyone
        .open_session_with(json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
}
