//! What every backend's sessions share: the id and the heartbeat cadence.
//!
//! The id is the session's credential (without an auth file, anyone who knows it can heartbeat
//! the session, close it and so release its locks; with one, its client can), so it is 128
//! bits from the OS random source; a counter or a fast PRNG would not do. It is never shown
//! to anyone else: L7, logs and metrics name a session by its holder id (`holder_id`).

use lock_api::SessionOpened;

use super::StoreError;

/// A fresh id: 128 bits from the OS random source, 32 lowercase hex characters.
pub fn new_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Internal(format!("no randomness for a session id: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `id` has the shape [`new_id`] gives. Anything else cannot name a session, and
/// refusing it early keeps ids with `/` out of a backend's key space.
pub fn is_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How often a client should heartbeat a session of `ttl_millis`: a third of it, so two
/// heartbeats may be lost before the session expires.
pub fn heartbeat_interval(ttl_millis: u64) -> u64 {
    (ttl_millis / 3).max(1)
}

/// L1's answer for a session just opened.
pub fn opened(session_id: String, holder_id: String, ttl_millis: u64) -> SessionOpened {
    SessionOpened {
        session_id,
        holder_id,
        ttl_millis,
        heartbeat_millis: heartbeat_interval(ttl_millis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bit_hex_and_distinct() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(is_id(&a) && is_id(&b));
        assert_ne!(a, b);
    }

    #[test]
    fn only_minted_ids_are_session_ids() {
        assert!(is_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_id("0123456789ABCDEF0123456789abcdef"));
        assert!(!is_id("../"));
        assert!(!is_id(""));
    }

    #[test]
    fn heartbeats_come_three_times_per_ttl() {
        assert_eq!(
            opened("s".into(), "h".into(), 15_000).heartbeat_millis,
            5_000
        );
        assert_eq!(heartbeat_interval(1), 1);
    }
}
