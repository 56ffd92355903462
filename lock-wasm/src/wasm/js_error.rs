//! [`LockError`] → a JS `Error` with its stable `code` and `retryable` verdict
//! ([`LockError::code`], [`LockError::retryable`]).
//! The npm layer (`adoptError` of `lock-wasm/npm/src/errors.js`) turns it into the matching
//! subclass.

use wasm_bindgen::JsValue;

use crate::error::LockError;

/// The message, written here rather than through `Display`: the core's `Display` formats
/// `Duration`s with `{:?}`, which drags float formatting (~10 KB) into the module.
fn message(err: &LockError) -> String {
    match err {
        LockError::Contention { key, message } => format!("contention on {key}: {message}"),
        LockError::NotLeader {
            leader: Some(leader),
        } => format!("not leader (leader: {leader})"),
        LockError::NotLeader { leader: None } => "not leader".to_owned(),
        LockError::StoreUnavailable { reason, .. } => format!("store unavailable ({reason})"),
        // "key: must not be empty", and a message that names its field already ("key must
        // not be empty", from the shared key rules) stands as it is.
        LockError::Validation { field, message } if message.starts_with(field.as_str()) => {
            message.clone()
        }
        LockError::Validation { field, message } => format!("{field}: {message}"),
        LockError::SessionLost => "session lost".to_owned(),
        LockError::LockLost { key } => format!("lock on {key} lost"),
        LockError::FencedOut {
            highest_token: Some(t),
        } => format!("fenced out (highest token seen: {t})"),
        LockError::FencedOut {
            highest_token: None,
        } => "fenced out".to_owned(),
        LockError::LimitMismatch {
            key,
            limit: Some(limit),
        } => format!("limit mismatch on {key}: its shared holders use limit {limit}"),
        LockError::LimitMismatch { key, limit: None } => {
            format!("limit mismatch on {key}: its shared holders use no limit")
        }
        LockError::UpgradeNotAllowed { key } => format!(
            "upgrade not allowed on {key}: it is held shared; release it, then acquire exclusive"
        ),
        LockError::Unauthorized { message } => format!("unauthorized: {message}"),
        LockError::Forbidden { message } => format!("forbidden: {message}"),
        LockError::Timeout(after) => format!("no answer within {} ms", after.as_millis() as u64),
        LockError::Network(message) => format!("network error: {message}"),
        LockError::Closed => "session closed".to_owned(),
        LockError::UnexpectedAnswer { status: 0, detail } => {
            format!("unexpected answer: {detail}")
        }
        LockError::UnexpectedAnswer { status, detail } => {
            format!("unexpected answer: HTTP {status}: {detail}")
        }
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

/// Builds `Error { name: "LockError", message, code, retryable, field?, limit?, reason?,
/// retryAfterMillis? }` (`limit`: LIMIT_MISMATCH's limit in force, `null` for none;
/// `reason` and `retryAfterMillis`: STORE_UNAVAILABLE's).
pub fn to_js(err: &LockError) -> JsValue {
    let js = js_sys::Error::new(&message(err));
    js.set_name("LockError");
    let set = |name: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&js, &JsValue::from_str(name), &value);
    };
    set("code", JsValue::from_str(err.code()));
    set("retryable", JsValue::from_bool(err.retryable()));
    match err {
        LockError::Validation { field, .. } => set("field", JsValue::from_str(field)),
        LockError::LimitMismatch { limit, .. } => set(
            "limit",
            limit.map_or(JsValue::NULL, |l| JsValue::from_f64(l.into())),
        ),
        LockError::StoreUnavailable {
            reason,
            retry_after,
        } => {
            set("reason", JsValue::from_str(reason));
            if let Some(after) = retry_after {
                set(
                    "retryAfterMillis",
                    JsValue::from_f64(after.as_millis() as f64),
                );
            }
        }
        _ => {}
    }
    js.into()
}
