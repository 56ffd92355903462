//! The request paths of contract C3, built once for every client (the SDK's native and fetch
//! transports, the end-to-end test client, the chaos sampler). Each path segment that carries
//! a key or a holder id is percent-encoded with [`encode_key`]. The server's route table
//! (`lock-server/src/routes/mod.rs`) is the other side of the same list.
//!
//! No path carries a session id: it is the session's credential, and URLs end up in proxy
//! access logs, browser histories and traces. L2, L3 and L5 name the session by its public
//! `holderId` in the path and carry the session id in the [`SESSION_ID_HEADER`] header.

use crate::limits::encode_key;

/// L1 `POST`.
pub const SESSIONS: &str = "/v1/sessions";

/// The header that carries the session id on L2, L3 and L5.
pub const SESSION_ID_HEADER: &str = "Lock-Session-Id";

/// L3 `DELETE` and L5 `GET`: `/v1/sessions/{holderId}`.
pub fn session(holder_id: &str) -> String {
    format!("{SESSIONS}/{}", encode_key(holder_id))
}

/// L2 `POST`: `/v1/sessions/{holderId}/heartbeat`.
pub fn heartbeat(holder_id: &str) -> String {
    format!("{}/heartbeat", session(holder_id))
}

/// L7 `GET`: `/v1/locks/{key}`.
pub fn lock(key: &str) -> String {
    format!("/v1/locks/{}", encode_key(key))
}

/// L4 `POST`: `/v1/locks/{key}/acquire`.
pub fn acquire(key: &str) -> String {
    format!("{}/acquire", lock(key))
}

/// L6 `POST`: `/v1/locks/{key}/release`.
pub fn release(key: &str) -> String {
    format!("{}/release", lock(key))
}

/// L8 `GET`: `/v1/locks/{key}/events` (add `?after=<id>` to resume).
pub fn events(key: &str) -> String {
    format!("{}/events", lock(key))
}

/// L9 `POST`: `/v1/locks/{key}/value`.
pub fn value(key: &str) -> String {
    format!("{}/value", lock(key))
}

/// R1 `POST`: `/v1/admin/locks/{key}/revoke`.
pub fn revoke(key: &str) -> String {
    format!("/v1/admin/locks/{}/revoke", encode_key(key))
}

/// Demo ledger `POST` (append) and `GET` (read): `/v1/demo/ledger/{key}`.
pub fn ledger(key: &str) -> String {
    format!("/v1/demo/ledger/{}", encode_key(key))
}

/// Unfenced demo ledger `POST` (append) and `GET` (read): `/v1/demo/unfenced-ledger/{key}`.
pub fn unfenced_ledger(key: &str) -> String {
    format!("/v1/demo/unfenced-ledger/{}", encode_key(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ids_are_one_encoded_segment() {
        assert_eq!(session("ab12"), "/v1/sessions/ab12");
        assert_eq!(heartbeat("ab12"), "/v1/sessions/ab12/heartbeat");
        assert_eq!(lock("a/b c"), "/v1/locks/a%2Fb%20c");
        assert_eq!(acquire("a/b"), "/v1/locks/a%2Fb/acquire");
        assert_eq!(release("a/b"), "/v1/locks/a%2Fb/release");
        assert_eq!(events("a/b"), "/v1/locks/a%2Fb/events");
        assert_eq!(value("a/b"), "/v1/locks/a%2Fb/value");
        assert_eq!(revoke("a/b"), "/v1/admin/locks/a%2Fb/revoke");
        assert_eq!(ledger("a/b"), "/v1/demo/ledger/a%2Fb");
        assert_eq!(unfenced_ledger("a/b"), "/v1/demo/unfenced-ledger/a%2Fb");
    }
}
