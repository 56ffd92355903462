//! The errors callers branch on (contract C2), and how a transport failure maps to them
//! (C2 ct2-exceptions).
//!
//! | wire | [`TransportError`] | [`LockError`] | retried by the acquire loop? |
//! |---|---|---|---|
//! | 409 LOCK_CONTENDED, 429 CONTENTION_EXCEEDED | `Status` | `Contention` | yes: full-jitter backoff inside the budget |
//! | 503 NOT_LEADER | `Status` | `NotLeader` | yes: fixed floor delay inside the budget |
//! | 400 VALIDATION_FAILED | `Status` | `Validation` | never |
//! | 404 SESSION_NOT_FOUND | `Status` | `SessionLost` | never: the session's locks are gone |
//! | 409 LOCK_LOST | `Status` | `LockLost` | never (benign on release) |
//! | 409 FENCED_OUT | `Status` | `FencedOut` | **never**: another worker may own the side effect |
//! | no answer in time | `Timeout` | `Timeout` | L4 only (see below) |
//! | connection failed | `Network` | `Network` | L4 only (see below) |
//!
//! Why a timed-out or failed L4 may be retried: it may have been granted, but L4 by a session
//! that already holds the key returns the same grant and token, so the retry cannot mint a
//! second token; it either returns the grant we missed or a fresh contention answer. A grant
//! whose answer we never saw is released by the heartbeat (its key shows up in the L2 lock
//! list without a handle). Nothing but L4 is ever retried, and a side effect never is.

use std::time::Duration;

use lock_api::{ErrorBody, ErrorCode};

/// The code of a timeout or network failure outside the acquire loop: it has no wire code.
pub const TRANSPORT: &str = "TRANSPORT";

/// The codes the SDK adds to the contract's [`ErrorCode::ALL`] (none retry-safe). With
/// `ErrorCode::ALL` this is the one list of codes callers may see: the npm package's
/// `ErrorCode`, its retry verdicts, its TypeScript union and the documented tables are
/// checked against it by `lock-wasm/tests/error_codes.rs`.
pub const SDK_CODES: [&str; 1] = [TRANSPORT];

/// A call that did not produce its success body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransportError {
    /// The server answered with a non-2xx status and a contract error body (bodies that are
    /// not JSON are wrapped into one with code INTERNAL and the raw text as message).
    #[error("HTTP {status}: {} ({})", body.code, body.message)]
    Status {
        /// The HTTP status.
        status: u16,
        /// The decoded `{code, message, ...}` body.
        body: ErrorBody,
    },
    /// No answer within the per-request timeout. The request may have taken effect.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The request could not be sent or its answer not read (refused, reset, DNS, CORS).
    #[error("network error: {0}")]
    Network(String),
    /// A 2xx answer whose body is not the contract's shape.
    #[error("malformed answer: {0}")]
    Decode(String),
}

impl TransportError {
    /// Builds a `Status` error from a status and its body text, tolerating non-JSON bodies
    /// (a proxy's HTML 502 must not become a decode panic). Decodes with serde_json; see
    /// [`TransportError::from_status_with`] for the mapping.
    pub fn from_status(status: u16, body_text: &str) -> Self {
        Self::from_status_with(status, body_text, |text| serde_json::from_str(text).ok())
    }

    /// The one status mapping of every HTTP transport, with the caller's decoder of the
    /// contract error body (serde_json natively; the wasm transport uses the platform's
    /// `JSON.parse` so the module carries no second JSON parser). A body the decoder rejects
    /// (a proxy's HTML 502, an empty 503) becomes INTERNAL, or NOT_LEADER for a 503, with its
    /// first 200 characters as message.
    pub fn from_status_with(
        status: u16,
        body_text: &str,
        decode: impl FnOnce(&str) -> Option<ErrorBody>,
    ) -> Self {
        let body = decode(body_text).unwrap_or_else(|| {
            let code = if status == 503 {
                ErrorCode::NotLeader
            } else {
                ErrorCode::Internal
            };
            ErrorBody::new(code, body_text.chars().take(200).collect::<String>())
        });
        TransportError::Status { status, body }
    }

    /// The contract code, when the server answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            TransportError::Status { body, .. } => Some(body.code),
            _ => None,
        }
    }
}

/// What an SDK call can fail with. Callers branch on the variant; the retry verdict of each
/// is in the module table. Not-granted is not an error: `acquire` returns `Ok(None)`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LockError {
    /// The key is held by someone else (409/429), or — SDK-local — the same session already
    /// has an acquire of this key in flight (reentrancy is per session, not per task).
    #[error("contention on {key}: {message}")]
    Contention {
        /// The contended key.
        key: String,
        /// Why, for logs.
        message: String,
    },
    /// 503: this replica cannot accept writes now; `leader` is a hint when it knows one.
    #[error("not leader (leader hint: {leader:?})")]
    NotLeader {
        /// Where writes are accepted, if the replica said.
        leader: Option<String>,
    },
    /// 400, or input the SDK refuses before sending (bad key, TTL, policy). Never retried.
    #[error("validation failed on {field}: {message}")]
    Validation {
        /// The offending field (`key`, `ttlMillis`, `waitMillis`, ...).
        field: String,
        /// Human-readable reason.
        message: String,
    },
    /// 404 SESSION_NOT_FOUND, or the local session deadline passed without a successful
    /// heartbeat: every lock of the session is gone.
    #[error("session lost")]
    SessionLost,
    /// The handle for this key is lost (deadline passed, missing from a heartbeat, or 409
    /// LOCK_LOST). Re-acquiring it on the same session fails with this until it is released.
    #[error("lock on {key} lost")]
    LockLost {
        /// The lost key.
        key: String,
    },
    /// A fenced resource saw a higher token. Never retried: another worker may own the side
    /// effect.
    #[error("fenced out (highest token seen: {highest_token:?})")]
    FencedOut {
        /// The highest token the resource has seen, when it said.
        highest_token: Option<u64>,
    },
    /// No answer within the per-request timeout; the request may have taken effect.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The server could not be reached.
    #[error("network error: {0}")]
    Network(String),
    /// The session was closed by its owner; nothing more can be done with it.
    #[error("session closed")]
    Closed,
    /// Any other answer (5xx, unexpected 4xx, malformed body). Never retried.
    #[error("unexpected answer: HTTP {status} {code}: {message}")]
    Unexpected {
        /// HTTP status, 0 when the body was malformed.
        status: u16,
        /// Contract code, `INTERNAL` when none.
        code: ErrorCode,
        /// Message for logs.
        message: String,
    },
}

impl LockError {
    /// Maps a transport failure of a call on `key` (empty for session calls), C2 ct2-exceptions.
    pub fn from_transport(err: TransportError, key: &str) -> Self {
        match err {
            TransportError::Timeout(after) => LockError::Timeout(after),
            TransportError::Network(message) => LockError::Network(message),
            TransportError::Decode(message) => LockError::Unexpected {
                status: 0,
                code: ErrorCode::Internal,
                message,
            },
            TransportError::Status { status, body } => match body.code {
                ErrorCode::LockContended | ErrorCode::ContentionExceeded => LockError::Contention {
                    key: key.to_owned(),
                    message: body.message,
                },
                ErrorCode::NotLeader => LockError::NotLeader {
                    leader: body.leader,
                },
                ErrorCode::ValidationFailed => LockError::Validation {
                    field: body.field.unwrap_or_default(),
                    message: body.message,
                },
                ErrorCode::SessionNotFound => LockError::SessionLost,
                ErrorCode::LockLost => LockError::LockLost {
                    key: key.to_owned(),
                },
                ErrorCode::FencedOut => LockError::FencedOut {
                    highest_token: body.highest_token,
                },
                code => LockError::Unexpected {
                    status,
                    code,
                    message: body.message,
                },
            },
        }
    }

    /// The stable code callers branch on (the JS `err.code`): the contract's wire code, or
    /// [`TRANSPORT`] for a timeout or network failure, which has none. A closed session
    /// answers like a lost one.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::Contention { .. } => ErrorCode::LockContended.as_str(),
            LockError::NotLeader { .. } => ErrorCode::NotLeader.as_str(),
            LockError::Validation { .. } => ErrorCode::ValidationFailed.as_str(),
            LockError::SessionLost | LockError::Closed => ErrorCode::SessionNotFound.as_str(),
            LockError::LockLost { .. } => ErrorCode::LockLost.as_str(),
            LockError::FencedOut { .. } => ErrorCode::FencedOut.as_str(),
            LockError::Timeout(_) | LockError::Network(_) => TRANSPORT,
            LockError::Unexpected { code, .. } => code.as_str(),
        }
    }

    /// The retry verdict of [`LockError::code`] ([`ErrorCode::retry_safe`]; the SDK-only
    /// codes are never retry-safe): may the *acquire* be retried? A side effect never is.
    pub fn retryable(&self) -> bool {
        ErrorCode::from_wire(self.code()).is_some_and(ErrorCode::retry_safe)
    }

    /// A local validation failure (nothing was sent).
    pub(crate) fn validation(field: &str, message: impl Into<String>) -> Self {
        LockError::Validation {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: ErrorCode) -> TransportError {
        TransportError::Status {
            status: code.status(),
            body: ErrorBody::new(code, "m"),
        }
    }

    #[test]
    fn codes_map_to_the_design_table() {
        let map = |code| LockError::from_transport(status(code), "k");
        assert!(matches!(
            map(ErrorCode::LockContended),
            LockError::Contention { .. }
        ));
        assert!(matches!(
            map(ErrorCode::ContentionExceeded),
            LockError::Contention { .. }
        ));
        assert!(matches!(
            map(ErrorCode::NotLeader),
            LockError::NotLeader { .. }
        ));
        assert!(matches!(
            map(ErrorCode::ValidationFailed),
            LockError::Validation { .. }
        ));
        assert_eq!(map(ErrorCode::SessionNotFound), LockError::SessionLost);
        assert!(matches!(
            map(ErrorCode::LockLost),
            LockError::LockLost { .. }
        ));
        assert!(matches!(
            map(ErrorCode::FencedOut),
            LockError::FencedOut { .. }
        ));
        assert!(matches!(
            map(ErrorCode::Internal),
            LockError::Unexpected { status: 500, .. }
        ));
    }

    #[test]
    fn non_json_bodies_do_not_panic() {
        let err = TransportError::from_status(502, "<html>bad gateway</html>");
        assert_eq!(err.code(), Some(ErrorCode::Internal));
        let err = TransportError::from_status(503, "");
        assert_eq!(err.code(), Some(ErrorCode::NotLeader));
    }
}
