//! Where the server is and how to talk to it: its URL, the bearer token of an auth-file
//! client (`LOCK_TOKEN`) and a CA to trust for https (`LOCK_CA_CERT`), checked once so every
//! subcommand builds its clients from values that work.

use std::path::Path;

use lock_wasm::native::HttpTransport;
use lock_wasm::{ClientConfig, LockClient};

use crate::exit::Failure;

/// A checked server address with its credentials.
pub struct Endpoint {
    url: String,
    token: Option<String>,
    ca_pem: Option<Vec<u8>>,
}

impl Endpoint {
    /// Checks the token's shape and reads the CA file: either failing is a usage error,
    /// found before anything is sent.
    pub fn new(url: &str, token: Option<&str>, ca_cert: Option<&Path>) -> Result<Self, Failure> {
        if let Some(token) = token {
            lock_api::limits::validate_token(token).map_err(|rule| {
                Failure::usage(format!("the token (LOCK_TOKEN, --token) {rule}"))
            })?;
        }
        let ca_pem = ca_cert
            .map(|path| {
                std::fs::read(path).map_err(|e| {
                    Failure::usage(format!(
                        "cannot read the CA certificate {} (LOCK_CA_CERT, --ca-cert): {e}",
                        path.display()
                    ))
                })
            })
            .transpose()?;
        let endpoint = Endpoint {
            url: url.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
            ca_pem,
        };
        // Built once here so a bad CA file is a usage error, not a failure mid-command.
        endpoint.transport()?;
        Ok(endpoint)
    }

    /// The server's base URL, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bearer token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The SDK's HTTP transport for this server.
    pub fn transport(&self) -> Result<HttpTransport, Failure> {
        let mut transport = HttpTransport::new(self.url.clone());
        if let Some(token) = &self.token {
            transport = transport
                .with_token(token)
                .map_err(|e| Failure::usage(e.to_string()))?;
        }
        if let Some(pem) = &self.ca_pem {
            transport = transport
                .with_root_ca(pem)
                .map_err(|e| Failure::usage(format!("LOCK_CA_CERT, --ca-cert: {e}")))?;
        }
        Ok(transport)
    }

    /// A client of the SDK over [`Endpoint::transport`] with `config`.
    pub fn client(&self, config: ClientConfig) -> Result<LockClient, Failure> {
        Ok(LockClient::native_over(self.transport()?).with_config(config))
    }

    /// A plain reqwest client trusting the same CA, for the calls the SDK does not make (R1).
    pub fn http(&self) -> Result<reqwest::Client, Failure> {
        let mut builder = reqwest::Client::builder();
        if let Some(pem) = &self.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| Failure::usage(format!("LOCK_CA_CERT, --ca-cert: {e}")))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder
            .build()
            .map_err(|e| Failure::usage(format!("cannot set up HTTP: {e}")))
    }
}
