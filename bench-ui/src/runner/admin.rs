//! The operator's force revoke (R1, `POST /v1/admin/locks/{key}/revoke`) as the fault lab
//! sends it. Not part of the SDK's transport (clients never revoke), so the dashboard has
//! its own small seam, like the ledger's. The admin token is the page's only: handed to
//! [`FetchAdmin`] per run, never stored, logged, exported or put in a URL.

use futures::future::LocalBoxFuture;
use lock_wasm::error::TransportError;

/// Revokes holds.
pub trait Admin {
    /// Revokes the hold of `key` with `fencing_token`, for `reason`.
    fn revoke(
        &self,
        key: &str,
        fencing_token: u64,
        reason: &str,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>>;
}

/// R1 over `fetch`, at the lock API's base URL, with the admin token as the bearer.
#[cfg(target_arch = "wasm32")]
pub struct FetchAdmin {
    base: String,
    /// `Bearer <admin token>`; `None` without a token (R1 then answers 401 or 403).
    authorization: Option<String>,
}

#[cfg(target_arch = "wasm32")]
impl FetchAdmin {
    /// R1 on the server at `base_url` (empty: same origin) with `token` (empty: none).
    pub fn new(base_url: &str, token: &str) -> Self {
        let token = token.trim();
        FetchAdmin {
            base: base_url.trim().trim_end_matches('/').to_owned(),
            authorization: (!token.is_empty()).then(|| format!("Bearer {token}")),
        }
    }
}

#[cfg(target_arch = "wasm32")]
impl Admin for FetchAdmin {
    fn revoke(
        &self,
        key: &str,
        fencing_token: u64,
        reason: &str,
    ) -> LocalBoxFuture<'static, Result<(), TransportError>> {
        use lock_wasm::wasm::fetch::{exchange, Headers};
        let url = format!("{}{}", self.base, lock_api::paths::revoke(key));
        let body = lock_api::RevokeRequest {
            reason: reason.to_owned(),
            fencing_token: Some(fencing_token),
        };
        let authorization = self.authorization.clone();
        Box::pin(async move {
            let json = serde_json::to_string(&body).unwrap_or_default();
            let headers = Headers {
                authorization: authorization.as_deref(),
                ..Headers::default()
            };
            let timeout = super::REQUEST_TIMEOUT;
            let reply = exchange("POST", &url, Some(&json), headers, timeout).await?;
            if (200..300).contains(&reply.status) {
                Ok(())
            } else {
                Err(TransportError::from_status(reply.status, &reply.body))
            }
        })
    }
}
