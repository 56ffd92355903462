//! [`LockError`] → a JS `Error` with a stable `code` (DESIGN §3) and a `retryable` verdict.
//! The npm layer (`lock-wasm/npm/src/api.js`) turns it into the matching subclass.

use lock_api::ErrorCode;
use wasm_bindgen::JsValue;

use crate::error::LockError;

/// The wire code a JS caller branches on. Transport failures that have no contract code get
/// `TRANSPORT`; a closed session answers like a lost one (`SESSION_NOT_FOUND`).
pub fn code(err: &LockError) -> &'static str {
    match err {
        LockError::Contention { .. } => ErrorCode::LockContended.as_str(),
        LockError::NotLeader { .. } => ErrorCode::NotLeader.as_str(),
        LockError::Validation { .. } => ErrorCode::ValidationFailed.as_str(),
        LockError::SessionLost | LockError::Closed => ErrorCode::SessionNotFound.as_str(),
        LockError::LockLost { .. } => ErrorCode::LockLost.as_str(),
        LockError::FencedOut { .. } => ErrorCode::FencedOut.as_str(),
        LockError::Unauthorized { .. } => ErrorCode::Unauthorized.as_str(),
        LockError::Forbidden { .. } => ErrorCode::Forbidden.as_str(),
        LockError::Timeout(_) | LockError::Network(_) => "TRANSPORT",
        LockError::Unexpected { code, .. } => code.as_str(),
    }
}

/// DESIGN §3: only contention and NOT_LEADER are retry-safe, and only around acquire.
pub fn retryable(err: &LockError) -> bool {
    matches!(
        err,
        LockError::Contention { .. } | LockError::NotLeader { .. }
    )
}

/// The message, written here rather than through `Display`: the core's `Display` formats
/// `Duration`s with `{:?}`, which drags float formatting (~10 KB) into the module.
fn message(err: &LockError) -> String {
    match err {
        LockError::Contention { key, message } => format!("contention on {key}: {message}"),
        LockError::NotLeader {
            leader: Some(leader),
        } => format!("not leader (leader: {leader})"),
        LockError::NotLeader { leader: None } => "not leader".to_owned(),
        LockError::Validation { field, message } => format!("{field}: {message}"),
        LockError::SessionLost => "session lost".to_owned(),
        LockError::LockLost { key } => format!("lock on {key} lost"),
        LockError::FencedOut {
            highest_token: Some(t),
        } => format!("fenced out (highest token seen: {t})"),
        LockError::FencedOut {
            highest_token: None,
        } => "fenced out".to_owned(),
        LockError::Unauthorized { message } => format!("unauthorized: {message}"),
        LockError::Forbidden { message } => format!("forbidden: {message}"),
        LockError::Timeout(after) => format!("no answer within {} ms", after.as_millis() as u64),
        LockError::Network(message) => format!("network error: {message}"),
        LockError::Closed => "session closed".to_owned(),
        LockError::Unexpected {
            status,
            code,
            message,
        } => format!(
            "unexpected answer: HTTP {status} {}: {message}",
            code.as_str()
        ),
    }
}

/// Builds `Error { name: "LockError", message, code, retryable, field? }`.
pub fn to_js(err: &LockError) -> JsValue {
    let js = js_sys::Error::new(&message(err));
    js.set_name("LockError");
    let set = |name: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&js, &JsValue::from_str(name), &value);
    };
    set("code", JsValue::from_str(code(err)));
    set("retryable", JsValue::from_bool(retryable(err)));
    if let LockError::Validation { field, .. } = err {
        set("field", JsValue::from_str(field));
    }
    js.into()
}
