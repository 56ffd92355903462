//! The error body every non-2xx answer carries, and the codes with their retry verdicts.

use serde::{Deserialize, Serialize};

/// Stable error codes (C3 "Error codes": the lock codes plus the routing and transport
/// ones). The wire form is SCREAMING_SNAKE_CASE, e.g. `"LOCK_CONTENDED"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// 409 on L4: someone else holds the key.
    LockContended,
    /// 429 on L4: too many waiters or attempts on this key right now.
    ContentionExceeded,
    /// 503: this replica cannot accept writes now (no leader, backend down, holding back
    /// grants after an unclean start).
    NotLeader,
    /// 400: the request is malformed; never retry.
    ValidationFailed,
    /// 404 on session surfaces and L4: the session is gone, and so are its locks.
    SessionNotFound,
    /// 409 on L6 (benign there) and in the SDK when a handle is lost.
    LockLost,
    /// 409 from a fenced resource: a higher token was already seen. Never retry.
    FencedOut,
    /// 413: body over the size limit.
    PayloadTooLarge,
    /// 401: no known credential (a missing, malformed or unknown bearer token; R1 without
    /// one). Never retry: the configuration is wrong.
    Unauthorized,
    /// 403: a known credential that does not cover this request (a key outside the client's
    /// `keyPrefixes`, R1 without admin rights, a wrong admin token). Never retry.
    Forbidden,
    /// 404 for an unknown route.
    NotFound,
    /// 405 for a known route with the wrong method.
    MethodNotAllowed,
    /// 500: a bug or an unexpected store failure; never caused by client input.
    Internal,
    /// 409 on L4: a shared hold asked for a `limit` other than the one the key's shared
    /// holders and queued shared requests agreed on (the body's `limit`, absent for none).
    /// Never retry: the caller's configuration disagrees with the others'.
    LimitMismatch,
    /// 409 on L4: an exclusive hold asked by a session that holds the key shared. Two
    /// readers upgrading would wait for each other forever; release, then acquire. Never
    /// retry.
    UpgradeNotAllowed,
}

impl ErrorCode {
    /// Every code. Adding a variant breaks [`ErrorCode::status`]'s match until it is handled
    /// there; add it here too (`every_code_is_listed_once` checks the list has no repeats).
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::LockContended,
        ErrorCode::ContentionExceeded,
        ErrorCode::NotLeader,
        ErrorCode::ValidationFailed,
        ErrorCode::SessionNotFound,
        ErrorCode::LockLost,
        ErrorCode::FencedOut,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Internal,
        ErrorCode::LimitMismatch,
        ErrorCode::UpgradeNotAllowed,
    ];

    /// The code spelled `text` on the wire (`"LOCK_CONTENDED"`); `None` for an unknown one.
    pub fn from_wire(text: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|code| code.as_str() == text)
    }

    /// The HTTP status this code travels with.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::LockContended
            | ErrorCode::LockLost
            | ErrorCode::FencedOut
            | ErrorCode::LimitMismatch
            | ErrorCode::UpgradeNotAllowed => 409,
            ErrorCode::ContentionExceeded => 429,
            ErrorCode::NotLeader => 503,
            ErrorCode::ValidationFailed => 400,
            ErrorCode::SessionNotFound | ErrorCode::NotFound => 404,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Internal => 500,
        }
    }

    /// The retry verdict (C3 "Error codes"): may the acquire loop retry L4 after this code?
    /// Nothing else is ever retried, and a side effect never is.
    pub fn retry_safe(self) -> bool {
        matches!(
            self,
            ErrorCode::LockContended | ErrorCode::ContentionExceeded | ErrorCode::NotLeader
        )
    }

    /// The wire spelling, e.g. `"LOCK_CONTENDED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::LockContended => "LOCK_CONTENDED",
            ErrorCode::ContentionExceeded => "CONTENTION_EXCEEDED",
            ErrorCode::NotLeader => "NOT_LEADER",
            ErrorCode::ValidationFailed => "VALIDATION_FAILED",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::LockLost => "LOCK_LOST",
            ErrorCode::FencedOut => "FENCED_OUT",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::LimitMismatch => "LIMIT_MISMATCH",
            ErrorCode::UpgradeNotAllowed => "UPGRADE_NOT_ALLOWED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{"code": "...", "message": "...", ...details}`. Known details get typed fields; any
/// other detail a newer server adds is kept in `extra` rather than rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// VALIDATION_FAILED: the offending field (`"waitMillis"`, `"key"`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// NOT_LEADER: where writes are accepted, when this replica knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// NOT_LEADER / CONTENTION_EXCEEDED: a hint, in milliseconds, of when to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_millis: Option<u64>,
    /// FENCED_OUT: the highest token the resource has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_token: Option<u64>,
    /// LIMIT_MISMATCH: the limit in force for the key's shared holds (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ErrorBody {
    /// A body with a code and message and no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            field: None,
            leader: None,
            retry_after_millis: None,
            highest_token: None,
            limit: None,
            extra: serde_json::Map::new(),
        }
    }

    /// A VALIDATION_FAILED body naming the field.
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut body = ErrorBody::new(ErrorCode::ValidationFailed, message);
        body.field = Some(field.into());
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_in_wire_spelling() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::from_wire("NOPE"), None);
    }

    #[test]
    fn every_code_is_listed_once() {
        let mut spellings: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        spellings.sort_unstable();
        spellings.dedup();
        assert_eq!(spellings.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn only_contention_and_not_leader_are_retry_safe() {
        assert!(ErrorCode::LockContended.retry_safe());
        assert!(ErrorCode::ContentionExceeded.retry_safe());
        assert!(ErrorCode::NotLeader.retry_safe());
        assert!(!ErrorCode::FencedOut.retry_safe());
        assert!(!ErrorCode::ValidationFailed.retry_safe());
        assert!(!ErrorCode::SessionNotFound.retry_safe());
        assert!(!ErrorCode::LockLost.retry_safe());
        assert!(!ErrorCode::Unauthorized.retry_safe());
        assert!(!ErrorCode::Forbidden.retry_safe());
        assert!(!ErrorCode::LimitMismatch.retry_safe());
        assert!(!ErrorCode::UpgradeNotAllowed.retry_safe());
    }

    #[test]
    fn unknown_details_are_kept() {
        let body: ErrorBody =
            serde_json::from_str(r#"{"code":"NOT_LEADER","message":"m","leader":"x","term":3}"#)
                .unwrap();
        assert_eq!(body.leader.as_deref(), Some("x"));
        assert_eq!(body.extra.get("term"), Some(&serde_json::json!(3)));
    }
}
