//! The demo fenced ledger, `POST /v1/demo/ledger/{key}`: the "side effect" each grant
//! performs, so that a stale holder would show up as FENCED_OUT.
//!
//! It is not part of the SDK's [`lock_wasm::transport::Transport`] (the SDK never performs
//! side effects), so the dashboard has its own small seam for it.

use std::cell::RefCell;
use std::collections::BTreeMap;

use futures::future::LocalBoxFuture;
use lock_api::{ErrorBody, ErrorCode, LedgerAppend};
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

/// The ledger in memory, fenced as the server's demo ledger is: an entry is accepted iff its
/// token is not lower than the highest accepted for its key. For runs without a server (the
/// in-page simulation, the runner's tests).
#[derive(Default)]
pub struct MemoryLedger {
    /// Per key, the entries accepted, in order.
    pub entries: RefCell<BTreeMap<String, Vec<LedgerAppend>>>,
}

impl Ledger for MemoryLedger {
    fn append(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>> {
        let mut entries = self.entries.borrow_mut();
        let accepted = entries.entry(key.to_owned()).or_default();
        let highest = accepted.last().map_or(0, |e| e.fencing_token);
        let result = if body.fencing_token < highest {
            Err(TransportError::Status {
                status: ErrorCode::FencedOut.status(),
                body: ErrorBody::new(ErrorCode::FencedOut, "a higher token was seen"),
            })
        } else {
            accepted.push(body.clone());
            Ok(())
        };
        Box::pin(async move { result })
    }
}

/// The ledger over `fetch`, at the same base URL and with the same credentials as the lock
/// API.
#[cfg(target_arch = "wasm32")]
pub struct FetchLedger {
    base: String,
    /// The `Authorization` value of the SDK transport, if it has one.
    authorization: Option<String>,
}

#[cfg(target_arch = "wasm32")]
impl FetchLedger {
    /// A ledger client for the server at `base_url` (empty: same origin), sending
    /// `authorization` (`Bearer <token>`) when given.
    pub fn new(base_url: &str, authorization: Option<&str>) -> Self {
        FetchLedger {
            base: base_url.trim_end_matches('/').to_owned(),
            authorization: authorization.map(str::to_owned),
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
        use lock_wasm::wasm::fetch::{exchange, Headers};
        let url = format!("{}{}", self.base, lock_api::paths::ledger(key));
        let json = serde_json::to_string(body).unwrap_or_default();
        let authorization = self.authorization.clone();
        Box::pin(async move {
            let timeout = super::REQUEST_TIMEOUT;
            let headers = Headers {
                authorization: authorization.as_deref(),
                ..Headers::default()
            };
            let reply = exchange("POST", &url, Some(&json), headers, timeout).await?;
            if (200..300).contains(&reply.status) {
                Ok(())
            } else {
                Err(TransportError::from_status(reply.status, &reply.body))
            }
        })
    }
}
