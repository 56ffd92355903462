//! A contender's failures in words a newcomer can act on.

use lock_api::ErrorCode;
use lock_wasm::error::TransportError;

/// What a lost session most likely means in the browser, and what to do about it.
pub const SESSION_EXPIRED: &str = "a session expired before its heartbeat got through \
    (SESSION_NOT_FOUND): with many sessions over HTTP/1.1 the browser queues requests (6 \
    connections per server), so heartbeats arrive late; run the server over TLS for HTTP/2 \
    (LOCK_TLS=self-signed scripts/run.sh), raise the TTL or lower the number of sessions";

/// A transport error in words a newcomer can act on.
pub fn describe(err: &TransportError) -> String {
    match err {
        TransportError::Network(detail) => format!(
            "cannot reach the lock server (is it running, and does it allow this origin?): {detail}"
        ),
        TransportError::Timeout(after) => {
            format!("the lock server did not answer within {after:?}")
        }
        other if other.code() == Some(ErrorCode::SessionNotFound) => SESSION_EXPIRED.to_string(),
        other => other.to_string(),
    }
}
