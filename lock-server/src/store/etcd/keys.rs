//! The key layout under the configured prefix. One place, so every transaction names the same
//! keys and a reader of `etcdctl get --prefix` can tell what each key is.
//!
//! ```text
//! <prefix>s/<sessionId>            SessionRecord  (session lease)
//! <prefix>l/<encKey>               LockRecord     (holder's session lease); token = create_revision
//! <prefix>h/<sessionId>/<encKey>   LockRecord     (same lease; written in the same txns as l/)
//! <prefix>q/<encKey>/<sessionId>   TicketRecord   (waiter's session lease); queue order = create_revision
//! <prefix>g/<encKey>               LedgerHead     (no lease: the ledger is durable)
//! <prefix>e/<encKey>/<seq:020>     LedgerEntry    (no lease)
//! <prefix>k/holder-id              the holder-id key, 64 hex chars (no lease; created once)
//! ```
//!
//! Lock keys are percent-encoded with [`lock_api::limits::encode_key`], which escapes `/`, so
//! the prefix `e/<encKey>/` of one key can never cover the entries of another key.

use lock_api::limits::encode_key;

/// Builds every etcd key the store uses.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
}

impl Keys {
    /// `prefix` is used verbatim (e.g. `/lock-server/`), so several deployments can share a
    /// cluster under different prefixes.
    pub(super) fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_owned(),
        }
    }

    pub(super) fn session(&self, session_id: &str) -> String {
        format!("{}s/{session_id}", self.prefix)
    }

    pub(super) fn all_sessions(&self) -> String {
        format!("{}s/", self.prefix)
    }

    pub(super) fn lock(&self, key: &str) -> String {
        format!("{}l/{}", self.prefix, encode_key(key))
    }

    pub(super) fn all_locks(&self) -> String {
        format!("{}l/", self.prefix)
    }

    /// The session's index entry for one lock it holds, so L2/L5 find a session's locks with
    /// one prefix read instead of scanning every lock.
    pub(super) fn held(&self, session_id: &str, key: &str) -> String {
        format!("{}h/{session_id}/{}", self.prefix, encode_key(key))
    }

    pub(super) fn held_by(&self, session_id: &str) -> String {
        format!("{}h/{session_id}/", self.prefix)
    }

    /// The HMAC key of holder ids, shared by every replica of the deployment.
    pub(super) fn holder_id_key(&self) -> String {
        format!("{}k/holder-id", self.prefix)
    }

    /// The session's ticket in the key's wait queue.
    pub(super) fn ticket(&self, key: &str, session_id: &str) -> String {
        format!("{}q/{}/{session_id}", self.prefix, encode_key(key))
    }

    /// The key's wait queue (a prefix; `encode_key` escapes `/`, so it covers no other key's).
    pub(super) fn queue(&self, key: &str) -> String {
        format!("{}q/{}/", self.prefix, encode_key(key))
    }

    pub(super) fn ledger_head(&self, key: &str) -> String {
        format!("{}g/{}", self.prefix, encode_key(key))
    }

    /// Zero-padded so etcd's key order (bytewise) is acceptance order.
    pub(super) fn ledger_entry(&self, key: &str, seq: u64) -> String {
        format!("{}e/{}/{seq:020}", self.prefix, encode_key(key))
    }

    pub(super) fn ledger_entries(&self, key: &str) -> String {
        format!("{}e/{}/", self.prefix, encode_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slashes_in_keys_cannot_alias_another_keys_prefix() {
        let keys = Keys::new("/p/");
        assert_eq!(keys.lock("a/b"), "/p/l/a%2Fb");
        assert!(!keys
            .ledger_entry("a/b", 0)
            .starts_with(&keys.ledger_entries("a")));
        assert_eq!(keys.ledger_entry("a", 7), "/p/e/a/00000000000000000007");
    }
}
