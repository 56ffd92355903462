//! TLS: the rustls server configuration (ring provider, ALPN `h2` and `http/1.1` on one port)
//! from PEM files, and the self-signed certificate `--tls-self-signed` keeps in the data dir.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// File names of the self-signed certificate and its key in the data dir.
pub const SELF_SIGNED_CERT_FILE: &str = "self-signed-cert.pem";
pub const SELF_SIGNED_KEY_FILE: &str = "self-signed-key.pem";

/// ALPN protocols offered, in the server's order of preference.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why TLS could not be set up (fatal at start-up).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read TLS {what} {path}: {reason}")]
    Read {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("TLS certificate {0} holds no certificate")]
    NoCertificate(PathBuf),
    #[error("TLS certificate and key do not fit together: {0}")]
    Config(#[from] rustls::Error),
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The acceptor for a certificate chain and key in PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| read_error("certificate", cert, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| read_error("key", key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_error(what: &'static str, path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Read {
        what,
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// The self-signed certificate in a data dir: where its files are, its SHA-256 fingerprint,
/// and whether this start created it.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// SHA-256 of the DER certificate, colon-separated upper-case hex (the form of
    /// `openssl x509 -noout -fingerprint -sha256`).
    pub sha256: String,
    pub created: bool,
}

/// The self-signed certificate of `data_dir`, generated for `listen` on first use and reused
/// after (both files must be there; else both are written anew, key first).
pub fn self_signed(data_dir: &Path, listen: SocketAddr) -> Result<SelfSigned, TlsError> {
    let cert = data_dir.join(SELF_SIGNED_CERT_FILE);
    let key = data_dir.join(SELF_SIGNED_KEY_FILE);
    let created = !(cert.exists() && key.exists());
    if created {
        let generated = rcgen::generate_simple_self_signed(subject_alt_names(listen.ip()))?;
        write_file(
            &key,
            generated.signing_key.serialize_pem().as_bytes(),
            0o600,
        )?;
        write_file(&cert, generated.cert.pem().as_bytes(), 0o644)?;
    }
    let der =
        CertificateDer::from_pem_file(&cert).map_err(|e| read_error("certificate", &cert, e))?;
    Ok(SelfSigned {
        sha256: fingerprint(&der),
        cert,
        key,
        created,
    })
}

/// The names a self-signed certificate covers: the listen address unless it is a wildcard
/// (0.0.0.0, ::), and the loopback names.
fn subject_alt_names(listen: IpAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let ip = listen.to_string();
    if !listen.is_unspecified() && !names.contains(&ip) {
        names.push(ip);
    }
    names
}

/// Writes `bytes` to `path` with permissions `mode`, through a temporary file and a rename
/// (never a half-written file).
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let error = |source| TlsError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    let tmp = path.with_extension("tmp");
    // A leftover from a crash would keep its old permissions: start from none.
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(error)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)
}

/// SHA-256 of `der` as `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listen_address_is_not_a_name() {
        let names = subject_alt_names("0.0.0.0".parse().unwrap());
        assert_eq!(names, ["localhost", "127.0.0.1", "::1"]);
        let names = subject_alt_names("10.1.2.3".parse().unwrap());
        assert_eq!(names.last().map(String::as_str), Some("10.1.2.3"));
        assert_eq!(subject_alt_names("127.0.0.1".parse().unwrap()).len(), 3);
    }

    #[test]
    fn fingerprint_is_colon_separated_sha256() {
        // SHA-256 of the empty input.
        assert!(fingerprint(b"").starts_with("E3:B0:C4:42:98:FC:1C:14"));
        assert_eq!(fingerprint(b"").len(), 32 * 3 - 1);
    }

    #[test]
    fn the_self_signed_certificate_is_reused_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let first = self_signed(dir.path(), listen).unwrap();
        assert!(first.created);
        let second = self_signed(dir.path(), listen).unwrap();
        assert!(!second.created);
        assert_eq!(first.sha256, second.sha256);
        acceptor(&second.cert, &second.key).expect("the pair loads");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&first.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is the owner's only");
    }

    #[test]
    fn missing_or_mismatched_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let a = self_signed(dir.path(), "127.0.0.1:0".parse().unwrap()).unwrap();
        let other = tempfile::tempdir().unwrap();
        let b = self_signed(other.path(), "127.0.0.1:0".parse().unwrap()).unwrap();
        let missing = dir.path().join("nope.pem");
        let err = acceptor(&missing, &a.key).err().unwrap().to_string();
        assert!(err.contains("nope.pem"), "{err}");
        let err = acceptor(&a.key, &a.key).err().unwrap().to_string();
        assert!(err.contains("no certificate"), "{err}");
        let err = acceptor(&a.cert, &b.key).err().unwrap().to_string();
        assert!(err.contains("do not fit"), "{err}");
    }
}
