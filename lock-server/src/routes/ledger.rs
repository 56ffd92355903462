//! The demo fenced resource (stands for the payment rail): appends only with a token ≥ the
//! highest seen for the key, else 409 FENCED_OUT with `highestToken`. Keys outside the
//! caller's scope are 403 FORBIDDEN, as for locks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lock_api::{LedgerAppend, LedgerEntries};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::state::AppState;

/// Largest ledger entry, in bytes (ASSUMPTION).
pub const ENTRY_MAX_BYTES: usize = 1024;

/// Where the demo ledgers' paths start, this one's and the unfenced one's
/// (`--demo-ledger false` answers them 404).
pub const PATH_PREFIX: &str = "/v1/demo/";

/// Any request to the demo ledgers' paths while `--demo-ledger false`: 404 NOT_FOUND, saying
/// why.
pub async fn switched_off() -> ApiError {
    ApiError::new(
        lock_api::ErrorCode::NotFound,
        "the demo ledger is switched off on this server (--demo-ledger false)",
    )
}

/// The body rules of both demo ledgers (this one and the unfenced one): the entry's size,
/// and a token that could have been minted.
pub fn validate(req: &LedgerAppend) -> Result<(), ApiError> {
    if req.entry.len() > ENTRY_MAX_BYTES {
        return Err(ApiError::validation(
            "entry",
            format!("entry must be at most {ENTRY_MAX_BYTES} bytes"),
        ));
    }
    // Tokens are minted below 2^53; a larger one can only be forged, and accepting it would
    // raise the key's highest token and fence out every legitimate holder forever.
    if req.fencing_token > lock_api::limits::MAX_FENCING_TOKEN {
        return Err(ApiError::validation(
            "fencingToken",
            "fencingToken must be below 2^53",
        ));
    }
    Ok(())
}

/// `POST /v1/demo/ledger/{key}`: 204 when accepted.
pub async fn append(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<LedgerAppend>,
) -> Result<StatusCode, ApiError> {
    caller.check_key(&key)?;
    validate(&req)?;
    state
        .store
        .ledger_append(&key, req.fencing_token, req.entry)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/demo/ledger/{key}`: every accepted entry in order.
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
) -> Result<Json<LedgerEntries>, ApiError> {
    caller.check_key(&key)?;
    Ok(Json(state.store.ledger_read(&key).await?))
}
