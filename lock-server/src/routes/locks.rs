//! L4 acquire (with the bounded server-side wait), L6 release, L7 advisory read. Each
//! checks first that the key is within the caller's scope (403 FORBIDDEN).

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lock_api::limits::{validate_ttl, validate_wait};
use lock_api::{AcquireRequest, ErrorBody, ErrorCode, LockGrant, LockState, ReleaseRequest};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::metrics::Outcome;
use crate::state::AppState;
use crate::store::Acquired;

/// `retryAfterMillis` hint on 429 (ASSUMPTION: 100 ms, about one waiter's turn).
const CONTENTION_RETRY_AFTER_MS: u64 = 100;

/// L4 `POST /v1/locks/{key}/acquire`.
pub async fn acquire(
    State(state): State<AppState>,
    caller: Caller,
    key: Result<KeyParam, ApiError>,
    body: Result<JsonBody<AcquireRequest>, ApiError>,
) -> Response {
    let started = Instant::now();
    let result = match (key, body) {
        (Ok(KeyParam(key)), Ok(JsonBody(req))) => {
            acquire_validated(&state, &caller, key, req).await
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let outcome = match &result {
        Ok(_) => Outcome::Granted,
        Err(e) => match e.code() {
            ErrorCode::LockContended => Outcome::Contended,
            ErrorCode::ContentionExceeded => Outcome::ContentionExceeded,
            ErrorCode::NotLeader => Outcome::NotLeader,
            ErrorCode::SessionNotFound => Outcome::SessionNotFound,
            ErrorCode::ValidationFailed | ErrorCode::PayloadTooLarge => Outcome::ValidationFailed,
            ErrorCode::Forbidden => Outcome::Forbidden,
            _ => Outcome::Error,
        },
    };
    state.metrics.observe_acquire(started.elapsed(), outcome);
    match result {
        Ok(grant) => Json(grant).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn acquire_validated(
    state: &AppState,
    caller: &Caller,
    key: String,
    req: AcquireRequest,
) -> Result<LockGrant, ApiError> {
    caller.check_key(&key)?;
    let ttl = req.ttl_millis.unwrap_or(state.default_lock_ttl_ms);
    validate_ttl(ttl).map_err(|m| ApiError::validation("ttlMillis", format!("ttlMillis {m}")))?;
    let wait = req.wait_millis.unwrap_or(0);
    validate_wait(wait)
        .map_err(|m| ApiError::validation("waitMillis", format!("waitMillis {m}")))?;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(wait);
    let mut waiter = None;
    let mut shutdown = state.shutdown.clone();
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        let client = caller.client();
        match state
            .store
            .try_acquire(&key, &req.session_id, client, ttl)
            .await?
        {
            Acquired::Granted(grant) => {
                // Only a log field: a store that cannot name the holder now must not turn a
                // grant into an error.
                let holder_id = state.store.holder_id(&grant.session_id).await;
                tracing::info!(
                    event = "lock_granted",
                    key = %grant.key,
                    holderId = %holder_id.unwrap_or_default(),
                    client = caller.log_name(),
                    fencingToken = grant.fencing_token,
                    attempts = attempt,
                    waitedMillis = started.elapsed().as_millis() as u64,
                );
                return Ok(grant);
            }
            Acquired::Contended => {
                let left = deadline.saturating_duration_since(Instant::now());
                tracing::info!(
                    event = "contention",
                    key = %key,
                    attempt = attempt,
                    delayMillis = left.as_millis() as u64,
                );
                if left.is_zero() {
                    return Err(ApiError::new(
                        ErrorCode::LockContended,
                        "the lock is held by another session",
                    ));
                }
                if waiter.is_none() {
                    waiter = Some(state.waiters.enter(&key).ok_or_else(contention_exceeded)?);
                }
                tokio::select! {
                    _ = state.store.wait_change(&key, left) => {}
                    _ = shutdown.wait_for(|stopping| *stopping) => return Err(shutting_down()),
                }
            }
        }
    }
}

fn contention_exceeded() -> ApiError {
    let mut body = ErrorBody::new(
        ErrorCode::ContentionExceeded,
        "too many requests are already waiting for this key",
    );
    body.retry_after_millis = Some(CONTENTION_RETRY_AFTER_MS);
    ApiError(Box::new(body))
}

fn shutting_down() -> ApiError {
    let mut body = ErrorBody::new(ErrorCode::NotLeader, "server is shutting down");
    body.retry_after_millis = Some(1_000);
    ApiError(Box::new(body))
}

/// L6 `POST /v1/locks/{key}/release`: compare-and-delete on `(key, fencingToken)`, with an
/// auth file too. Tokens are not secret (L7 shows them): what keeps one client from
/// releasing another's locks is that it may release only within its own key prefixes.
pub async fn release(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<ReleaseRequest>,
) -> Result<StatusCode, ApiError> {
    caller.check_key(&key)?;
    // No lock ever carries a token at or above 2^53, so a larger one is simply gone; the
    // store is not asked (SQLite stores tokens as i64).
    let result = if req.fencing_token > lock_api::limits::MAX_FENCING_TOKEN {
        Err(crate::store::StoreError::LockLost)
    } else {
        state.store.release(&key, req.fencing_token).await
    };
    if tracing::enabled!(tracing::Level::DEBUG) {
        log_release(&state, &caller, &key, &req, result.is_err()).await;
    }
    result?;
    Ok(StatusCode::NO_CONTENT)
}

/// The `lock_released` line. The body's `sessionId` is attribution only, and the line
/// carries its holder id, never the id itself.
async fn log_release(
    state: &AppState,
    caller: &Caller,
    key: &str,
    req: &ReleaseRequest,
    lost: bool,
) {
    let holder_id = match &req.session_id {
        Some(id) => state.store.holder_id(id).await.unwrap_or_default(),
        None => String::new(),
    };
    tracing::debug!(
        event = "lock_released",
        key = %key,
        fencingToken = req.fencing_token,
        holderId = %holder_id,
        client = caller.log_name(),
        lost = lost,
    );
}

/// L7 `GET /v1/locks/{key}`: the holder at the instant of the read (by holder id, never
/// session id), and this replica's waiter count (see `contention`).
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
) -> Result<Json<LockState>, ApiError> {
    caller.check_key(&key)?;
    let holder = state.store.holder(&key).await?;
    let waiter_count = state.waiters.count(&key);
    Ok(Json(LockState {
        key,
        holder,
        waiter_count,
    }))
}
