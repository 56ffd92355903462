//! `lockctl revoke KEY --reason R [--fencing-token T]`: R1, the operator's force revoke,
//! with `LOCK_TOKEN` as the admin bearer (the server's `--admin-token`, or an admin client
//! of its auth file). Sent with reqwest: the SDK makes no admin call.

use std::time::Duration;

use lock_api::{LockOutcome, RevokeRequest};
use lock_wasm::config::DEFAULT_REQUEST_TIMEOUT;
use lock_wasm::{LockError, TransportError};

use crate::endpoint::Endpoint;
use crate::exit::Failure;

/// Revokes every hold of `key`, or the one with `fencing_token`, and says what was revoked.
pub async fn run(
    endpoint: &Endpoint,
    key: &str,
    reason: &str,
    fencing_token: Option<u64>,
) -> Result<(), Failure> {
    let http = endpoint.http()?;
    let outcome = send(&http, endpoint, key, reason, fencing_token)
        .await
        .map_err(|e| Failure::refused(&format!("revoking {key}"), endpoint.url(), &e))?;
    println!("{}", describe(&outcome));
    Ok(())
}

/// One R1, its answer mapped as the SDK maps every other call's.
async fn send(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    key: &str,
    reason: &str,
    fencing_token: Option<u64>,
) -> Result<LockOutcome, LockError> {
    let body = RevokeRequest {
        reason: reason.to_owned(),
        fencing_token,
    };
    let url = format!("{}{}", endpoint.url(), lock_api::paths::revoke(key));
    let mut request = http.post(url).json(&body).timeout(DEFAULT_REQUEST_TIMEOUT);
    if let Some(token) = endpoint.token() {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|e| network(e, DEFAULT_REQUEST_TIMEOUT))?;
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .map_err(|e| network(e, DEFAULT_REQUEST_TIMEOUT))?;
    if status != 200 {
        let error = TransportError::from_status(status, &text);
        return Err(LockError::from_transport(error, key));
    }
    serde_json::from_str(&text).map_err(|e| LockError::UnexpectedAnswer {
        status,
        detail: e.to_string(),
    })
}

fn network(error: reqwest::Error, timeout: Duration) -> LockError {
    if error.is_timeout() {
        return LockError::Timeout(timeout);
    }
    // reqwest's own message leaves the cause out (which certificate, refused connection).
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    LockError::Network(text)
}

/// What R1 did, in one line.
fn describe(outcome: &LockOutcome) -> String {
    let tokens = match outcome.revoked_tokens.as_slice() {
        [] => outcome.revoked_token.into_iter().collect(),
        tokens => tokens.to_vec(),
    };
    match tokens.as_slice() {
        [] => format!("{}: nothing to revoke (no such hold)", outcome.key),
        tokens => {
            let list: Vec<String> = tokens.iter().map(u64::to_string).collect();
            format!(
                "{}: revoked token {} ({})",
                outcome.key,
                list.join(", "),
                outcome.reason
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(tokens: Vec<u64>) -> LockOutcome {
        LockOutcome {
            key: "k".into(),
            revoked_token: tokens.first().copied(),
            revoked_tokens: tokens,
            reason: "stuck".into(),
        }
    }

    #[test]
    fn says_which_tokens_went() {
        assert_eq!(describe(&outcome(vec![7])), "k: revoked token 7 (stuck)");
        assert_eq!(
            describe(&outcome(vec![3, 4])),
            "k: revoked token 3, 4 (stuck)"
        );
        assert_eq!(
            describe(&outcome(vec![])),
            "k: nothing to revoke (no such hold)"
        );
    }
}
