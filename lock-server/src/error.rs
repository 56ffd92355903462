//! Contract errors (C3): every non-2xx answer is an [`ApiError`], rendered as the JSON
//! [`ErrorBody`] with the code's status and, where a retry makes sense, `retry-after`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lock_api::{ErrorBody, ErrorCode, Unavailability};

use crate::store::StoreError;

/// `retryAfterMillis` hint on 429 (ASSUMPTION: 100 ms, about one waiter's turn).
const CONTENTION_RETRY_AFTER_MS: u64 = 100;

/// An error answer: the body decides the status (`ErrorCode::status`). Boxed: errors are
/// rare and the body is large, so `Result`s stay small on the happy path.
#[derive(Debug, Clone)]
pub struct ApiError(pub Box<ErrorBody>);

impl ApiError {
    /// A plain error with a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError(Box::new(ErrorBody::new(code, message)))
    }

    /// 400 VALIDATION_FAILED naming the field.
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError(Box::new(ErrorBody::validation(field, message)))
    }

    /// 503 STORE_UNAVAILABLE with its `reason` and retry hint.
    pub fn store_unavailable(cause: Unavailability, retry_after_millis: u64) -> ApiError {
        let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, cause.message());
        body.reason = Some(cause.label().to_owned());
        body.retry_after_millis = Some(retry_after_millis);
        ApiError(Box::new(body))
    }

    /// The contract code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The store's cause, when this is STORE_UNAVAILABLE.
    pub fn unavailability(&self) -> Option<Unavailability> {
        match self.0.code {
            ErrorCode::StoreUnavailable => self
                .0
                .reason
                .as_deref()
                .and_then(Unavailability::from_label),
            _ => None,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        match err {
            StoreError::SessionNotFound => {
                ApiError::new(ErrorCode::SessionNotFound, "session not found or expired")
            }
            StoreError::LockLost => ApiError::new(
                ErrorCode::LockLost,
                "no lock with that key and fencing token (released, expired or revoked)",
            ),
            StoreError::LimitMismatch { in_force } => {
                let in_force_text = match in_force {
                    Some(limit) => format!("a limit of {limit}"),
                    None => "no limit".to_string(),
                };
                let mut body = ErrorBody::new(
                    ErrorCode::LimitMismatch,
                    format!("the key's shared holds are under {in_force_text}"),
                );
                body.limit = in_force;
                ApiError(Box::new(body))
            }
            StoreError::UpgradeNotAllowed => ApiError::new(
                ErrorCode::UpgradeNotAllowed,
                "this session holds the key shared: release it before acquiring it exclusive",
            ),
            StoreError::QueueFull => {
                let mut body = ErrorBody::new(
                    ErrorCode::ContentionExceeded,
                    "too many requests are already waiting for this key",
                );
                body.retry_after_millis = Some(CONTENTION_RETRY_AFTER_MS);
                ApiError(Box::new(body))
            }
            StoreError::TooManyWatchers => {
                let mut body = ErrorBody::new(
                    ErrorCode::ContentionExceeded,
                    "too many watchers of this key",
                );
                body.retry_after_millis = Some(CONTENTION_RETRY_AFTER_MS);
                ApiError(Box::new(body))
            }
            StoreError::FencedOut { highest } => {
                let mut body = ErrorBody::new(
                    ErrorCode::FencedOut,
                    format!("a higher fencing token ({highest}) was already seen"),
                );
                body.highest_token = Some(highest);
                ApiError(Box::new(body))
            }
            StoreError::Unavailable {
                reason,
                leader,
                retry_after_millis,
            } => {
                let mut body = ErrorBody::new(ErrorCode::NotLeader, reason);
                body.leader = leader;
                body.retry_after_millis = retry_after_millis;
                ApiError(Box::new(body))
            }
            StoreError::StoreUnavailable {
                cause,
                retry_after_millis,
            } => ApiError::store_unavailable(cause, retry_after_millis),
            StoreError::Internal(message) => {
                // Logged here, once, because a 500 is always a bug worth reading about.
                tracing::error!(event = "store_error", %message);
                ApiError::new(ErrorCode::Internal, "internal store error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.0.retry_after_millis;
        let close = self.0.code == ErrorCode::PayloadTooLarge;
        let challenge = self.0.code == ErrorCode::Unauthorized;
        let fault = self.unavailability();
        let mut response = (status, axum::Json(*self.0)).into_response();
        if challenge {
            // RFC 6750: a 401 names the scheme that would be accepted.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if close {
            // The rest of the body stays unread, so the connection cannot carry another
            // request; saying so keeps the client from sending its next one into it. (On
            // HTTP/2 hyper drops this connection-specific header and resets only the stream.)
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(cause) = fault {
            // For the route's readiness layer (`readiness::observe`): which store failure
            // this answer reports, without parsing the body back.
            response.extensions_mut().insert(cause);
        }
        if let Some(millis) = retry_after {
            // `retry-after` has whole seconds only; round up so it never says "now" early.
            let secs = millis.div_ceil(1000).max(1);
            if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// The code a bare status maps to, for responses produced outside the handlers (unknown
/// route, wrong method, framework rejections); see `routes::json_errors`.
pub fn code_for_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        400 | 411 | 415 | 422 => ErrorCode::ValidationFailed,
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        429 => ErrorCode::ContentionExceeded,
        503 => ErrorCode::NotLeader,
        _ => ErrorCode::Internal,
    }
}
