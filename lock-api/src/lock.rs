//! Lock bodies: L4 acquire, L6 release, L7 advisory read.

use serde::{Deserialize, Serialize};

/// L4 `POST /v1/locks/{key}/acquire` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcquireRequest {
    pub session_id: String,
    /// Lock TTL; `lock.default.ttl` (10 s) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_millis: Option<u64>,
    /// Server-side wait, 0…30000, default 0 (see [`crate::limits::WAIT_MILLIS_MAX`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_millis: Option<u64>,
}

/// L4 200 answer: the one and only grant shape, on every acquire path of every crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockGrant {
    pub key: String,
    pub session_id: String,
    /// Strictly increasing per key, never reused, below 2^53 (a safe JS number).
    pub fencing_token: u64,
    pub ttl_millis: u64,
    /// Server-side time from the request's arrival to the instant the answered lease began
    /// (its wait in the key's queue; about 0 when it did not wait). The lease runs `ttlMillis`
    /// from there, so a client's deadline `sentAt + waitedMillis + ttlMillis − margin` is
    /// still never later than the server's. 0 when absent (a server without the queue).
    #[serde(default)]
    pub waited_millis: u64,
}

/// L6 `POST /v1/locks/{key}/release` request: compare-and-delete on `(key, fencingToken)`.
/// `sessionId` is for attribution in logs only, never part of the predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseRequest {
    pub fencing_token: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The current holder in an L7 answer. It never names the holder's session id (the session's
/// credential): `holderId` is the public name L1 gave the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub holder_id: String,
    /// The `owner` label the holder's session was opened with, if any.
    #[serde(default)]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub remaining_millis: u64,
}

/// L7 `GET /v1/locks/{key}` answer: advisory, true at the instant of the read only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockState {
    pub key: String,
    pub holder: Option<Holder>,
    pub waiter_count: u32,
}
