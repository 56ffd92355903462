//! The demo ledgers: the fenced one, `POST /v1/demo/ledger/{key}`, the "side effect" each
//! grant performs, so that a stale holder would show up as FENCED_OUT; and, for the fault
//! lab, its unfenced twin, `POST /v1/demo/unfenced-ledger/{key}`, which accepts every write
//! and answers `{"stale": true}` for exactly the writes the fenced one would refuse. Both are
//! read back with GET.
//!
//! It is not part of the SDK's [`lock_wasm::transport::Transport`] (the SDK never performs
//! side effects), so the dashboard has its own small seam for it.

use std::cell::RefCell;
use std::collections::BTreeMap;

use futures::future::LocalBoxFuture;
use lock_api::{ErrorBody, ErrorCode, LedgerAppend, LedgerEntries, LedgerEntry, UnfencedAppended};
use lock_wasm::error::TransportError;

/// Appends entries to the demo ledgers and reads them back.
pub trait Ledger {
    /// Appends `body` to `key`'s ledger. A stale token answers 409 FENCED_OUT as a
    /// [`TransportError::Status`]. Never retried: a side effect is never retried.
    fn append(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>>;

    /// Appends `body` to `key`'s unfenced ledger: accepted whatever its token, `stale` when
    /// the fenced ledger would have refused it. Never retried.
    fn append_unfenced(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<UnfencedAppended, TransportError>>;

    /// `key`'s fenced (`unfenced` false) or unfenced ledger as it stands; on the unfenced
    /// one each entry says whether it was stale.
    fn read(
        &self,
        key: &str,
        unfenced: bool,
    ) -> LocalBoxFuture<'static, Result<LedgerEntries, TransportError>>;
}

/// The ledgers in memory, as the server's demo ledgers are: on the fenced one an entry is
/// accepted iff its token is not lower than the highest accepted for its key; the unfenced
/// one takes every entry and flags those. For runs without a server (the in-page
/// simulation, the runner's tests).
#[derive(Default)]
pub struct MemoryLedger {
    /// Per key, the entries accepted, in order.
    pub entries: RefCell<BTreeMap<String, Vec<LedgerAppend>>>,
    /// Per key, the unfenced ledger's entries, in order.
    pub unfenced: RefCell<BTreeMap<String, Vec<LedgerEntry>>>,
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

    fn append_unfenced(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<UnfencedAppended, TransportError>> {
        let mut entries = self.unfenced.borrow_mut();
        let accepted = entries.entry(key.to_owned()).or_default();
        let highest = accepted.iter().map(|e| e.fencing_token).max().unwrap_or(0);
        let stale = body.fencing_token < highest;
        accepted.push(LedgerEntry {
            fencing_token: body.fencing_token,
            entry: body.entry.clone(),
            stale: Some(stale),
        });
        Box::pin(async move { Ok(UnfencedAppended { stale }) })
    }

    fn read(
        &self,
        key: &str,
        unfenced: bool,
    ) -> LocalBoxFuture<'static, Result<LedgerEntries, TransportError>> {
        let entries: Vec<LedgerEntry> = if unfenced {
            self.unfenced.borrow().get(key).cloned().unwrap_or_default()
        } else {
            let fenced = self.entries.borrow();
            let list = fenced.get(key).map(Vec::as_slice).unwrap_or_default();
            list.iter()
                .map(|e| LedgerEntry {
                    fencing_token: e.fencing_token,
                    entry: e.entry.clone(),
                    stale: None,
                })
                .collect()
        };
        let answer = LedgerEntries {
            key: key.to_owned(),
            highest_token: entries.iter().map(|e| e.fencing_token).max(),
            entries,
        };
        Box::pin(async move { Ok(answer) })
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
impl FetchLedger {
    /// Sends `method path` with `body`; the 2xx answer's body text, else the error.
    fn exchange(
        &self,
        method: &'static str,
        path: String,
        body: Option<String>,
    ) -> LocalBoxFuture<'static, Result<String, TransportError>> {
        use lock_wasm::wasm::fetch::{exchange, Headers};
        let url = format!("{}{path}", self.base);
        let authorization = self.authorization.clone();
        Box::pin(async move {
            let timeout = super::REQUEST_TIMEOUT;
            let headers = Headers {
                authorization: authorization.as_deref(),
                ..Headers::default()
            };
            let reply = exchange(method, &url, body.as_deref(), headers, timeout).await?;
            if (200..300).contains(&reply.status) {
                Ok(reply.body)
            } else {
                Err(TransportError::from_status(reply.status, &reply.body))
            }
        })
    }

    /// The same for a JSON answer of type `T`.
    fn exchange_json<T: serde::de::DeserializeOwned + 'static>(
        &self,
        method: &'static str,
        path: String,
        body: Option<String>,
    ) -> LocalBoxFuture<'static, Result<T, TransportError>> {
        let sent = self.exchange(method, path, body);
        Box::pin(async move {
            let text = sent.await?;
            serde_json::from_str(&text)
                .map_err(|e| TransportError::Decode(format!("a ledger answer: {e}")))
        })
    }
}

#[cfg(target_arch = "wasm32")]
impl Ledger for FetchLedger {
    fn append(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>> {
        let json = serde_json::to_string(body).unwrap_or_default();
        let sent = self.exchange("POST", lock_api::paths::ledger(key), Some(json));
        Box::pin(async move { sent.await.map(drop) })
    }

    fn append_unfenced(
        &self,
        key: &str,
        body: &LedgerAppend,
    ) -> LocalBoxFuture<'static, Result<UnfencedAppended, TransportError>> {
        let json = serde_json::to_string(body).unwrap_or_default();
        let path = lock_api::paths::unfenced_ledger(key);
        self.exchange_json("POST", path, Some(json))
    }

    fn read(
        &self,
        key: &str,
        unfenced: bool,
    ) -> LocalBoxFuture<'static, Result<LedgerEntries, TransportError>> {
        let path = if unfenced {
            lock_api::paths::unfenced_ledger(key)
        } else {
            lock_api::paths::ledger(key)
        };
        self.exchange_json("GET", path, None)
    }
}
