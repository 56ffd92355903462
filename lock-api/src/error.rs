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
    /// 503: this replica cannot serve the request now for a reason about the replica itself
    /// (it is shutting down, or holding back grants after an unclean start). A store that
    /// cannot write is [`ErrorCode::StoreUnavailable`].
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
    /// 503 on any route whose store call found the store unable to write (a full disk, an
    /// I/O error, a read-only file, a database locked past its busy timeout; etcd out of
    /// space, without quorum or unreachable). The body's `reason` says which
    /// ([`Unavailability`]) and `retryAfterMillis` when to try again. Retry-safe: nothing of
    /// the failed write was applied.
    StoreUnavailable,
}

impl ErrorCode {
    /// Every code. Adding a variant breaks [`ErrorCode::status`]'s match until it is handled
    /// there; add it here too (`every_code_is_listed_once` checks the list has no repeats).
    pub const ALL: [ErrorCode; 16] = [
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
        ErrorCode::StoreUnavailable,
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
            ErrorCode::NotLeader | ErrorCode::StoreUnavailable => 503,
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
            ErrorCode::LockContended
                | ErrorCode::ContentionExceeded
                | ErrorCode::NotLeader
                | ErrorCode::StoreUnavailable
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
            ErrorCode::StoreUnavailable => "STORE_UNAVAILABLE",
        }
    }
}

/// Why the store cannot write: the closed set of STORE_UNAVAILABLE's `reason` (C3), also the
/// `reason` label of `lock_store_errors_total` and of the `store_unavailable` log line (C4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unavailability {
    /// SQLite: the data directory's disk is full.
    DiskFull,
    /// SQLite: the disk answered an I/O error.
    IoError,
    /// SQLite: the database file or its directory cannot be written.
    ReadOnly,
    /// SQLite: the database stayed locked past the busy timeout (another process holds it).
    Busy,
    /// etcd: the cluster is out of space (its NOSPACE alarm: "database space exceeded").
    SpaceExceeded,
    /// etcd: no leader, or a request timed out for lack of quorum.
    NoQuorum,
    /// etcd: no endpoint could be reached.
    Unreachable,
}

impl Unavailability {
    /// Every reason, in the order `/metrics` lists them.
    pub const ALL: [Unavailability; 7] = [
        Unavailability::DiskFull,
        Unavailability::IoError,
        Unavailability::ReadOnly,
        Unavailability::Busy,
        Unavailability::SpaceExceeded,
        Unavailability::NoQuorum,
        Unavailability::Unreachable,
    ];

    /// The wire spelling, e.g. `"disk_full"`.
    pub fn label(self) -> &'static str {
        match self {
            Unavailability::DiskFull => "disk_full",
            Unavailability::IoError => "io_error",
            Unavailability::ReadOnly => "read_only",
            Unavailability::Busy => "busy",
            Unavailability::SpaceExceeded => "space_exceeded",
            Unavailability::NoQuorum => "no_quorum",
            Unavailability::Unreachable => "unreachable",
        }
    }

    /// The reason spelled `text`; `None` for one this version does not know.
    pub fn from_label(text: &str) -> Option<Unavailability> {
        Self::ALL.into_iter().find(|reason| reason.label() == text)
    }

    /// A message for the error body: the cause in words, never an address or a path.
    pub fn message(self) -> &'static str {
        match self {
            Unavailability::DiskFull => "the store cannot write: its disk is full",
            Unavailability::IoError => "the store cannot write: its disk reported an I/O error",
            Unavailability::ReadOnly => "the store cannot write: its files are read-only",
            Unavailability::Busy => "the store cannot write: its database is locked",
            Unavailability::SpaceExceeded => "the store cannot write: etcd is out of space",
            Unavailability::NoQuorum => "the store cannot write: etcd has no quorum",
            Unavailability::Unreachable => "the store cannot write: etcd is unreachable",
        }
    }
}

impl std::fmt::Display for Unavailability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
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
    /// NOT_LEADER / STORE_UNAVAILABLE / CONTENTION_EXCEEDED: a hint, in milliseconds, of when
    /// to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_millis: Option<u64>,
    /// FENCED_OUT: the highest token the resource has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_token: Option<u64>,
    /// LIMIT_MISMATCH: the limit in force for the key's shared holds (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// STORE_UNAVAILABLE: why the store cannot write, one of [`Unavailability::label`]'s
    /// values (kept as text: a newer server may name a reason this version does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
            reason: None,
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
    fn only_contention_and_unavailability_are_retry_safe() {
        assert!(ErrorCode::StoreUnavailable.retry_safe());
        assert_eq!(ErrorCode::StoreUnavailable.status(), 503);
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
    fn reasons_round_trip_and_travel_as_camel_case_fields() {
        for reason in Unavailability::ALL {
            assert_eq!(Unavailability::from_label(reason.label()), Some(reason));
        }
        assert_eq!(Unavailability::from_label("cosmic_rays"), None);
        let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, "m");
        body.reason = Some(Unavailability::DiskFull.label().to_owned());
        body.retry_after_millis = Some(1000);
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(
            json,
            r#"{"code":"STORE_UNAVAILABLE","message":"m","retryAfterMillis":1000,"reason":"disk_full"}"#
        );
        assert_eq!(serde_json::from_str::<ErrorBody>(&json).unwrap(), body);
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
