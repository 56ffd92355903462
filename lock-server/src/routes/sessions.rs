//! L1 open, L2 heartbeat, L3 close, L5 status. L2, L3 and L5 name the session by its
//! holder id in the path and carry the session id in a header ([`SessionParam`]). The store
//! checks that the session belongs to the caller's client (another client's session is
//! SESSION_NOT_FOUND, like an unknown id).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lock_api::limits::{validate_ttl, OWNER_MAX_BYTES};
use lock_api::session::SINCE_MAX_BYTES;
use lock_api::{HeartbeatRequest, OpenSessionRequest};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, SessionParam};
use crate::state::AppState;
use crate::store::NewSession;

/// L1 `POST /v1/sessions`: 201 with the new session, which belongs to the caller.
pub async fn open(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<OpenSessionRequest>,
) -> Result<Response, ApiError> {
    let ttl = req.ttl_millis.unwrap_or(state.default_session_ttl_ms);
    validate_ttl(ttl).map_err(|m| ApiError::validation("ttlMillis", format!("ttlMillis {m}")))?;
    if let Some(owner) = &req.owner {
        if owner.len() > OWNER_MAX_BYTES || owner.chars().any(char::is_control) {
            return Err(ApiError::validation(
                "owner",
                format!("owner must be at most {OWNER_MAX_BYTES} bytes without control characters"),
            ));
        }
    }
    let opened = state
        .store
        .open_session(NewSession {
            ttl_millis: ttl,
            owner: req.owner,
            client: caller.client(),
        })
        .await?;
    Ok((StatusCode::CREATED, Json(opened)).into_response())
}

/// L2 `POST /v1/sessions/{holderId}/heartbeat`: renews the session and all its locks; with
/// `since`, answers only what changed after it (or nothing). The body is optional.
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: Caller,
    SessionParam(id): SessionParam,
    JsonBody(req): JsonBody<HeartbeatRequest>,
) -> Result<Response, ApiError> {
    if req
        .since
        .as_ref()
        .is_some_and(|s| s.len() > SINCE_MAX_BYTES)
    {
        return Err(ApiError::validation(
            "since",
            format!("since must be at most {SINCE_MAX_BYTES} bytes"),
        ));
    }
    let answer = state
        .store
        .heartbeat(caller.session(&id), req.since.as_deref())
        .await?;
    Ok(Json(answer).into_response())
}

/// L3 `DELETE /v1/sessions/{holderId}`: 204; releases every lock of the session.
pub async fn close(
    State(state): State<AppState>,
    caller: Caller,
    SessionParam(id): SessionParam,
) -> Result<StatusCode, ApiError> {
    state.store.close_session(caller.session(&id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// L5 `GET /v1/sessions/{holderId}`.
pub async fn status(
    State(state): State<AppState>,
    caller: Caller,
    SessionParam(id): SessionParam,
) -> Result<Response, ApiError> {
    Ok(Json(state.store.session_status(caller.session(&id)).await?).into_response())
}
