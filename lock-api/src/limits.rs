//! Validation rules shared by server and SDK, so both reject the same inputs the same way.
//! The ranges are ASSUMPTIONS recorded in `docs/contracts/C3-http-surfaces.md`.

/// Largest key, in bytes of UTF-8.
pub const KEY_MAX_BYTES: usize = 256;
/// Largest `waitMillis` on L4 (C3 Rules: waitMillis).
pub const WAIT_MILLIS_MAX: u64 = 30_000;
/// Smallest lock or session TTL (ASSUMPTION: short enough for tests and the bench).
pub const TTL_MILLIS_MIN: u64 = 100;
/// Largest lock or session TTL (ASSUMPTION: 5 minutes). It also bounds how long grants are
/// held back after a start that may have lost writes (see ARCHITECTURE.md).
pub const TTL_MILLIS_MAX: u64 = 300_000;
/// Default lock TTL, `lock.default.ttl`.
pub const DEFAULT_LOCK_TTL_MILLIS: u64 = 10_000;
/// Default session TTL, `lock.session.ttl`.
pub const DEFAULT_SESSION_TTL_MILLIS: u64 = 15_000;
/// Largest `owner` label, in bytes.
pub const OWNER_MAX_BYTES: usize = 128;
/// Largest fencing token: 2^53 - 1, the largest integer a JS number holds exactly.
pub const MAX_FENCING_TOKEN: u64 = (1 << 53) - 1;
/// Longest bearer token, in bytes (ASSUMPTION: 1 KiB; `openssl rand -hex 32` gives 64).
pub const TOKEN_MAX_BYTES: usize = 1024;

/// Largest `limit` of a shared hold (ASSUMPTION: 10,000 — far more permits than any
/// semaphore we know of needs, small enough that a key's holders list stays readable).
pub const SHARED_LIMIT_MAX: u32 = 10_000;

/// Largest value of a hold (L4 `value`, L9), in bytes of UTF-8 (ASSUMPTION: 1 KiB, enough
/// for an address or a small JSON document; watchers receive it with every grant).
pub const VALUE_MAX_BYTES: usize = 1024;

/// Why a key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    Empty,
    TooLong,
    ControlCharacter,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Empty => write!(f, "key must not be empty"),
            KeyError::TooLong => write!(f, "key must be at most {KEY_MAX_BYTES} bytes"),
            KeyError::ControlCharacter => write!(f, "key must not contain control characters"),
        }
    }
}

/// A key is 1–256 bytes of printable UTF-8 (already percent-decoded): no control characters.
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > KEY_MAX_BYTES {
        return Err(KeyError::TooLong);
    }
    if key.chars().any(char::is_control) {
        return Err(KeyError::ControlCharacter);
    }
    Ok(())
}

/// Checks a TTL against [`TTL_MILLIS_MIN`]..=[`TTL_MILLIS_MAX`].
pub fn validate_ttl(ttl_millis: u64) -> Result<(), String> {
    if (TTL_MILLIS_MIN..=TTL_MILLIS_MAX).contains(&ttl_millis) {
        Ok(())
    } else {
        Err(format!(
            "must be between {TTL_MILLIS_MIN} and {TTL_MILLIS_MAX} milliseconds, got {ttl_millis}"
        ))
    }
}

/// Checks `waitMillis` against 0..=[`WAIT_MILLIS_MAX`].
pub fn validate_wait(wait_millis: u64) -> Result<(), String> {
    if wait_millis <= WAIT_MILLIS_MAX {
        Ok(())
    } else {
        Err(format!(
            "must be between 0 and {WAIT_MILLIS_MAX} milliseconds, got {wait_millis}"
        ))
    }
}

/// The hold an L4 asks for from its `mode` and `limit` fields: a limit only with `"shared"`,
/// 1…[`SHARED_LIMIT_MAX`]. The error names the field at fault (always `limit`).
pub fn validate_hold(
    mode: Option<crate::LockMode>,
    limit: Option<u32>,
) -> Result<crate::HoldKind, String> {
    use crate::{HoldKind, LockMode};
    match (mode.unwrap_or_default(), limit) {
        (LockMode::Exclusive, None) => Ok(HoldKind::Exclusive),
        (LockMode::Exclusive, Some(_)) => Err("is for shared holds only (mode \"shared\")".into()),
        (LockMode::Shared, Some(limit)) if !(1..=SHARED_LIMIT_MAX).contains(&limit) => Err(
            format!("must be between 1 and {SHARED_LIMIT_MAX}, got {limit}"),
        ),
        (LockMode::Shared, limit) => Ok(HoldKind::Shared { limit }),
    }
}

/// A hold's value is at most [`VALUE_MAX_BYTES`] bytes (any UTF-8, empty included).
pub fn validate_value(value: &str) -> Result<(), String> {
    if value.len() <= VALUE_MAX_BYTES {
        Ok(())
    } else {
        Err(format!(
            "must be at most {VALUE_MAX_BYTES} bytes, got {}",
            value.len()
        ))
    }
}

/// A bearer token (`Authorization: Bearer <token>`) is 1–[`TOKEN_MAX_BYTES`] bytes of
/// visible ASCII: no spaces, nothing a header could not carry as it is.
pub fn validate_token(token: &str) -> Result<(), String> {
    if (1..=TOKEN_MAX_BYTES).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(format!(
            "must be 1 to {TOKEN_MAX_BYTES} bytes of visible ASCII (no spaces)"
        ))
    }
}

/// Percent-encodes a key for a path segment (`a/b` → `a%2Fb`): everything but the RFC 3986
/// unreserved characters is escaped, so any valid key survives the trip.
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_goes_with_shared_holds_only_and_within_its_range() {
        use crate::{HoldKind, LockMode};
        assert_eq!(validate_hold(None, None), Ok(HoldKind::Exclusive));
        assert_eq!(
            validate_hold(Some(LockMode::Shared), None),
            Ok(HoldKind::Shared { limit: None })
        );
        assert_eq!(
            validate_hold(Some(LockMode::Shared), Some(SHARED_LIMIT_MAX)),
            Ok(HoldKind::Shared {
                limit: Some(SHARED_LIMIT_MAX)
            })
        );
        assert!(validate_hold(Some(LockMode::Shared), Some(0)).is_err());
        assert!(validate_hold(Some(LockMode::Shared), Some(SHARED_LIMIT_MAX + 1)).is_err());
        assert!(validate_hold(Some(LockMode::Exclusive), Some(3)).is_err());
        assert!(validate_hold(None, Some(3)).is_err());
    }

    #[test]
    fn keys_follow_the_contract() {
        assert_eq!(validate_key(""), Err(KeyError::Empty));
        assert_eq!(validate_key(&"k".repeat(257)), Err(KeyError::TooLong));
        assert_eq!(validate_key(&"k".repeat(256)), Ok(()));
        assert_eq!(validate_key("a\nb"), Err(KeyError::ControlCharacter));
        assert_eq!(validate_key("payouts/ünïcode key"), Ok(()));
    }

    #[test]
    fn ranges_are_inclusive() {
        assert!(validate_wait(30_000).is_ok());
        assert!(validate_wait(30_001).is_err());
        assert!(validate_ttl(TTL_MILLIS_MIN).is_ok());
        assert!(validate_ttl(TTL_MILLIS_MIN - 1).is_err());
        assert!(validate_ttl(TTL_MILLIS_MAX + 1).is_err());
    }

    #[test]
    fn tokens_are_visible_ascii() {
        assert!(validate_token("abc-123_~+/=").is_ok());
        assert!(validate_token(&"a".repeat(TOKEN_MAX_BYTES)).is_ok());
        assert!(validate_token(&"a".repeat(TOKEN_MAX_BYTES + 1)).is_err());
        for bad in ["", "a b", "ü", "a\n", "a\t"] {
            assert!(validate_token(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_escaped_for_paths() {
        assert_eq!(encode_key("a/b"), "a%2Fb");
        assert_eq!(encode_key("a b%"), "a%20b%25");
        assert_eq!(encode_key("ü"), "%C3%BC");
    }
}
