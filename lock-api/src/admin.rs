//! R1 force revoke. [`LockOutcome`] is R1's result alone: it appears on no acquire path.

use serde::{Deserialize, Serialize};

/// R1 `POST /v1/admin/locks/{key}/revoke` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevokeRequest {
    pub reason: String,
}

/// R1 200 answer. `revokedToken` is null when nobody held the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOutcome {
    pub key: String,
    pub revoked_token: Option<u64>,
    pub reason: String,
}
