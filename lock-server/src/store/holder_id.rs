//! Holder ids: the public name of a session, for every backend.
//!
//! A session id is the session's credential, so nothing shown to anyone but its owner may
//! carry it (L7, log lines, metrics). Those show the `holderId` instead: HMAC-SHA256 of the
//! session id under a random 256-bit key, truncated to 128 bits. Without the key the id
//! cannot be recovered from it (nor a holder id computed for a guessed session id). The key
//! lives in the store (SQLite: a row in `lock.db`; etcd: one key every replica reads), so a
//! session's holder id is the same from every replica and after a restart.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::StoreError;

/// Bytes of the HMAC key.
pub const KEY_BYTES: usize = 32;

/// Bytes of a holder id before hex encoding (128 bits: as unguessable as a session id).
const ID_BYTES: usize = 16;

/// Computes holder ids under one store's key. Cheap to clone.
#[derive(Clone)]
pub struct HolderIds {
    key: [u8; KEY_BYTES],
}

impl HolderIds {
    /// Holder ids under `key`.
    pub fn new(key: [u8; KEY_BYTES]) -> HolderIds {
        HolderIds { key }
    }

    /// A key from stored bytes; anything but [`KEY_BYTES`] bytes is corruption.
    pub fn from_stored(bytes: &[u8]) -> Result<HolderIds, StoreError> {
        let key = bytes
            .try_into()
            .map_err(|_| StoreError::Internal("corrupt holder-id key".into()))?;
        Ok(HolderIds::new(key))
    }

    /// A fresh key from the OS random source.
    pub fn new_key() -> Result<[u8; KEY_BYTES], StoreError> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key)
            .map_err(|e| StoreError::Internal(format!("no randomness for a holder-id key: {e}")))?;
        Ok(key)
    }

    /// The key's bytes, to store.
    pub fn key(&self) -> &[u8; KEY_BYTES] {
        &self.key
    }

    /// The holder id of `session_id`: 32 lowercase hex characters.
    pub fn of(&self, session_id: &str) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(session_id.as_bytes());
        let digest = mac.finalize().into_bytes();
        digest[..ID_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl std::fmt::Debug for HolderIds {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HolderIds(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_ids_are_a_keyed_hash_of_the_session_id() {
        let ids = HolderIds::new([7; KEY_BYTES]);
        let id = ids.of("0123456789abcdef0123456789abcdef");
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(id, ids.of("0123456789abcdef0123456789abcdef"), "stable");
        assert_ne!(id, ids.of("0123456789abcdef0123456789abcdee"));
        let other_key = HolderIds::new([8; KEY_BYTES]);
        assert_ne!(id, other_key.of("0123456789abcdef0123456789abcdef"));
    }

    #[test]
    fn matches_hmac_sha256_test_vector() {
        // RFC 4231 test case 2 (key "Jefe"), truncated to 128 bits. Keys here are always 32
        // bytes; HMAC pads a short key with zeros, so "Jefe" + 28 zero bytes is the same key.
        let mut key = [0u8; KEY_BYTES];
        key[..4].copy_from_slice(b"Jefe");
        let id = HolderIds::new(key).of("what do ya want for nothing?");
        assert_eq!(id, "5bdcc146bf60754e6a042426089575c7");
    }

    #[test]
    fn stored_keys_must_have_the_right_length() {
        assert!(HolderIds::from_stored(&[1; KEY_BYTES]).is_ok());
        assert!(HolderIds::from_stored(&[1; 3]).is_err());
    }
}
