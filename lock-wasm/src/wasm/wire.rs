//! JS values ↔ the contract's types, by hand: [`FromJs`] reads a value (an option field, or
//! a body after `JSON.parse`), [`JsObject`] writes a request body for `JSON.stringify`.
//!
//! Why not serde-wasm-bindgen (or serde_json): serde builds its error text — including
//! `invalid type: floating point` — whenever a deserializer creates an error, which links
//! the float formatter (~14 KB raw, ~2 KB gzipped) and one generic `deserialize_struct` per
//! type into the npm module, whose budget is 80 KB gzipped. The contract's bodies are a
//! handful of flat structs of strings and integers, so reading them field by field is short.
//! The accepted inputs are serde-wasm-bindgen's (see each impl); a value that does not fit is
//! `None`, and the callers turn that into their fixed messages.

use lock_api::{
    ChangeKind, ErrorBody, ErrorCode, EventBatch, EventKind, HeartbeatResponse, HeldLock,
    HoldChange, Holder, LockGrant, LockMode, LockState, LockStatus, SessionOpened, SessionStatus,
    WatchEvent,
};
use wasm_bindgen::{JsCast, JsValue};

/// A value that can be read from a JS value; `None` when it has the wrong type or range.
pub trait FromJs: Sized {
    /// Reads `value`.
    fn from_js(value: &JsValue) -> Option<Self>;
}

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A JS number that is a non-negative safe integer (`Number.isSafeInteger(n) && n >= 0`),
/// as serde-wasm-bindgen reads unsigned integers from numbers.
fn unsigned(value: &JsValue) -> Option<f64> {
    let n = value.as_f64()?;
    // NaN fails the first test, ±Infinity the range test; -0 reads as 0.
    (n.trunc() == n && (0.0..=MAX_SAFE_INTEGER).contains(&n)).then_some(n)
}

/// A non-negative safe-integer number, or a `BigInt` within `u64`.
impl FromJs for u64 {
    fn from_js(value: &JsValue) -> Option<Self> {
        if value.is_bigint() {
            return u64::try_from(value.clone()).ok();
        }
        unsigned(value).map(|n| n as u64)
    }
}

/// A non-negative safe-integer number up to `u32::MAX` (no `BigInt`, as in
/// serde-wasm-bindgen).
impl FromJs for u32 {
    fn from_js(value: &JsValue) -> Option<Self> {
        unsigned(value)
            .filter(|n| *n <= f64::from(u32::MAX))
            .map(|n| n as u32)
    }
}

/// A JS string only (no coercion of numbers).
impl FromJs for String {
    fn from_js(value: &JsValue) -> Option<Self> {
        value.as_string()
    }
}

/// The wire spelling (`"LOCK_CONTENDED"`); an unknown code is `None`.
impl FromJs for ErrorCode {
    fn from_js(value: &JsValue) -> Option<Self> {
        ErrorCode::from_wire(&value.as_string()?)
    }
}

/// The wire spelling, `"exclusive"` or `"shared"` (serde's `rename_all = "lowercase"`).
impl FromJs for LockMode {
    fn from_js(value: &JsValue) -> Option<Self> {
        match value.as_string()?.as_str() {
            "exclusive" => Some(LockMode::Exclusive),
            "shared" => Some(LockMode::Shared),
            _ => None,
        }
    }
}

/// A field that defaults when absent or null (`#[serde(default)]`), and must have its type
/// when present.
fn field_or_default<T: FromJs + Default>(object: &JsValue, name: &str) -> Option<T> {
    field::<Option<T>>(object, name).map(Option::unwrap_or_default)
}

/// `null`/`undefined` is `None`, as serde reads a missing or null optional field.
impl<T: FromJs> FromJs for Option<T> {
    fn from_js(value: &JsValue) -> Option<Self> {
        if value.is_undefined() || value.is_null() {
            Some(None)
        } else {
            T::from_js(value).map(Some)
        }
    }
}

/// An array whose every element reads as `T`.
impl<T: FromJs> FromJs for Vec<T> {
    fn from_js(value: &JsValue) -> Option<Self> {
        if !js_sys::Array::is_array(value) {
            return None;
        }
        let array: &js_sys::Array = value.unchecked_ref();
        array.iter().map(|item| T::from_js(&item)).collect()
    }
}

/// Reads field `name` of `object` (`undefined` when absent or not an object) as `T`.
/// Unknown fields are ignored, as the contract's answer types allow.
pub fn field<T: FromJs>(object: &JsValue, name: &str) -> Option<T> {
    let value = if object.is_object() {
        js_sys::Reflect::get(object, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
    } else {
        JsValue::UNDEFINED
    };
    T::from_js(&value)
}

impl FromJs for SessionOpened {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(SessionOpened {
            session_id: field(v, "sessionId")?,
            holder_id: field(v, "holderId")?,
            ttl_millis: field(v, "ttlMillis")?,
            heartbeat_millis: field(v, "heartbeatMillis")?,
        })
    }
}

impl FromJs for HeldLock {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(HeldLock {
            key: field(v, "key")?,
            fencing_token: field(v, "fencingToken")?,
            // Absent from a server before shared holds: exclusive.
            mode: field_or_default(v, "mode")?,
        })
    }
}

impl FromJs for HeartbeatResponse {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(HeartbeatResponse {
            ttl_millis: field(v, "ttlMillis")?,
            version: field(v, "version")?,
            locks: field(v, "locks")?,
            changes: field(v, "changes")?,
        })
    }
}

impl FromJs for HoldChange {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(HoldChange {
            key: field(v, "key")?,
            fencing_token: field(v, "fencingToken")?,
            mode: field_or_default(v, "mode")?,
            change: field(v, "change")?,
        })
    }
}

/// The wire spelling, `"granted"` or `"gone"`.
impl FromJs for ChangeKind {
    fn from_js(value: &JsValue) -> Option<Self> {
        match value.as_string()?.as_str() {
            "granted" => Some(ChangeKind::Granted),
            "gone" => Some(ChangeKind::Gone),
            _ => None,
        }
    }
}

impl FromJs for LockStatus {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(LockStatus {
            key: field(v, "key")?,
            fencing_token: field(v, "fencingToken")?,
            remaining_millis: field(v, "remainingMillis")?,
            mode: field_or_default(v, "mode")?,
        })
    }
}

impl FromJs for SessionStatus {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(SessionStatus {
            session_id: field(v, "sessionId")?,
            remaining_millis: field(v, "remainingMillis")?,
            locks: field(v, "locks")?,
        })
    }
}

impl FromJs for LockGrant {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(LockGrant {
            key: field(v, "key")?,
            session_id: field(v, "sessionId")?,
            fencing_token: field(v, "fencingToken")?,
            ttl_millis: field(v, "ttlMillis")?,
            // Absent from a server without the wait queue: it did not wait.
            waited_millis: field_or_default(v, "waitedMillis")?,
            // Left out of an exclusive grant (and by a server before shared holds).
            mode: field_or_default(v, "mode")?,
            limit: field(v, "limit")?,
        })
    }
}

impl FromJs for Holder {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(Holder {
            holder_id: field(v, "holderId")?,
            owner: field(v, "owner")?,
            fencing_token: field(v, "fencingToken")?,
            remaining_millis: field(v, "remainingMillis")?,
            value: field(v, "value")?,
        })
    }
}

/// The wire spelling of an L8 event kind (`"handedOff"`); an unknown kind is refused.
impl FromJs for EventKind {
    fn from_js(value: &JsValue) -> Option<Self> {
        let text = value.as_string()?;
        ALL_KINDS.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// Every L8 event kind, for reading the wire spelling back.
const ALL_KINDS: [EventKind; 9] = [
    EventKind::Snapshot,
    EventKind::Reset,
    EventKind::Granted,
    EventKind::HandedOff,
    EventKind::Released,
    EventKind::Expired,
    EventKind::Revoked,
    EventKind::Proclaimed,
    EventKind::Waiters,
];

impl FromJs for WatchEvent {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(WatchEvent {
            id: field(v, "id")?,
            kind: field(v, "kind")?,
            key: field(v, "key")?,
            at_millis: field(v, "atMillis")?,
            fencing_token: field(v, "fencingToken")?,
            holder_id: field(v, "holderId")?,
            owner: field(v, "owner")?,
            mode: field(v, "mode")?,
            limit: field(v, "limit")?,
            value: field(v, "value")?,
            waiter_count: field(v, "waiterCount")?,
            state: field(v, "state")?,
        })
    }
}

impl FromJs for EventBatch {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(EventBatch {
            events: field(v, "events")?,
        })
    }
}

impl FromJs for LockState {
    fn from_js(v: &JsValue) -> Option<Self> {
        Some(LockState {
            key: field(v, "key")?,
            mode: field(v, "mode")?,
            holder: field(v, "holder")?,
            // Absent from a server before shared holds: `holder` is the only one.
            holders: field_or_default(v, "holders")?,
            limit: field(v, "limit")?,
            waiter_count: field(v, "waiterCount")?,
        })
    }
}

/// The error body fields the SDK reads; other details (`extra`) are dropped, as the SDK
/// never forwards them.
impl FromJs for ErrorBody {
    fn from_js(v: &JsValue) -> Option<Self> {
        let mut body = ErrorBody::new(field(v, "code")?, field::<String>(v, "message")?);
        body.field = field(v, "field")?;
        body.leader = field(v, "leader")?;
        body.retry_after_millis = field(v, "retryAfterMillis")?;
        body.highest_token = field(v, "highestToken")?;
        body.limit = field(v, "limit")?;
        body.reason = field(v, "reason")?;
        Some(body)
    }
}

/// A request body under construction: the JSON text `JSON.stringify` writes for the same
/// plain object with the same fields in the same order (`JsObject::default()` is `{}`).
/// Written in Rust, so a body costs no JS object, no property sets and no string crossing
/// back from `JSON.stringify`; a unit test checks it against `JSON.stringify`.
#[derive(Default)]
pub struct JsObject(String);

impl JsObject {
    fn set(mut self, name: &str, write_value: impl FnOnce(&mut String)) -> Self {
        self.0.push(if self.0.is_empty() { '{' } else { ',' });
        push_json_string(&mut self.0, name);
        self.0.push(':');
        write_value(&mut self.0);
        self
    }

    /// Sets a string field.
    pub fn text(self, name: &str, value: &str) -> Self {
        self.set(name, |out| push_json_string(out, value))
    }

    /// Sets an integer field as a JS number: the contract keeps every integer it sends
    /// (TTLs, waits, fencing tokens) below 2^53, so the number is exact.
    pub fn number(self, name: &str, value: u64) -> Self {
        // Exact below 2^53, where JSON.stringify writes the integer's digits. Above (never
        // by contract), JS's own text of the rounded number, as JSON.stringify writes it.
        let text = if value as f64 <= MAX_SAFE_INTEGER {
            value.to_string()
        } else {
            String::from(
                js_sys::Number::from(value as f64)
                    .to_string_with_radix(10)
                    .unwrap_or_default(),
            )
        };
        self.set(name, |out| out.push_str(&text))
    }

    /// Sets a string field when present; omits it otherwise (`skip_serializing_if`).
    pub fn opt_text(self, name: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.text(name, v),
            None => self,
        }
    }

    /// Sets an integer field when present; omits it otherwise.
    pub fn opt_number(self, name: &str, value: Option<u64>) -> Self {
        match value {
            Some(v) => self.number(name, v),
            None => self,
        }
    }

    /// The body text.
    pub fn to_json(&self) -> Option<String> {
        let fields = if self.0.is_empty() { "{" } else { &self.0 };
        Some(format!("{fields}}}"))
    }
}

/// `value` as a JSON string literal, escaped as `JSON.stringify` escapes it: `"` and `\`,
/// the short escapes `\b \f \n \r \t`, other control characters as `\u00xx`; everything
/// else as it is (a Rust string holds no lone surrogates).
fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c < ' ' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[(c as usize) >> 4]));
                out.push(char::from(HEX[(c as usize) & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

// Run with `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test
// -p lock-wasm --target wasm32-unknown-unknown --lib` (Node).
#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn json(text: &str) -> JsValue {
        js_sys::JSON::parse(text).unwrap()
    }

    #[wasm_bindgen_test]
    fn unsigned_integers_follow_serde_wasm_bindgen() {
        for ok in ["0", "-0", "7", "9007199254740991"] {
            assert!(u64::from_js(&json(ok)).is_some(), "{ok}");
        }
        for bad in [
            "-1",
            "1.5",
            "9007199254740992",
            "1e400",
            "\"5\"",
            "true",
            "null",
        ] {
            assert_eq!(u64::from_js(&json(bad)), None, "{bad}");
        }
        assert_eq!(u64::from_js(&JsValue::from_f64(f64::NAN)), None);
        assert_eq!(u64::from_js(&JsValue::from(u64::MAX)), Some(u64::MAX));
        assert_eq!(u64::from_js(&JsValue::from(-1i64)), None);
        assert_eq!(u32::from_js(&json("4294967295")), Some(u32::MAX));
        assert_eq!(u32::from_js(&json("4294967296")), None);
        assert_eq!(
            u32::from_js(&JsValue::from(5u64)),
            None,
            "no BigInt for u32"
        );
    }

    #[wasm_bindgen_test]
    fn answers_decode_and_a_wrong_shape_is_refused() {
        let grant = json(r#"{"key":"k","sessionId":"s","fencingToken":3,"ttlMillis":10,"x":1}"#);
        assert_eq!(
            LockGrant::from_js(&grant),
            Some(LockGrant {
                key: "k".into(),
                session_id: "s".into(),
                fencing_token: 3,
                ttl_millis: 10,
                waited_millis: 0,
                mode: LockMode::Exclusive,
                limit: None,
            })
        );
        let shared = json(
            r#"{"key":"k","sessionId":"s","fencingToken":3,"ttlMillis":10,"mode":"shared","limit":2}"#,
        );
        let shared = LockGrant::from_js(&shared).unwrap();
        assert_eq!((shared.mode, shared.limit), (LockMode::Shared, Some(2)));
        let odd = json(r#"{"key":"k","sessionId":"s","fencingToken":3,"ttlMillis":10,"mode":"x"}"#);
        assert_eq!(LockGrant::from_js(&odd), None, "an unknown mode");
        let waited =
            json(r#"{"key":"k","sessionId":"s","fencingToken":3,"ttlMillis":10,"waitedMillis":7}"#);
        assert_eq!(
            LockGrant::from_js(&waited).map(|g| g.waited_millis),
            Some(7)
        );
        let beat = json(r#"{"ttlMillis":9,"locks":[{"key":"a","fencingToken":1}]}"#);
        assert_eq!(
            HeartbeatResponse::from_js(&beat)
                .unwrap()
                .locks
                .unwrap()
                .len(),
            1
        );
        let delta = json(
            r#"{"ttlMillis":9,"version":"v2","changes":[{"key":"a","fencingToken":1,"change":"gone"}]}"#,
        );
        let delta = HeartbeatResponse::from_js(&delta).unwrap();
        assert_eq!((delta.version.as_deref(), delta.locks), (Some("v2"), None));
        assert_eq!(delta.changes.unwrap()[0].change, ChangeKind::Gone);
        let odd = json(r#"{"ttlMillis":9,"changes":[{"key":"a","fencingToken":1,"change":"x"}]}"#);
        assert_eq!(HeartbeatResponse::from_js(&odd), None, "an unknown change");
        let state = json(r#"{"key":"k","holder":null,"waiterCount":0}"#);
        assert_eq!(LockState::from_js(&state).unwrap().holder, None);
        for bad in [
            r#"{"key":"k","sessionId":"s","fencingToken":"3","ttlMillis":10}"#,
            r#"{"key":"k","sessionId":"s","ttlMillis":10}"#,
            r#"[]"#,
            r#"null"#,
        ] {
            assert_eq!(LockGrant::from_js(&json(bad)), None, "{bad}");
        }
        let bad_list = json(r#"{"ttlMillis":9,"locks":[{"key":"a"}]}"#);
        assert_eq!(HeartbeatResponse::from_js(&bad_list), None);
    }

    #[wasm_bindgen_test]
    fn error_bodies_read_every_code_and_refuse_unknown_ones() {
        for code in ErrorCode::ALL {
            let text = format!(
                r#"{{"code":"{}","message":"m","leader":"l"}}"#,
                code.as_str()
            );
            let body = ErrorBody::from_js(&json(&text)).unwrap();
            assert_eq!((body.code, body.leader.as_deref()), (code, Some("l")));
        }
        assert!(ErrorBody::from_js(&json(r#"{"code":"NOPE","message":"m"}"#)).is_none());
        assert!(ErrorBody::from_js(&json(r#"{"code":"INTERNAL"}"#)).is_none());
    }

    #[wasm_bindgen_test]
    fn request_bodies_omit_absent_fields() {
        let body = JsObject::default()
            .text("sessionId", "s\"1")
            .opt_number("ttlMillis", Some(5))
            .opt_number("waitMillis", None)
            .opt_text("owner", None)
            .to_json();
        assert_eq!(
            body.as_deref(),
            Some(r#"{"sessionId":"s\"1","ttlMillis":5}"#)
        );
    }

    /// The bodies are written in Rust; they must be exactly what `JSON.stringify` writes
    /// for the same object, for every character class and integer range.
    #[wasm_bindgen_test]
    fn request_bodies_match_json_stringify() {
        let mut texts: Vec<String> = (0u8..0x80)
            .map(|b| format!("a{}z", char::from(b)))
            .collect();
        texts.extend(["", "ключ/é", "\u{2028}\u{2029}", "🔒 lock", "\\\"\u{7f}"].map(String::from));
        let numbers = [0, 5, 9_007_199_254_740_991, 9_007_199_254_740_993, u64::MAX];
        for (text, number) in texts.iter().zip(numbers.iter().cycle()) {
            let object = js_sys::Object::new();
            for (name, value) in [
                ("key", JsValue::from_str(text)),
                ("fencingToken", JsValue::from_f64(*number as f64)),
                (text.as_str(), JsValue::from_str("v")),
            ] {
                js_sys::Reflect::set(&object, &JsValue::from_str(name), &value).unwrap();
            }
            let expected = String::from(js_sys::JSON::stringify(&object).unwrap());
            let body = JsObject::default()
                .text("key", text)
                .number("fencingToken", *number)
                .text(text, "v")
                .to_json();
            assert_eq!(
                body.as_deref(),
                Some(expected.as_str()),
                "{text:?} {number}"
            );
        }
        assert_eq!(JsObject::default().to_json().as_deref(), Some("{}"));
    }
}
