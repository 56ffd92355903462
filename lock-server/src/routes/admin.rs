//! R1 force revoke.
//!
//! Without an auth file it sits behind `Authorization: Bearer <admin token>`: no header is
//! 401, anything else 403, and with no admin token configured the surface is disabled (every
//! call 403), so an unconfigured server can never be revoked from the network. With an auth
//! file the guard has already refused unknown tokens (401); R1 then accepts the admin token
//! and clients with `"admin": true` for keys within their prefixes, and refuses every other
//! client (403).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use lock_api::{ErrorCode, LockOutcome, RevokeRequest};

use crate::auth::bearer::{self, Presented};
use crate::auth::{Auth, Caller};
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::state::AppState;

/// Largest `reason`, in bytes (ASSUMPTION).
pub const REASON_MAX_BYTES: usize = 1024;

/// R1 `POST /v1/admin/locks/{key}/revoke`.
pub async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<RevokeRequest>,
) -> Result<Json<LockOutcome>, ApiError> {
    authorize(&state.auth, &caller, &headers, &key)?;
    if req.reason.len() > REASON_MAX_BYTES {
        return Err(ApiError::validation(
            "reason",
            format!("reason must be at most {REASON_MAX_BYTES} bytes"),
        ));
    }
    // A token no hold can carry (≥ 2^53) names nothing; the store is not asked.
    let revoked_tokens = match req.fencing_token {
        Some(token) if token > lock_api::limits::MAX_FENCING_TOKEN => Vec::new(),
        only => state.store.revoke(&key, only).await?,
    };
    tracing::warn!(
        event = "lock_revoked",
        key = %key,
        revokedTokens = ?revoked_tokens,
        client = caller.log_name(),
        reason = %req.reason,
    );
    Ok(Json(LockOutcome {
        key,
        revoked_token: revoked_tokens.first().copied(),
        revoked_tokens,
        reason: req.reason,
    }))
}

fn authorize(auth: &Auth, caller: &Caller, headers: &HeaderMap, key: &str) -> Result<(), ApiError> {
    match caller {
        Caller::Anonymous => authorize_admin_token(auth, headers),
        Caller::AdminToken => Ok(()),
        Caller::Client(client) if client.admin => caller.check_key(key),
        Caller::Client(_) => Err(ApiError::new(
            ErrorCode::Forbidden,
            "R1 needs an admin client or the admin token",
        )),
    }
}

/// Without an auth file: the admin token alone.
fn authorize_admin_token(auth: &Auth, headers: &HeaderMap) -> Result<(), ApiError> {
    if !auth.has_admin_token() {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "the admin surface is disabled (no admin token configured)",
        ));
    }
    match bearer::presented(headers) {
        Presented::Nothing => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "missing admin credentials",
        )),
        Presented::Token(token) if auth.is_admin_token(token) => Ok(()),
        Presented::Token(_) | Presented::Malformed => Err(ApiError::new(
            ErrorCode::Forbidden,
            "wrong admin credentials",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;

    fn with(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn bearer_rules_without_an_auth_file() {
        let configured = Auth::load(None, Some("t"), false).unwrap();
        let disabled = Auth::load(None, None, false).unwrap();
        let code = |auth: &Auth, header: Option<&str>| {
            authorize(auth, &Caller::Anonymous, &with(header), "k")
                .err()
                .map(|e| e.code())
        };
        assert_eq!(code(&configured, None), Some(ErrorCode::Unauthorized));
        assert_eq!(
            code(&configured, Some("Bearer x")),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(code(&configured, Some("t")), Some(ErrorCode::Forbidden));
        assert_eq!(
            code(&disabled, Some("Bearer t")),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(code(&configured, Some("Bearer t")), None);
    }
}
