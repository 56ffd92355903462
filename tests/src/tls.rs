//! TLS for the tests: a throw-away PKI (a test CA, a server certificate it signed for
//! 127.0.0.1 and localhost, and a client certificate), rustls client configurations that
//! trust only a given CA, and a raw connection (plain TCP, or TLS on top) for the checks
//! that write bytes by hand.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// ALPN lists a client offers.
pub const ALPN_H2: &[&[u8]] = &[b"h2"];
pub const ALPN_HTTP1: &[&[u8]] = &[b"http/1.1"];

/// A test CA and a server certificate and key it signed, as PEM files in a temp dir (removed
/// on drop).
#[derive(Debug)]
pub struct TestPki {
    /// The CA certificate clients trust.
    pub ca: PathBuf,
    /// The server's certificate (for `--tls-cert`).
    pub cert: PathBuf,
    /// The server's key (for `--tls-key`).
    pub key: PathBuf,
    /// A client certificate the CA signed (CN `lock-server`, client auth), for mutual TLS.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestPki {
    /// A fresh CA and a server certificate for `127.0.0.1` and `localhost`.
    pub fn new() -> TestPki {
        let dir = tempfile::Builder::new()
            .prefix("lock-e2e-pki-")
            .tempdir()
            .expect("temp dir");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "lock-e2e test CA");
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("server params");
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().expect("key");
        let server = server_params
            .signed_by(&server_key, &ca)
            .expect("server cert");
        let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        client_params
            .distinguished_name
            .push(DnType::CommonName, "lock-server");
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().expect("key");
        let client = client_params
            .signed_by(&client_key, &ca)
            .expect("client cert");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write pem");
            path
        };
        TestPki {
            ca: write("ca.pem", ca.as_ref().pem()),
            cert: write("server-cert.pem", server.pem()),
            key: write("server-key.pem", server_key.serialize_pem()),
            client_cert: write("client-cert.pem", client.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            _dir: dir,
        }
    }

    /// `--tls-cert CERT --tls-key KEY`.
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".to_owned(),
            self.cert.display().to_string(),
            "--tls-key".to_owned(),
            self.key.display().to_string(),
        ]
    }
}

impl Default for TestPki {
    fn default() -> TestPki {
        TestPki::new()
    }
}

/// A rustls client configuration (ring) trusting only the certificates in `ca` and offering
/// `alpn`.
pub fn client_config(ca: &Path, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("read CA") {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// The name a test server's certificate is checked against.
fn server_name(addr: &str) -> ServerName<'static> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    ServerName::try_from(host.to_owned()).expect("server name")
}

/// An async TLS connection to `addr`, handshake done.
pub async fn connect(
    addr: &str,
    config: Arc<ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(config)
        .connect(server_name(addr), tcp)
        .await
}

/// A blocking connection to a test server: plain TCP, or TLS (handshake done) when a CA is
/// given, for the checks that write HTTP/1.1 by hand.
pub enum RawConn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl RawConn {
    /// Connects to `addr`; over TLS with ALPN `alpn` when `ca` is set.
    pub fn connect(addr: &str, ca: Option<&Path>, alpn: &[&[u8]]) -> std::io::Result<RawConn> {
        let mut tcp = TcpStream::connect(addr)?;
        let Some(ca) = ca else {
            return Ok(RawConn::Plain(tcp));
        };
        let mut tls = ClientConnection::new(client_config(ca, alpn), server_name(addr))
            .map_err(std::io::Error::other)?;
        tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
        while tls.is_handshaking() {
            tls.complete_io(&mut tcp)?;
        }
        Ok(RawConn::Tls(Box::new(StreamOwned::new(tls, tcp))))
    }

    /// The ALPN protocol the server chose (`None` on plain TCP or without ALPN).
    pub fn alpn(&self) -> Option<Vec<u8>> {
        match self {
            RawConn::Plain(_) => None,
            RawConn::Tls(s) => s.conn.alpn_protocol().map(<[u8]>::to_vec),
        }
    }

    /// Bounds every read.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            RawConn::Plain(s) => s,
            RawConn::Tls(s) => &s.sock,
        }
    }
}

impl Read for RawConn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            RawConn::Plain(s) => s.read(buf),
            RawConn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for RawConn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            RawConn::Plain(s) => s.write(buf),
            RawConn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            RawConn::Plain(s) => s.flush(),
            RawConn::Tls(s) => s.flush(),
        }
    }
}

/// A `GET` over HTTP/1.1 returning the status code (`None` when nothing answers); over TLS
/// when `ca` is set.
pub fn get_status(addr: &str, path: &str, ca: Option<&Path>) -> Option<u16> {
    let mut conn = RawConn::connect(addr, ca, ALPN_HTTP1).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).ok()?;
    let mut answer = Vec::new();
    // A TLS peer may close without close_notify after `Connection: close`; what was read
    // before that still counts.
    let _ = conn.read_to_end(&mut answer);
    std::str::from_utf8(answer.get(9..12)?).ok()?.parse().ok()
}
