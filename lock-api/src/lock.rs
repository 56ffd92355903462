//! Lock bodies: L4 acquire, L6 release, L7 advisory read.

use serde::{Deserialize, Serialize};

/// How a key is held. A key has either one exclusive holder or any number of shared holders
/// (at most its `limit`), never both. Read-write lock: readers shared without a limit, the
/// writer exclusive. Counting semaphore of N permits: shared with `limit` N.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockMode {
    /// One holder and nobody beside it: the default, and the only mode before shared holds.
    #[default]
    Exclusive,
    /// Held beside other shared holders of the key, up to its limit.
    Shared,
}

impl LockMode {
    /// Whether this is the default mode (the wire leaves it out of a grant).
    pub fn is_exclusive(&self) -> bool {
        *self == LockMode::Exclusive
    }

    /// The wire spelling: `"exclusive"` or `"shared"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Exclusive => "exclusive",
            LockMode::Shared => "shared",
        }
    }
}

/// What an L4 asks for: an exclusive hold, or a shared one under a limit (`None`: no limit).
/// Validated ([`crate::limits::validate_hold`]): a limit only with shared, 1…10,000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum HoldKind {
    #[default]
    Exclusive,
    Shared {
        limit: Option<u32>,
    },
}

impl HoldKind {
    /// The mode of the hold.
    pub fn mode(self) -> LockMode {
        match self {
            HoldKind::Exclusive => LockMode::Exclusive,
            HoldKind::Shared { .. } => LockMode::Shared,
        }
    }

    /// The shared limit (`None` for exclusive or no limit).
    pub fn limit(self) -> Option<u32> {
        match self {
            HoldKind::Exclusive => None,
            HoldKind::Shared { limit } => limit,
        }
    }
}

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
    /// `"exclusive"` (the default when absent) or `"shared"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LockMode>,
    /// Shared holds only: most shared holders of the key at once, 1…10,000; absent = no
    /// limit. Every shared holder of a key must agree on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The hold's value (UTF-8, at most [`crate::limits::VALUE_MAX_BYTES`] bytes): shown in
    /// L7's holder and in the `granted` event, replaced with L9 (an election's leader uses it
    /// to say where it serves). Absent: no value; a renewal keeps the value the hold has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
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
    /// The grant's mode; left out for exclusive, so an exclusive grant is byte for byte what
    /// it was before shared holds. A shared L4 of the key's exclusive holder answers its
    /// exclusive grant (a shared hold nested under an exclusive one).
    #[serde(default, skip_serializing_if = "LockMode::is_exclusive")]
    pub mode: LockMode,
    /// A shared grant's limit, when the key has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
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

/// A holder in an L7 answer (`holder`, and each of `holders`). It never names the holder's session id (the session's
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
    /// The hold's value (L4 `value`, replaced by L9), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// L7 `GET /v1/locks/{key}` answer: advisory, true at the instant of the read only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockState {
    pub key: String,
    /// How the key is held now; `null` when it is free.
    #[serde(default)]
    pub mode: Option<LockMode>,
    /// The exclusive holder, exactly as before shared holds; `null` when the key is free or
    /// held shared (so a reader of this field alone sees a shared key as not exclusively held).
    pub holder: Option<Holder>,
    /// Every holder, in either mode, in token order.
    #[serde(default)]
    pub holders: Vec<Holder>,
    /// The shared holders' limit, when the key is held shared under one.
    #[serde(default)]
    pub limit: Option<u32>,
    pub waiter_count: u32,
}

/// L9 `POST /v1/locks/{key}/value` request: replace the value of the hold `(key,
/// fencingToken)` of session `sessionId` (an election's `proclaim`). 409 LOCK_LOST when that
/// session does not hold the key with that token now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProclaimRequest {
    pub session_id: String,
    pub fencing_token: u64,
    /// The new value (UTF-8, at most [`crate::limits::VALUE_MAX_BYTES`] bytes).
    pub value: String,
}
