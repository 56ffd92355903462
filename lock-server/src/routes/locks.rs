//! L4 acquire (with the bounded server-side wait), L6 release, L7 advisory read. Each
//! checks first that the key is within the caller's scope (403 FORBIDDEN).

use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lock_api::limits::{validate_hold, validate_ttl, validate_value, validate_wait};
use lock_api::{AcquireRequest, ErrorBody, ErrorCode, LockGrant, LockState, ReleaseRequest};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::metrics::Outcome;
use crate::state::AppState;
use crate::store::lease::now_millis;
use crate::store::{AcquireCall, Acquired, KeyState, Queueing};

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
            ErrorCode::StoreUnavailable => Outcome::StoreUnavailable,
            ErrorCode::SessionNotFound => Outcome::SessionNotFound,
            ErrorCode::ValidationFailed | ErrorCode::PayloadTooLarge => Outcome::ValidationFailed,
            ErrorCode::Forbidden => Outcome::Forbidden,
            ErrorCode::LimitMismatch => Outcome::LimitMismatch,
            ErrorCode::UpgradeNotAllowed => Outcome::UpgradeNotAllowed,
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
    let hold = validate_hold(req.mode, req.limit)
        .map_err(|m| ApiError::validation("limit", format!("limit {m}")))?;
    if let Some(value) = &req.value {
        validate_value(value).map_err(|m| ApiError::validation("value", format!("value {m}")))?;
    }
    let arrival = now_millis();
    let queue = (wait > 0).then_some(Queueing {
        open_until: arrival + wait,
        grace: state.queue_grace_ms,
        cap: state.max_waiters_per_key,
    });
    let call = AcquireCall {
        key: &key,
        session_id: &req.session_id,
        client: caller.client(),
        ttl_millis: ttl,
        hold,
        value: req.value.as_deref(),
        queue,
    };
    let mut shutdown = state.shutdown.clone();
    let acquired = tokio::select! {
        acquired = state.store.acquire(call) => acquired?,
        // Only a queued request can still be running when the server stops.
        _ = shutdown.wait_for(|stopping| *stopping), if queue.is_some() => {
            return Err(shutting_down());
        }
    };
    match acquired {
        Acquired::Granted(granted) => {
            let grant = LockGrant {
                waited_millis: granted.lease_start.saturating_sub(arrival),
                ..granted.grant
            };
            // Only a log field: a store that cannot name the holder now must not turn a
            // grant into an error.
            let holder_id = state.store.holder_id(&grant.session_id).await;
            tracing::info!(
                event = "lock_granted",
                key = %grant.key,
                holderId = %holder_id.unwrap_or_default(),
                client = caller.log_name(),
                fencingToken = grant.fencing_token,
                mode = grant.mode.as_str(),
                attempts = granted.attempts,
                waitedMillis = grant.waited_millis,
            );
            Ok(grant)
        }
        Acquired::Contended { attempts } => {
            tracing::info!(
                event = "contention",
                key = %key,
                mode = hold.mode().as_str(),
                attempt = attempts,
                delayMillis = 0
            );
            Err(ApiError::new(
                ErrorCode::LockContended,
                "the lock is held by another session, or others queue for it",
            ))
        }
    }
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

/// L7 `GET /v1/locks/{key}`: the holders (by holder id, never session id), their mode and
/// limit, and the queue's length at the instant of the read.
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
) -> Result<Json<LockState>, ApiError> {
    caller.check_key(&key)?;
    let current = state.store.lock_state(&key).await?;
    Ok(Json(lock_state(key, current)))
}

/// L7's answer for `key` in `current` (also the `state` of L8's `snapshot` and `reset`).
pub fn lock_state(key: String, current: KeyState) -> LockState {
    LockState {
        key,
        mode: current.mode(),
        holder: current.exclusive_holder().cloned(),
        limit: current.hold.and_then(|hold| hold.limit()),
        holders: current.holders,
        waiter_count: current.waiters,
    }
}
