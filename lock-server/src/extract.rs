//! Extractors whose rejections are contract errors. axum's own rejections are plain text;
//! C3 wants a JSON body naming the field, so every body and path parameter goes through here.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use lock_api::paths::SESSION_ID_HEADER;
use lock_api::ErrorCode;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::state::AppState;

/// A JSON body; malformed JSON, wrong types, unknown and missing fields are 400
/// VALIDATION_FAILED naming the field, an oversized body is 413. An empty body is read as
/// `{}`, so bodies whose fields are all optional (L1) may be omitted.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        parse_json(bytes).map(JsonBody)
    }
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    // The only way a buffered body fails for a well-behaved client is the size limit; a
    // broken connection never gets an answer anyway.
    if rejection.status().as_u16() == 413 {
        ApiError::new(ErrorCode::PayloadTooLarge, "request body too large")
    } else {
        ApiError::validation("body", format!("cannot read body: {rejection}"))
    }
}

/// Deserialises `bytes`, naming the offending field in the error.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = inner.to_string();
        let field = if !matches!(path.as_str(), "." | "?" | "") {
            path
        } else {
            // Missing and unknown fields sit at the root; serde names them in backticks.
            let named =
                message.starts_with("missing field") || message.starts_with("unknown field");
            named
                .then(|| message.split('`').nth(1).map(str::to_string))
                .flatten()
                .unwrap_or_else(|| "body".to_string())
        };
        let message = if message.contains(&format!("`{field}`")) {
            format!("invalid request body: {message}")
        } else {
            format!("invalid request body: field `{field}`: {message}")
        };
        ApiError::validation(field, message)
    })
}

/// A lock key from the path, percent-decoded, then checked against the key rules.
#[derive(Debug, Clone)]
pub struct KeyParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for KeyParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(key) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::validation("key", format!("invalid key: {e}")))?;
        lock_api::limits::validate_key(&key)
            .map_err(|e| ApiError::validation("key", e.to_string()))?;
        Ok(KeyParam(key))
    }
}

/// The session an L2, L3 or L5 request names: the public `holderId` in the path and the
/// session id, its credential, in the `Lock-Session-Id` header (never in the URL, which
/// proxies log). The pair must agree: a session id whose holder id is not the path's is
/// 404 SESSION_NOT_FOUND, the same answer as an unknown session (no oracle), compared in
/// constant time. No header is 400 naming it, so a client still sending the session id in
/// the path learns why.
#[derive(Debug, Clone)]
pub struct SessionParam(pub String);

/// Longest accepted session-id header, in bytes (session ids the server makes are far
/// shorter; anything longer cannot name a session).
const SESSION_ID_MAX_BYTES: usize = 256;

impl FromRequestParts<AppState> for SessionParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Path(holder_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::validation("holderId", format!("invalid holder id: {e}")))?;
        let session_id = session_id_header(parts)?;
        let expected = state.store.holder_id(&session_id).await?;
        if bool::from(expected.as_bytes().ct_eq(holder_id.as_bytes())) {
            Ok(SessionParam(session_id))
        } else {
            Err(ApiError::from(crate::store::StoreError::SessionNotFound))
        }
    }
}

/// The one `Lock-Session-Id` header's value: 400 VALIDATION_FAILED naming the header when it
/// is missing, repeated, empty, oversized or not visible ASCII.
fn session_id_header(parts: &Parts) -> Result<String, ApiError> {
    let refuse = |why: &str| {
        ApiError::validation(
            SESSION_ID_HEADER,
            format!(
                "{SESSION_ID_HEADER} {why}: L2, L3 and L5 name the session by its holderId in \
                 the path and carry the session id in this header"
            ),
        )
    };
    let mut values = parts.headers.get_all(SESSION_ID_HEADER).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(refuse("must be sent once"));
    };
    let text = value
        .to_str()
        .ok()
        .filter(|t| !t.is_empty() && t.len() <= SESSION_ID_MAX_BYTES)
        .filter(|t| t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            refuse(&format!(
                "must be 1–{SESSION_ID_MAX_BYTES} visible ASCII bytes"
            ))
        })?;
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::AcquireRequest;

    fn field_of(json: &str) -> String {
        parse_json::<AcquireRequest>(json.as_bytes())
            .unwrap_err()
            .0
            .field
            .unwrap()
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            field_of(r#"{"sessionId":"s","waitMillis":"x"}"#),
            "waitMillis"
        );
        assert_eq!(field_of(r#"{"sessionId":"s","bogus":1}"#), "bogus");
        assert_eq!(field_of(r#"{"ttlMillis":1}"#), "sessionId");
        assert_eq!(field_of(r#"{"sessionId":"s","ttlMillis":-1}"#), "ttlMillis");
        assert_eq!(field_of("{not json"), "body");
    }
}
