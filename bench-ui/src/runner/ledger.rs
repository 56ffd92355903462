//! The demo fenced ledger, `POST /v1/demo/ledger/{key}`: the "side effect" each grant
//! performs, so that a stale holder would show up as FENCED_OUT.
//!
//! It is not part of the SDK's [`lock_wasm::transport::Transport`] (the SDK never performs
//! side effects), so the dashboard has its own small seam for it.

use futures::future::LocalBoxFuture;
use lock_api::LedgerAppend;
use lock_wasm::error::TransportError;

/// Appends entries to the fenced ledger.
pub trait Ledger {
    /// Appends `body` to `key`'s ledger. A stale token answers 409 FENCED_OUT as a
    /// [`TransportError::Status`]. Never retried: a side effect is never retried.
    fn append(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>>;
}

/// The ledger over `fetch`, at the same base URL as the lock API.
#[cfg(target_arch = "wasm32")]
pub struct FetchLedger {
    base: String,
}

#[cfg(target_arch = "wasm32")]
impl FetchLedger {
    /// A ledger client for the server at `base_url` (empty: same origin).
    pub fn new(base_url: &str) -> Self {
        FetchLedger {
            base: base_url.trim_end_matches('/').to_owned(),
        }
    }
}

#[cfg(target_arch = "wasm32")]
impl Ledger for FetchLedger {
    fn append(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>> {
        use lock_wasm::wasm::fetch::{exchange, FetchError};
        let url = format!("{}{}", self.base, lock_api::paths::ledger(key));
        let json = serde_json::to_string(body).unwrap_or_default();
        Box::pin(async move {
            let timeout = super::REQUEST_TIMEOUT;
            let reply = exchange("POST", &url, Some(&json), None, timeout)
                .await
                .map_err(|e| match e {
                    FetchError::Timeout => TransportError::Timeout(timeout),
                    FetchError::Network(m) => TransportError::Network(m),
                })?;
            if (200..300).contains(&reply.status) {
                Ok(())
            } else {
                Err(TransportError::from_status(reply.status, &reply.body))
            }
        })
    }
}
