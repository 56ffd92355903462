//! Session ids: 128 bits from the OS random source, hex encoded. The id is the session's only
//! credential (anyone who knows it can release its locks' sessions or heartbeat them), so it
//! must be unguessable; a counter or a fast PRNG would not do.

/// A fresh 32-character lowercase hex id.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    // The OS source failing is not something a request can recover from.
    getrandom::fill(&mut bytes).expect("OS random source unavailable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_128_bit_hex_and_distinct() {
        let a = super::new_session_id();
        let b = super::new_session_id();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
