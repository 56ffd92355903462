//! R1 force revoke, behind `Authorization: Bearer <admin token>`.
//!
//! No header: 401. Wrong token: 403. No admin token configured: the surface is disabled and
//! every call is 403, so an unconfigured server can never be revoked from the network.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::Json;
use lock_api::{ErrorCode, LockOutcome, RevokeRequest};

use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::state::AppState;

/// Largest `reason`, in bytes (ASSUMPTION).
pub const REASON_MAX_BYTES: usize = 1024;

/// R1 `POST /v1/admin/locks/{key}/revoke`.
pub async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<RevokeRequest>,
) -> Result<Json<LockOutcome>, ApiError> {
    authorize(state.admin_token.as_deref(), &headers)?;
    if req.reason.len() > REASON_MAX_BYTES {
        return Err(ApiError::validation(
            "reason",
            format!("reason must be at most {REASON_MAX_BYTES} bytes"),
        ));
    }
    let revoked_token = state.store.revoke(&key).await?;
    tracing::warn!(event = "lock_revoked", key = %key, revokedToken = revoked_token, reason = %req.reason);
    Ok(Json(LockOutcome {
        key,
        revoked_token,
        reason: req.reason,
    }))
}

fn authorize(expected: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "the admin surface is disabled (no admin token configured)",
        ));
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "missing admin credentials",
        ));
    };
    let presented = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Forbidden,
            "wrong admin credentials",
        ))
    }
}

/// Compares without an early exit, so response timing does not leak a matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn bearer_rules() {
        let code = |r: Result<(), ApiError>| r.err().map(|e| e.code());
        assert_eq!(
            code(authorize(Some("t"), &with(None))),
            Some(ErrorCode::Unauthorized)
        );
        assert_eq!(
            code(authorize(Some("t"), &with(Some("Bearer x")))),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(
            code(authorize(Some("t"), &with(Some("t")))),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(
            code(authorize(None, &with(Some("Bearer t")))),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(code(authorize(Some("t"), &with(Some("Bearer t")))), None);
    }
}
