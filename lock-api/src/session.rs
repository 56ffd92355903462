//! Session bodies: L1 open, L2 heartbeat, L5 status.

use serde::{Deserialize, Serialize};

/// L1 `POST /v1/sessions` request. Both fields are optional; an empty body `{}` is valid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenSessionRequest {
    /// Session TTL; the server default (`lock.session.ttl`, 15 s) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_millis: Option<u64>,
    /// Free-form owner label for logs and the dashboard (≤ 128 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// L1 201 answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOpened {
    /// 128-bit random id, hex encoded: the session's credential (with the client's token when
    /// the server has an auth file), so it is unguessable and never shown to anyone else.
    pub session_id: String,
    /// The session's public name: what L7 shows for its locks, and what logs carry. A keyed
    /// hash of the id, so it cannot be turned back into it; the same from every replica and
    /// after a restart.
    pub holder_id: String,
    pub ttl_millis: u64,
    /// How often the client should heartbeat (a third of the TTL).
    pub heartbeat_millis: u64,
}

/// One lock a session holds, as listed by L2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldLock {
    pub key: String,
    pub fencing_token: u64,
    /// The hold's mode (`exclusive` when absent, from a server before shared holds).
    #[serde(default)]
    pub mode: crate::LockMode,
}

/// L2 200 answer: the renewed TTL and every lock the session still holds. A key missing
/// from `locks` is lost; the client marks its handle lost at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResponse {
    pub ttl_millis: u64,
    pub locks: Vec<HeldLock>,
}

/// One lock in an L5 answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockStatus {
    pub key: String,
    pub fencing_token: u64,
    pub remaining_millis: u64,
    /// The hold's mode (`exclusive` when absent, from a server before shared holds).
    #[serde(default)]
    pub mode: crate::LockMode,
}

/// L5 `GET /v1/sessions/{id}` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    pub session_id: String,
    pub remaining_millis: u64,
    pub locks: Vec<LockStatus>,
}
