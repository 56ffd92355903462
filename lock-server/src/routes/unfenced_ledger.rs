//! The unfenced demo ledger: a demonstration only, never the default way to write anything,
//! for the dashboard's fault lab. It is the fenced ledger (`ledger`) without the fence: the
//! same body, the same validation, key scope and switch (`--demo-ledger`), but every valid
//! write is accepted, and the answer says whether it was stale — its token lower than the
//! highest this ledger had already accepted for the key, exactly the writes the fenced
//! ledger answers 409 FENCED_OUT. Shown beside the fenced ledger, a stale write lands here
//! ("corrupted") and is refused there. The two ledgers share nothing: a key's entries in one
//! never move the other's highest token.

use axum::extract::State;
use axum::Json;
use lock_api::{LedgerAppend, LedgerEntries, UnfencedAppended};

use super::ledger::validate;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::state::AppState;

/// `POST /v1/demo/unfenced-ledger/{key}`: 200 `{stale}`, whatever the token.
pub async fn append(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<LedgerAppend>,
) -> Result<Json<UnfencedAppended>, ApiError> {
    caller.check_key(&key)?;
    validate(&req)?;
    let stale = state
        .store
        .unfenced_append(&key, req.fencing_token, req.entry)
        .await?;
    Ok(Json(UnfencedAppended { stale }))
}

/// `GET /v1/demo/unfenced-ledger/{key}`: every entry in order, each with its `stale`.
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
) -> Result<Json<LedgerEntries>, ApiError> {
    caller.check_key(&key)?;
    Ok(Json(state.store.unfenced_read(&key).await?))
}
