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

/// L2 request body, optional: without it (or without `since`) the answer lists every lock.
/// `since` is the `version` of the last L2 answer the client applied; the answer then says
/// only what changed after it (or nothing, when nothing did). Unknown fields are ignored, as
/// the whole body was before versions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// The longest `since` a server reads (longer: 400 VALIDATION_FAILED). Versions are far
/// shorter; the bound only keeps hostile input small.
pub const SINCE_MAX_BYTES: usize = 128;

/// L2 200 answer: the renewed TTL, the session's hold `version` and, in one of three shapes,
/// the locks the session still holds at that version:
/// - `locks` present: every lock (no `since` sent, or one the server cannot answer from:
///   unknown, too old, from before a restart or another replica). A key missing is lost.
/// - `changes` present: what changed after `since`, one entry per key, the key's latest
///   state. A `gone` key, and a `granted` key's holds with lower tokens, are lost.
/// - neither: nothing changed since `since`; the client's view is exact as it is.
///
/// A server from before versions sends `locks` and no `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResponse {
    pub ttl_millis: u64,
    /// Opaque; sent back as `since` by the next L2 of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locks: Option<Vec<HeldLock>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<HoldChange>>,
}

impl HeartbeatResponse {
    /// The full-list answer.
    pub fn full(ttl_millis: u64, version: Option<String>, locks: Vec<HeldLock>) -> Self {
        HeartbeatResponse {
            ttl_millis,
            version,
            locks: Some(locks),
            changes: None,
        }
    }

    /// The answer for a `since` equal to the current version: no list.
    pub fn unchanged(ttl_millis: u64, version: String) -> Self {
        HeartbeatResponse {
            ttl_millis,
            version: Some(version),
            locks: None,
            changes: None,
        }
    }

    /// The answer with what changed after `since`.
    pub fn delta(ttl_millis: u64, version: String, changes: Vec<HoldChange>) -> Self {
        HeartbeatResponse {
            ttl_millis,
            version: Some(version),
            locks: None,
            changes: Some(changes),
        }
    }
}

/// One key's change in a delta L2 answer: its latest state at the answer's version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldChange {
    pub key: String,
    /// `granted`: the hold's token. `gone`: the token of the hold that ended last.
    pub fencing_token: u64,
    #[serde(default)]
    pub mode: crate::LockMode,
    pub change: ChangeKind,
}

/// What a [`HoldChange`] says of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// The session holds the key with this token (a grant the client may not have seen).
    Granted,
    /// The session holds the key no more (released, revoked, expired).
    Gone,
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

/// L5 `GET /v1/sessions/{holderId}` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    pub session_id: String,
    pub remaining_millis: u64,
    pub locks: Vec<LockStatus>,
}
