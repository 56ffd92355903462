//! The errors callers branch on (contract C2), and how a transport failure maps to them
//! (C2 ct2-exceptions).
//!
//! | wire | [`TransportError`] | [`LockError`] | retried by the acquire loop? |
//! |---|---|---|---|
//! | 409 LOCK_CONTENDED, 429 CONTENTION_EXCEEDED | `Status` | `Contention` | yes: full-jitter backoff inside the budget |
//! | 503 NOT_LEADER | `Status` | `NotLeader` | yes: fixed floor delay inside the budget |
//! | 503 STORE_UNAVAILABLE | `Status` | `StoreUnavailable` | yes: after `retryAfterMillis` (at least the floor), capped by the budget |
//! | 400 VALIDATION_FAILED | `Status` | `Validation` | never |
//! | 404 SESSION_NOT_FOUND | `Status` | `SessionLost` | never: the session's locks are gone |
//! | 409 LOCK_LOST | `Status` | `LockLost` | never (benign on release) |
//! | 409 FENCED_OUT | `Status` | `FencedOut` | **never**: another worker may own the side effect |
//! | 409 LIMIT_MISMATCH | `Status` | `LimitMismatch` | never: the caller's limit disagrees with the key's shared holders' |
//! | 409 UPGRADE_NOT_ALLOWED | `Status` | `UpgradeNotAllowed` | never: the session holds the key shared |
//! | 401 UNAUTHORIZED | `Status` | `Unauthorized` | never: the token is missing or unknown |
//! | 403 FORBIDDEN | `Status` | `Forbidden` | never: the key is outside the client's prefixes |
//! | no answer in time | `Timeout` | `Timeout` | L4 only (see below) |
//! | connection failed | `Network` | `Network` | L4 only (see below) |
//! | a 502, 503 or 504 without the contract's body (a balancer's page) | `Network` | `Network` | L4 only (see below) |
//! | not the contract's answer: an error body that is not JSON of the contract's shape, 404 NOT_FOUND or 405 METHOD_NOT_ALLOWED (the base URL is not the service's root), a 2xx body of the wrong shape | `Unexpected`, `Decode` | `UnexpectedAnswer` | never |
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

/// The code of an answer that is not the contract's (see [`TransportError::Unexpected`]):
/// the base URL points at something other than the lock service's root.
pub const UNEXPECTED_ANSWER: &str = "UNEXPECTED_ANSWER";

/// The code of `using` (the npm package's) when the key was not granted within the acquire
/// budget. Plain `acquire` never fails with it: not granted is its empty result (`Ok(None)`,
/// `undefined`); `using` has no empty result to give, as its callback did not run.
pub const NOT_GRANTED: &str = "NOT_GRANTED";

/// The codes the SDK adds to the contract's [`ErrorCode::ALL`]. With `ErrorCode::ALL` this is
/// the one list of codes callers may see: the npm package's `ErrorCode`, its retry verdicts,
/// its TypeScript union and the documented tables are checked against it by
/// `lock-wasm/tests/error_codes.rs`.
pub const SDK_CODES: [&str; 3] = [TRANSPORT, UNEXPECTED_ANSWER, NOT_GRANTED];

/// Of [`SDK_CODES`], those after which a retry of the acquire can succeed: the service may be
/// back (`TRANSPORT`: no answer, or a balancer's 502/503/504), the key may be free.
pub const SDK_RETRY_SAFE: [&str; 2] = [TRANSPORT, NOT_GRANTED];

/// The retry verdict of any code callers may see: may the *acquire* be retried? A side effect
/// never is.
pub fn retry_safe(code: &str) -> bool {
    SDK_RETRY_SAFE.contains(&code) || ErrorCode::from_wire(code).is_some_and(ErrorCode::retry_safe)
}

/// A call that did not produce its success body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransportError {
    /// The server answered with a non-2xx status and a contract error body (a 503 whose body
    /// is not one is wrapped into NOT_LEADER).
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
    /// A non-2xx answer that is not the lock service's: an error body that is not a contract
    /// error body (another server's HTML page), or a routing error (404 NOT_FOUND, 405
    /// METHOD_NOT_ALLOWED: the SDK only calls routes that exist, so the base URL is not the
    /// service's root — one ending in `/v1`, say). `detail` is short and never the body.
    #[error("unexpected answer: HTTP {status}: {detail}")]
    Unexpected {
        /// The HTTP status.
        status: u16,
        /// What was wrong with it, in a few words.
        detail: String,
    },
}

impl TransportError {
    /// Builds a `Status` error from a status and its body text, tolerating non-JSON bodies
    /// (a balancer's HTML 502 must not become a decode panic). Decodes with serde_json; see
    /// [`TransportError::from_status_with`] for the mapping.
    pub fn from_status(status: u16, body_text: &str) -> Self {
        Self::from_status_with(status, body_text, |text| serde_json::from_str(text).ok())
    }

    /// The one status mapping of every HTTP transport, with the caller's decoder of the
    /// contract error body (serde_json natively; the wasm transport uses the platform's
    /// `JSON.parse` so the module carries no second JSON parser). A body the decoder rejects
    /// becomes [`TransportError::Unexpected`] (never its text: another server's HTML page is
    /// no error message), except for a 502, 503 or 504: that is a balancer or proxy in front
    /// of a service it could not reach (an HTML or empty page while a replica restarts), so
    /// it is [`TransportError::Network`], the same as no connection, retried as such. A
    /// routing error is [`TransportError::Unexpected`] too.
    pub fn from_status_with(
        status: u16,
        body_text: &str,
        decode: impl FnOnce(&str) -> Option<ErrorBody>,
    ) -> Self {
        match decode(body_text) {
            Some(body)
                if matches!(body.code, ErrorCode::NotFound | ErrorCode::MethodNotAllowed) =>
            {
                TransportError::Unexpected {
                    status,
                    detail: format!(
                        "{} from a lock service: the base URL must be its root, without /v1",
                        body.code.as_str()
                    ),
                }
            }
            Some(body) => TransportError::Status { status, body },
            None if matches!(status, 502..=504) => TransportError::Network(format!(
                "HTTP {status} from a proxy or balancer: the lock service was not reached"
            )),
            None => TransportError::Unexpected {
                status,
                detail: "not a lock service error body: is the base URL the lock service's?"
                    .to_owned(),
            },
        }
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
    /// The key is held by someone else (409/429). The acquire loop retries these and ends
    /// not granted (`Ok(None)`); only a caller of the raw transport sees this error.
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
    /// 503 STORE_UNAVAILABLE: the service's store cannot write now (a full disk, etcd
    /// without quorum, ...); nothing of the request was applied. Retried by the acquire loop
    /// within its budget; heartbeats and release re-sends go on through it.
    #[error("store unavailable ({reason})")]
    StoreUnavailable {
        /// Why, as the server said: `disk_full`, `io_error`, `read_only`, `busy`,
        /// `space_exceeded`, `no_quorum`, `unreachable` (a newer server may name another).
        reason: String,
        /// When the server suggested trying again.
        retry_after: Option<Duration>,
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
    /// LOCK_LOST). Nesting into a lost handle ([`crate::LockHandle::nest`]) fails with it.
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
    /// 409 LIMIT_MISMATCH: a shared acquire asked for a limit other than the one the key's
    /// shared holders (and queued shared requests) agreed on. Never retried: the caller's
    /// configuration disagrees with the others', and waiting does not change that.
    #[error("limit mismatch on {key}: the limit in force is {}", limit_text(*.limit))]
    LimitMismatch {
        /// The key.
        key: String,
        /// The limit in force for the key's shared holds; `None`: they have no limit.
        limit: Option<u32>,
    },
    /// 409 UPGRADE_NOT_ALLOWED, or refused by the SDK before sending anything: an exclusive
    /// hold asked for by a holder of the key's shared hold (an exclusive acquire by a session
    /// that holds the key shared, or [`crate::LockHandle::nest_exclusive`] on a shared
    /// handle). Two readers upgrading would wait for each other forever; release the shared
    /// hold, then acquire exclusive. Never retried.
    #[error("upgrade not allowed on {key}: it is held shared; release it, then acquire exclusive")]
    UpgradeNotAllowed {
        /// The key.
        key: String,
    },
    /// 401: the server has an auth file and the client's token (the `token` option) is
    /// missing or unknown to it. Never retried: a configuration error.
    #[error("unauthorized: {message}")]
    Unauthorized {
        /// The server's reason.
        message: String,
    },
    /// 403: the token is known but does not cover the request (a key outside the client's
    /// `keyPrefixes`). Never retried.
    #[error("forbidden: {message}")]
    Forbidden {
        /// The server's reason.
        message: String,
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
    /// Not the lock service's answer ([`TransportError::Unexpected`], or a 2xx body of the
    /// wrong shape, `status` 0): the base URL points elsewhere. Never retried.
    #[error("unexpected answer: {detail}")]
    UnexpectedAnswer {
        /// HTTP status, 0 for a success answer with a malformed body.
        status: u16,
        /// A few words on what was wrong, never the body.
        detail: String,
    },
    /// Any other contract answer the SDK does not expect from a healthy server (500
    /// INTERNAL, 413). Never retried.
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
            TransportError::Decode(detail) => LockError::UnexpectedAnswer { status: 0, detail },
            TransportError::Unexpected { status, detail } => {
                LockError::UnexpectedAnswer { status, detail }
            }
            TransportError::Status { status, body } => match body.code {
                ErrorCode::LockContended | ErrorCode::ContentionExceeded => LockError::Contention {
                    key: key.to_owned(),
                    message: body.message,
                },
                ErrorCode::NotLeader => LockError::NotLeader {
                    leader: body.leader,
                },
                ErrorCode::StoreUnavailable => LockError::StoreUnavailable {
                    reason: body.reason.unwrap_or_default(),
                    retry_after: body.retry_after_millis.map(Duration::from_millis),
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
                ErrorCode::Unauthorized => LockError::Unauthorized {
                    message: body.message,
                },
                ErrorCode::LimitMismatch => LockError::LimitMismatch {
                    key: key.to_owned(),
                    limit: body.limit,
                },
                ErrorCode::UpgradeNotAllowed => LockError::UpgradeNotAllowed {
                    key: key.to_owned(),
                },
                ErrorCode::Forbidden => LockError::Forbidden {
                    message: body.message,
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
            LockError::StoreUnavailable { .. } => ErrorCode::StoreUnavailable.as_str(),
            LockError::Validation { .. } => ErrorCode::ValidationFailed.as_str(),
            LockError::SessionLost | LockError::Closed => ErrorCode::SessionNotFound.as_str(),
            LockError::LockLost { .. } => ErrorCode::LockLost.as_str(),
            LockError::FencedOut { .. } => ErrorCode::FencedOut.as_str(),
            LockError::Unauthorized { .. } => ErrorCode::Unauthorized.as_str(),
            LockError::Forbidden { .. } => ErrorCode::Forbidden.as_str(),
            LockError::LimitMismatch { .. } => ErrorCode::LimitMismatch.as_str(),
            LockError::UpgradeNotAllowed { .. } => ErrorCode::UpgradeNotAllowed.as_str(),
            LockError::Timeout(_) | LockError::Network(_) => TRANSPORT,
            LockError::UnexpectedAnswer { .. } => UNEXPECTED_ANSWER,
            LockError::Unexpected { code, .. } => code.as_str(),
        }
    }

    /// The retry verdict of [`LockError::code`] ([`retry_safe`]): may the *acquire* be
    /// retried? True only where a retry can succeed. A side effect never is.
    pub fn retryable(&self) -> bool {
        retry_safe(self.code())
    }

    /// A local validation failure (nothing was sent).
    pub(crate) fn validation(field: &str, message: impl Into<String>) -> Self {
        LockError::Validation {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

/// A shared limit for a message: the number, or "none".
fn limit_text(limit: Option<u32>) -> String {
    limit.map_or_else(|| "none".to_owned(), |l| l.to_string())
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
        let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, "m");
        (body.reason, body.retry_after_millis) = (Some("disk_full".into()), Some(1000));
        let store = LockError::from_transport(TransportError::Status { status: 503, body }, "k");
        assert_eq!(
            store,
            LockError::StoreUnavailable {
                reason: "disk_full".into(),
                retry_after: Some(Duration::from_secs(1))
            }
        );
        assert_eq!(store.code(), "STORE_UNAVAILABLE");
        assert!(store.retryable());
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
            map(ErrorCode::Unauthorized),
            LockError::Unauthorized { .. }
        ));
        assert!(matches!(
            map(ErrorCode::Forbidden),
            LockError::Forbidden { .. }
        ));
        let mut body = ErrorBody::new(ErrorCode::LimitMismatch, "m");
        body.limit = Some(3);
        let mismatch = LockError::from_transport(TransportError::Status { status: 409, body }, "k");
        assert_eq!(
            mismatch,
            LockError::LimitMismatch {
                key: "k".into(),
                limit: Some(3)
            }
        );
        assert_eq!(mismatch.code(), "LIMIT_MISMATCH");
        assert!(!mismatch.retryable());
        assert_eq!(
            map(ErrorCode::LimitMismatch),
            LockError::LimitMismatch {
                key: "k".into(),
                limit: None
            },
            "no limit in the body: the key's shared holders have none"
        );
        let upgrade = map(ErrorCode::UpgradeNotAllowed);
        assert_eq!(upgrade, LockError::UpgradeNotAllowed { key: "k".into() });
        assert_eq!(upgrade.code(), "UPGRADE_NOT_ALLOWED");
        assert!(!upgrade.retryable());
        assert!(matches!(
            map(ErrorCode::Internal),
            LockError::Unexpected { status: 500, .. }
        ));
    }

    #[test]
    fn non_json_bodies_do_not_panic() {
        let err = TransportError::from_status(404, "<html>not found</html>");
        assert!(
            matches!(err, TransportError::Unexpected { status: 404, .. }),
            "{err:?}"
        );
        let lock = LockError::from_transport(err, "k");
        assert_eq!(lock.code(), UNEXPECTED_ANSWER);
        assert!(!lock.to_string().contains("html"), "{lock}");
        assert!(!lock.retryable());
        for status in [502, 503, 504] {
            let err = TransportError::from_status(status, "<html>bad gateway</html>");
            assert!(matches!(err, TransportError::Network(_)), "{err:?}");
            let lock = LockError::from_transport(err, "k");
            assert_eq!(lock.code(), TRANSPORT);
            assert!(lock.retryable(), "a balancer's {status} is worth a retry");
        }
        let err = TransportError::from_status(503, "");
        assert!(matches!(err, TransportError::Network(_)), "{err:?}");
        let err = TransportError::from_status(500, "<html>oops</html>");
        assert!(matches!(
            err,
            TransportError::Unexpected { status: 500, .. }
        ));
    }

    #[test]
    fn routing_errors_say_the_base_url_is_wrong() {
        // What a base URL ending in /v1 gets from a lock-server: /v1/v1/sessions.
        let body = r#"{"code":"METHOD_NOT_ALLOWED","message":"method not allowed"}"#;
        let err = LockError::from_transport(TransportError::from_status(405, body), "");
        assert_eq!(err.code(), UNEXPECTED_ANSWER);
        assert!(err.to_string().contains("without /v1"), "{err}");
        let body = r#"{"code":"INTERNAL","message":"store failure"}"#;
        let err = LockError::from_transport(TransportError::from_status(500, body), "");
        assert_eq!(err.code(), "INTERNAL");
    }
}
