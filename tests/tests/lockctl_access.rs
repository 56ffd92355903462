//! lockctl's way in: over TLS with `LOCK_CA_CERT`, with an auth-file client's token in
//! `LOCK_TOKEN`, `status` and `revoke`; and every refusal (unknown CA, wrong or missing
//! token, a key outside the client's prefixes, a non-admin revoke) a one-line message with
//! the "refused" status, never a panic.

mod lockctl_kit;

use std::sync::Arc;

use lock_e2e::auth_contract::{self, AuthFile, ALPHA, CLIENTS, OPS};
use lock_e2e::tls::TestPki;
use lock_e2e::{ServerOptions, TestServer, Tls};
use lockctl_kit::{line_in, start, Dir, LOST, REFUSED, USAGE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_the_servers_ca() {
    let server = TestServer::start(ServerOptions::new().tls(Tls::Pki(Arc::new(TestPki::new()))));
    let url = server.base_url();
    assert!(url.starts_with("https://"), "{url}");
    let ca = server.tls_ca().expect("a TLS server");
    let ca = ca.to_str().unwrap();
    let dir = Dir::new();
    let job = [
        "exec",
        "tls/job",
        "--",
        "sh",
        "-c",
        "echo $LOCK_FENCING_TOKEN > token",
    ];

    let mut trusted = start(&dir, "trusted", &url, &[("LOCK_CA_CERT", ca)], &job);
    assert_eq!(trusted.code().await, 0, "{}", trusted.stderr());
    let token: u64 = dir.lines("token")[0]
        .parse()
        .expect("the token reached the command");
    assert!(token > 0);

    let mut status = start(
        &dir,
        "status",
        &url,
        &[("LOCK_CA_CERT", ca)],
        &["status", "tls/job", "--json"],
    );
    assert_eq!(status.code().await, 0, "{}", status.stderr());
    let state: lock_api::LockState = serde_json::from_str(status.stdout().trim()).expect("L7 JSON");
    assert!(state.holder.is_none(), "released: {state:?}");

    std::fs::remove_file(dir.path("token")).unwrap();
    let mut untrusted = start(&dir, "untrusted", &url, &[], &job);
    assert_eq!(untrusted.code().await, REFUSED, "{}", untrusted.stderr());
    untrusted.assert_clear_failure("certificate");
    assert!(!dir.path("token").exists(), "nothing ran");

    let missing = [("LOCK_CA_CERT", "/nonexistent/ca.pem")];
    let mut unreadable = start(&dir, "unreadable", &url, &missing, &job);
    assert_eq!(unreadable.code().await, USAGE, "{}", unreadable.stderr());
    unreadable.assert_clear_failure("LOCK_CA_CERT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_auth_file_token_and_refusals_in_words() {
    let file = AuthFile::new(&CLIENTS);
    let server = TestServer::start(auth_contract::options(&file));
    let url = server.base_url();
    let dir = Dir::new();
    let alpha = [("LOCK_TOKEN", ALPHA.token)];
    let job = |key: &'static str| ["exec", key, "--", "sh", "-c", "echo $LOCK_KEY >> ran"];

    let mut allowed = start(&dir, "allowed", &url, &alpha, &job("alpha/job"));
    assert_eq!(allowed.code().await, 0, "{}", allowed.stderr());
    assert_eq!(dir.lines("ran"), ["alpha/job"]);

    let wrong = [("LOCK_TOKEN", "not-a-token-of-this-server")];
    let mut unknown = start(&dir, "unknown", &url, &wrong, &job("alpha/job"));
    assert_eq!(unknown.code().await, REFUSED, "{}", unknown.stderr());
    unknown.assert_clear_failure("refused the token");

    let mut none = start(&dir, "none", &url, &[], &job("alpha/job"));
    assert_eq!(none.code().await, REFUSED, "{}", none.stderr());
    none.assert_clear_failure("refused the token");

    let mut outside = start(&dir, "outside", &url, &alpha, &job("beta/job"));
    assert_eq!(outside.code().await, REFUSED, "{}", outside.stderr());
    outside.assert_clear_failure("forbidden");

    let mut malformed = start(
        &dir,
        "malformed",
        &url,
        &[("LOCK_TOKEN", "two words")],
        &job("alpha/job"),
    );
    assert_eq!(malformed.code().await, USAGE, "{}", malformed.stderr());
    malformed.assert_clear_failure("LOCK_TOKEN");
    assert_eq!(dir.lines("ran"), ["alpha/job"], "no refused command ran");

    let mut status = start(&dir, "status", &url, &alpha, &["status", "alpha/job"]);
    assert_eq!(status.code().await, 0, "{}", status.stderr());
    assert!(
        status.stdout().contains("state    free"),
        "{}",
        status.stdout()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_needs_an_admin_token_and_stops_the_holder() {
    let file = AuthFile::new(&CLIENTS);
    let server = TestServer::start(auth_contract::options(&file));
    let url = server.base_url();
    let dir = Dir::new();
    let script = "echo \"start $LOCK_FENCING_TOKEN\" >> log; while :; do sleep 0.02; done";
    let args = [
        "exec",
        "alpha/held",
        "--ttl-ms=1500",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut holder = start(&dir, "holder", &url, &[("LOCK_TOKEN", ALPHA.token)], &args);
    let started = line_in(&dir, "log", "start").await;
    let token = started.trim_start_matches("start ");

    let mut status = start(
        &dir,
        "status",
        &url,
        &[("LOCK_TOKEN", ALPHA.token)],
        &["status", "alpha/held"],
    );
    assert_eq!(status.code().await, 0, "{}", status.stderr());
    let shown = status.stdout();
    assert!(shown.contains("state    held exclusive"), "{shown}");
    assert!(shown.contains(&format!("token {token},")), "{shown}");

    let revoke = ["revoke", "alpha/held", "--reason", "maintenance"];
    let mut refused = start(
        &dir,
        "refused",
        &url,
        &[("LOCK_TOKEN", ALPHA.token)],
        &revoke,
    );
    assert_eq!(refused.code().await, REFUSED, "{}", refused.stderr());
    refused.assert_clear_failure("revoking alpha/held");

    let mut admin = start(&dir, "admin", &url, &[("LOCK_TOKEN", OPS.token)], &revoke);
    assert_eq!(admin.code().await, 0, "{}", admin.stderr());
    assert_eq!(
        admin.stdout().trim(),
        format!("alpha/held: revoked token {token} (maintenance)")
    );
    assert_eq!(holder.code().await, LOST, "{}", holder.stderr());
}
