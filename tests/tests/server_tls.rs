//! TLS and HTTP/2 against a real lock-server process: the whole C3 contract over TLS (HTTP/2
//! by ALPN), curl's HTTP/2, the self-signed certificate, and the HTTP/2 connection bounds of
//! C3's Connections rule (idle bound from accept, stream cap, keep-alive pings, header-list
//! cap), each checked with a client that breaks the rule.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_e2e::raw_h2::{
    Next, RawH2, MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE, PING, REFUSED_STREAM, RST_STREAM,
    SETTINGS,
};
use lock_e2e::tls::{client_config, TestPki, ALPN_H2};
use lock_e2e::{contract, ServerOptions, TestServer, Tls};
use serde_json::Value;

/// Bound on every "eventually" (generous: nothing here depends on speed; without the guard
/// under test the awaited close would never come).
const EVENTUALLY: Duration = Duration::from_secs(20);

fn test_ca() -> Tls {
    Tls::Pki(Arc::new(TestPki::new()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_over_tls_and_http2() {
    let mut server = TestServer::start(contract::options().tls(test_ca()));
    assert!(
        server.base_url().starts_with("https://"),
        "{}",
        server.base_url()
    );
    let reply = server.api().raw("GET", "/healthz", None, &[]).await;
    assert_eq!(reply.version, reqwest::Version::HTTP_2, "ALPN picks h2");
    contract::run_all(&server).await;
    // Graceful shutdown over HTTP/2: the waiter's stream is answered, the pooled HTTP/2
    // connection is closed (GOAWAY), the process exits cleanly.
    contract::shutdown_ends_waiters_with_not_leader(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unconfigured_contract_holds_over_tls() {
    let server = TestServer::start(contract::unconfigured_options().tls(test_ca()));
    contract::run_unconfigured(&server).await;
}

/// Debian's curl negotiates HTTP/2 with the test CA, and HTTP/1.1 on the same port when
/// asked; without the CA it refuses the certificate.
#[test]
fn curl_speaks_http2_and_http1_on_one_port() {
    let server = TestServer::start(ServerOptions::new().tls(test_ca()));
    let ca = server.tls_ca().expect("TLS server");
    let url = format!("{}/healthz", server.base_url());
    let curl = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_version}"])
            .args(args)
            .arg(&url)
            .output()
            .expect("run curl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let ca = ca.display().to_string();
    assert_eq!(curl(&["--http2", "--cacert", &ca]), (true, "2".to_owned()));
    assert_eq!(
        curl(&["--http1.1", "--cacert", &ca]),
        (true, "1.1".to_owned())
    );
    let (ok, _) = curl(&["--http2"]);
    assert!(!ok, "a certificate from an unknown CA must be refused");
}

/// `--tls-self-signed` writes a certificate into the data dir on the first start, announces
/// its path and SHA-256 fingerprint (the one openssl computes), and reuses it after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_signed_certificate_is_made_once_and_announced() {
    let mut server = TestServer::start(ServerOptions::new().tls(Tls::SelfSigned));
    let announced = announcements(&server);
    assert_eq!(announced.len(), 1, "{announced:?}");
    let cert = server.tls_ca().expect("TLS server");
    assert_eq!(announced[0]["cert"], cert.display().to_string());
    assert_eq!(announced[0]["created"], true);
    assert_eq!(announced[0]["sha256"], openssl_fingerprint(&cert));
    let reply = server.api().raw("GET", "/healthz", None, &[]).await;
    assert_eq!(
        (reply.status, reply.version),
        (200, reqwest::Version::HTTP_2)
    );

    tokio::task::block_in_place(|| server.restart());
    let announced = announcements(&server);
    assert_eq!(announced.len(), 2, "{announced:?}");
    assert_eq!(announced[1]["created"], false, "reused, not made anew");
    assert_eq!(announced[1]["sha256"], announced[0]["sha256"]);
    let reply = server.api().raw("GET", "/healthz", None, &[]).await;
    assert_eq!(reply.status, 200, "the old certificate still verifies");
}

fn announcements(server: &TestServer) -> Vec<Value> {
    server
        .logs()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["event"] == "tls_self_signed")
        .collect()
}

fn openssl_fingerprint(cert: &std::path::Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .split_once('=')
        .map(|(_, hex)| hex.to_owned())
        .unwrap_or_else(|| panic!("openssl said: {text}"))
}

/// Idle bound of the servers below (short, so the checks are quick).
const IDLE_MS: u64 = 500;

/// With an idle bound of 500 ms, every way of holding a connection without a request in
/// flight ends in a close: no TLS handshake at all, TLS and then silence, the HTTP/2 preface
/// and then silence, an HTTP/2 connection idle after its request, a header block never
/// finished; and on the plain port, prior-knowledge HTTP/2 (h2c) and then silence. The client
/// answers pings, so only the idle bound can close. The server's SETTINGS announce the
/// default stream cap and the header-list cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_closed_after_the_idle_bound() {
    let idle = ["--header-read-timeout-ms".to_owned(), IDLE_MS.to_string()];
    let server = TestServer::start(ServerOptions::new().tls(test_ca()).args(idle.clone()));
    let plain = TestServer::start(ServerOptions::new().args(idle));
    let closed = tokio::task::spawn_blocking(move || {
        let addr = server.addr().to_owned();
        let deadline = || Instant::now() + EVENTUALLY;
        let mut no_handshake = lock_e2e::tls::RawConn::connect(&addr, None, &[]).unwrap();
        let no_handshake = contract::closed_within(&mut no_handshake, EVENTUALLY, false);
        let mut tls_only = server.connect_raw(ALPN_H2).unwrap();
        let tls_only = contract::closed_within(&mut tls_only, EVENTUALLY, false);

        let mut preface_only = h2_connection(&server);
        let settings = first_frame(&mut preface_only);
        assert_eq!(settings.setting(MAX_CONCURRENT_STREAMS), Some(512));
        assert_eq!(settings.setting(MAX_HEADER_LIST_SIZE), Some(64 * 1024));
        let preface_only = preface_only.closed_by(deadline(), true);

        let mut after_request = h2_connection(&server);
        after_request.get(1, "/healthz").unwrap();
        let after_request = after_request.closed_by(deadline(), true);

        // Any frame but CONTINUATION after an open header block is a protocol error that
        // closes the connection at once: the server's SETTINGS are acknowledged first, then
        // nothing at all is sent.
        let mut unfinished = h2_connection(&server);
        first_frame(&mut unfinished);
        unfinished.unfinished_get(1, "/healthz").unwrap();
        let unfinished = unfinished.closed_by(deadline(), false);

        let mut h2c = RawH2::new(plain.connect_raw(&[]).unwrap(), plain.addr());
        h2c.start().unwrap();
        let h2c = h2c.closed_by(deadline(), true);
        [
            ("no TLS handshake", no_handshake),
            ("TLS, then silence", tls_only),
            ("HTTP/2 preface, then silence", preface_only),
            ("HTTP/2, idle after a request", after_request),
            ("HTTP/2 header block never finished", unfinished),
            ("h2c preface on the plain port, then silence", h2c),
        ]
    })
    .await
    .unwrap();
    for (case, closed) in closed {
        assert!(closed, "kept open: {case}");
    }
}

/// A TLS connection with ALPN h2, preface and SETTINGS sent.
fn h2_connection(server: &TestServer) -> RawH2 {
    let conn = server.connect_raw(ALPN_H2).expect("connect");
    assert_eq!(conn.alpn().as_deref(), Some(&b"h2"[..]), "ALPN picks h2");
    let mut h2 = RawH2::new(conn, server.addr());
    h2.start().expect("preface");
    h2
}

fn first_frame(h2: &mut RawH2) -> lock_e2e::raw_h2::Frame {
    match h2.next(Instant::now() + EVENTUALLY, true) {
        Next::Frame(frame) => frame,
        other => panic!("no frame from the server: {other:?}"),
    }
}

/// With a cap of 8 streams, a client that ignores the announced cap and opens a 9th while 8
/// requests are in flight gets that one refused (RST_STREAM REFUSED_STREAM); the 8 stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_cap_are_refused() {
    const CAP: u32 = 8;
    let server = TestServer::start(
        ServerOptions::new()
            .tls(test_ca())
            .args(["--http2-max-streams".to_owned(), CAP.to_string()]),
    );
    let resets = tokio::task::spawn_blocking(move || {
        let mut h2 = h2_connection(&server);
        let settings = first_frame(&mut h2);
        assert_eq!(settings.kind, SETTINGS);
        assert_eq!(settings.setting(MAX_CONCURRENT_STREAMS), Some(CAP));
        let last = 2 * CAP + 1;
        for stream in (1..=last).step_by(2) {
            h2.open_post(stream, "/v1/sessions").expect("open stream");
        }
        let mut resets = Vec::new();
        let deadline = Instant::now() + EVENTUALLY;
        // Until the 9th is reset, and a little longer to see none of the 8 follows it.
        let mut settle = None;
        loop {
            match h2.next(settle.unwrap_or(deadline), true) {
                Next::Frame(f) if f.kind == RST_STREAM => {
                    resets.push((f.stream, f.error_code()));
                    if f.stream == last {
                        settle = Some(Instant::now() + Duration::from_millis(300));
                    }
                }
                Next::Frame(_) => {}
                Next::Closed | Next::Timeout => break,
            }
        }
        (resets, last)
    })
    .await
    .unwrap();
    let (resets, last) = resets;
    assert_eq!(resets, [(last, Some(REFUSED_STREAM))]);
}

/// With pings every 300 ms, a peer that never answers them is cut off although its request
/// is still in flight (so the idle bound does not apply); a client that answers (hyper's)
/// keeps its connection through a 1 s server-side wait (three ping intervals).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_ping_closes_the_connection() {
    let server = TestServer::start(
        ServerOptions::new()
            .tls(test_ca())
            .args(["--http2-keepalive-ms", "300"]),
    );
    let api = server.api();
    let key = contract::unique_key("keepalive");
    let holder = api.open_session(30_000).await;
    let waiter = api.open_session(30_000).await;
    api.acquire_ok(&key, &holder.session_id, 30_000).await;
    let waited = api
        .acquire(&key, &waiter.session_id, Some(5_000), Some(1_000))
        .await;
    waited.assert_error(409, "LOCK_CONTENDED");
    assert_eq!(waited.version, reqwest::Version::HTTP_2);

    let (pinged, closed) = tokio::task::spawn_blocking(move || {
        let mut h2 = h2_connection(&server);
        h2.open_post(1, "/v1/sessions").expect("open stream");
        let deadline = Instant::now() + EVENTUALLY;
        let mut pinged = false;
        loop {
            match h2.next(deadline, false) {
                Next::Frame(f) => pinged |= f.kind == PING,
                Next::Closed => return (pinged, true),
                Next::Timeout => return (pinged, false),
            }
        }
    })
    .await
    .unwrap();
    assert!(pinged, "the server pings");
    assert!(
        closed,
        "a peer that never answers a ping keeps its connection"
    );
}

/// The header list is capped at 64 KiB on HTTP/2 as the request head is on HTTP/1: 60 KB of
/// headers are served, 70 KB are answered 431, and the connection serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_lists_over_64_kib_are_refused_on_http2() {
    let server = TestServer::start(ServerOptions::new().tls(test_ca()));
    let ca = server.tls_ca().expect("TLS server");
    let tls = lock_e2e::tls::connect(server.addr(), client_config(&ca, ALPN_H2))
        .await
        .expect("TLS");
    let (client, connection) = h2::client::handshake(tls).await.expect("h2 handshake");
    tokio::spawn(connection);
    let url = format!("{}/healthz", server.base_url());
    let status = |filler: usize| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let request = http::Request::get(url)
                .header("x-filler", "a".repeat(filler))
                .body(())
                .unwrap();
            let mut client = client.ready().await.expect("ready");
            let (response, _) = client.send_request(request, true).expect("send");
            response.await.expect("answer").status().as_u16()
        }
    };
    assert_eq!(status(60_000).await, 200);
    assert_eq!(status(70_000).await, 431);
    assert_eq!(status(0).await, 200, "the connection serves on");
}
