//! lock-server on etcd as production runs it: `https://` endpoints with the CA, a client
//! certificate (etcd `--client-cert-auth`) and etcd auth (a user whose role covers the
//! prefix only, its password read from a file). A replica with working credentials serves;
//! one whose password, role or CA is wrong refuses to start with one `fatal` line naming
//! the cause and exit code 1, as does one that reaches no member. The password never
//! appears in any output.

use lock_e2e::contract::unique_key;
use lock_e2e::etcd::free_port;
use lock_e2e::etcd_secure::{run_until_exit, Exited, SecureEtcd, APP_USER, OUTSIDER_USER};
use lock_e2e::{ServerOptions, TestServer};

/// Asserts a start refused with exit 1, one `fatal` line containing `cause`, and no
/// `password` anywhere in the output.
fn assert_refused(exited: &Exited, cause: &str, password: &str) {
    assert_eq!(exited.status.code(), Some(1), "{}", exited.output);
    let fatal = exited
        .fatal_line()
        .unwrap_or_else(|| panic!("no fatal line:\n{}", exited.output));
    assert!(
        fatal.to_ascii_lowercase().contains(cause),
        "fatal line does not name {cause:?}: {fatal}"
    );
    assert!(!exited.output.contains(password), "{}", exited.output);
    assert!(
        !exited.output.contains(r#""event":"listening""#),
        "{}",
        exited.output
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_cert_and_etcd_auth_serve_and_misconfiguration_refuses_to_start() {
    let secure = SecureEtcd::start();
    let password = secure.app_password.clone();

    // Working credentials: grants and releases over the raw HTTP API.
    let good_file = secure.password_file("app", &password, 0o600);
    let server = TestServer::start(
        ServerOptions::new().args(secure.server_args(APP_USER, &good_file, true)),
    );
    let api = server.api();
    let session = api.open_session(30_000).await.session_id;
    let key = unique_key("secure");
    let grant = api.acquire_ok(&key, &session, 30_000).await;
    assert_eq!(
        api.release(&key, grant.fencing_token, Some(&session))
            .await
            .status,
        204
    );
    let again = api.acquire_ok(&key, &session, 30_000).await;
    assert!(again.fencing_token > grant.fencing_token);
    let logs = server.logs().join("\n");
    assert!(!logs.contains(&password), "password in the logs:\n{logs}");
    assert!(
        !logs.contains("etcd_password_file_open"),
        "a 0600 file warned:\n{logs}"
    );
    // What the server wrote really is in etcd, under the prefix, through the TLS + auth path.
    let keys = secure
        .etcd
        .etcdctl(&["get", "/secure/", "--prefix", "--keys-only"])
        .expect("etcdctl get");
    assert!(keys.contains("/secure/l/"), "{keys}");
    drop(server);

    // A member down at start (listed first) is left out with a warning; the replica serves
    // through the one that answers.
    let mut args = secure.server_args(APP_USER, &good_file, true);
    let at = args.iter().position(|a| a == "--etcd-endpoints").unwrap() + 1;
    args[at] = format!("https://127.0.0.1:{},{}", free_port(), args[at]);
    let server = TestServer::start(ServerOptions::new().args(args));
    let api = server.api();
    let session = api.open_session(30_000).await.session_id;
    api.acquire_ok(&unique_key("secure-skip"), &session, 30_000)
        .await;
    let logs = server.logs().join("\n");
    assert!(logs.contains("etcd_endpoint_skipped"), "{logs}");
    assert!(!logs.contains(&password), "password in the logs:\n{logs}");
    drop(server);

    // A wrong password, in a file others may read: a warning, then authentication refused.
    let wrong = "not-the-password";
    let wrong_file = secure.password_file("wrong", wrong, 0o644);
    let exited = run_until_exit(&secure.server_args(APP_USER, &wrong_file, true));
    assert_refused(&exited, "authentication", wrong);
    assert!(
        exited.output.contains("etcd_password_file_open"),
        "no warning for a 0644 password file:\n{}",
        exited.output
    );

    // A user whose role covers another prefix only.
    let outsider_password = secure.outsider_password.clone();
    let outsider_file = secure.password_file("outsider", &outsider_password, 0o600);
    let exited = run_until_exit(&secure.server_args(OUTSIDER_USER, &outsider_file, true));
    assert_refused(&exited, "permission", &outsider_password);

    // No CA: the member's certificate is not trusted, the handshake fails.
    let exited = run_until_exit(&secure.server_args(APP_USER, &good_file, false));
    assert_refused(&exited, "tls", &password);
}

#[test]
fn a_replica_that_reaches_no_member_refuses_to_start() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let args: Vec<String> = ["--backend", "etcd", "--etcd-timeout-ms", "500"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--etcd-endpoints".to_owned(), endpoint])
        .collect();
    let exited = run_until_exit(&args);
    assert_refused(&exited, "unreachable", "no password here");
}
