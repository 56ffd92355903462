//! The native SDK over https against a real TLS lock-server: with the server's CA as an
//! extra root (`HttpTransport::with_root_ca`) a whole session works; without it the
//! certificate is refused; PEM data without a certificate is a clear error.

use std::sync::Arc;

use lock_e2e::tls::TestPki;
use lock_e2e::{ServerOptions, TestServer, Tls};
use lock_wasm::native::HttpTransport;
use lock_wasm::{LockClient, LockError};

fn tls_server() -> TestServer {
    TestServer::start(ServerOptions::new().tls(Tls::Pki(Arc::new(TestPki::new()))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_works_over_https_with_the_servers_ca() {
    let server = tls_server();
    let ca = std::fs::read(server.tls_ca().expect("TLS server")).unwrap();
    let transport = HttpTransport::new(server.base_url())
        .with_root_ca(&ca)
        .expect("the CA loads");
    let client = LockClient::native_over(transport);
    let session = client.open_session().await.expect("L1 over https");
    let handle = session
        .acquire_default("tls/k")
        .await
        .expect("L4 over https")
        .expect("a free key is granted");
    let holder = server.api().lock_state("tls/k").await.holder.expect("held");
    assert_eq!(holder.fencing_token, handle.fencing_token());
    session.release(&handle).await.expect("L6 over https");
    session.close().await.expect("L3 over https");
    assert!(server.api().lock_state("tls/k").await.holder.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_the_certificate_is_refused() {
    let server = tls_server();
    let client = LockClient::native(server.base_url());
    match client.open_session().await {
        Err(LockError::Network(detail)) => {
            assert!(detail.to_lowercase().contains("certificate"), "{detail}");
        }
        Err(other) => panic!("an unknown CA must be refused as a network error, got {other:?}"),
        Ok(_) => panic!("an unknown CA must be refused"),
    }
}

#[test]
fn pem_data_without_a_certificate_is_an_error() {
    let err = HttpTransport::new("https://127.0.0.1:1")
        .with_root_ca(b"not a certificate")
        .err()
        .expect("refused");
    assert!(err.to_string().contains("no certificate"), "{err}");
}
