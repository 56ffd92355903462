//! R1 force revoke. [`LockOutcome`] is R1's result alone: it appears on no acquire path.

use serde::{Deserialize, Serialize};

/// R1 `POST /v1/admin/locks/{key}/revoke` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevokeRequest {
    pub reason: String,
    /// Revoke only the hold with this token (one shared holder); absent: every holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
}

/// R1 200 answer. `revokedTokens` lists every hold revoked, in token order (empty when nobody
/// held the key, or the named token held nothing); `revokedToken` is the lowest of them, or
/// null (the field as it was when a key had one holder at most).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOutcome {
    pub key: String,
    pub revoked_token: Option<u64>,
    #[serde(default)]
    pub revoked_tokens: Vec<u64>,
    pub reason: String,
}
