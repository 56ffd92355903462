//! The key layout under the configured prefix. One place, so every transaction names the same
//! keys and a reader of `etcdctl get --prefix` can tell what each key is.
//!
//! ```text
//! <prefix>s/<sessionId>            SessionRecord  (session lease)
//! <prefix>v/<encKey>               StampRecord    (lease of a holder); rewritten by every grant (but
//!                                                 a reader's beside others) and hand-off, compared by every grant
//! <prefix>l/<encKey>/<sessionId>   LockRecord     one hold (holder's session lease); token = create_revision
//! <prefix>h/<sessionId>/<encKey>   LockRecord     (same lease; written in the same txns as l/)
//! <prefix>r/<encKey>/<sessionId>   empty          a shared hold's marker, for the gauge (same lease)
//! <prefix>q/<encKey>/<sessionId>   TicketRecord   (waiter's session lease); queue order = create_revision
//! <prefix>g/<encKey>               LedgerHead     (no lease: the ledger is durable)
//! <prefix>e/<encKey>/<seq:020>     LedgerEntry    (no lease)
//! <prefix>u/g/<encKey>             LedgerHead     the unfenced demo ledger's head (no lease)
//! <prefix>u/e/<encKey>/<seq:020>   LedgerEntry    its entries, each with `stale` (no lease)
//! <prefix>k/holder-id              the holder-id key, 64 hex chars (no lease; created once)
//! <prefix>k/probe                  the readiness probe's write, one byte (no lease; rewritten every probe)
//! <prefix>epoch                    EpochRecord    the token epoch (no lease; raised by `lock-server etcd-restored`)
//! <prefix>k/startup-probe          the start-up check's write, deleted at once (`connect`)
//! <prefix>m/<encKey>/<sessionId>   CauseRecord    why our txn ended that hold (put in the same txn; holder's lease)
//! <prefix>n/<sessionId>            CauseRecord    the session is closing (L3; on its lease, so its end deletes it)
//! ```
//!
//! `l/`, `m/`, `n/` and `q/` sort together: one etcd watch of the range from `l/` to the end of
//! `q/` sees every change a key's watchers are told about, in revision order (`watch`).
//!
//! Lock keys are percent-encoded with [`lock_api::limits::encode_key`], which escapes `/`, so
//! the prefix `l/<encKey>/` (or `q/`, `e/`) of one key can never cover another key's holds
//! (tickets, entries): `l/a%2Fb/...` is not under `l/a/`. A session holds a key at most once,
//! so `l/<encKey>/<sessionId>` names one hold, and one prefix read finds all of a key's.

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

    /// The prefix itself (the start-up check reads it as a range).
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(super) fn session(&self, session_id: &str) -> String {
        format!("{}s/{session_id}", self.prefix)
    }

    pub(super) fn all_sessions(&self) -> String {
        format!("{}s/", self.prefix)
    }

    /// The hold of `session_id` on `key`.
    pub(super) fn hold(&self, key: &str, session_id: &str) -> String {
        format!("{}l/{}/{session_id}", self.prefix, encode_key(key))
    }

    /// Every hold of `key` (a prefix).
    pub(super) fn holds(&self, key: &str) -> String {
        format!("{}l/{}/", self.prefix, encode_key(key))
    }

    /// Every hold of every key: what the locks gauge counts.
    pub(super) fn all_holds(&self) -> String {
        format!("{}l/", self.prefix)
    }

    /// The key's stamp: its `mod_revision` changes with every grant of the key (but a
    /// reader's without a limit beside others), hand-off and end of its last hold, so a grant
    /// that compares it knows that nothing it depends on changed (`holds`).
    pub(super) fn stamp(&self, key: &str) -> String {
        format!("{}v/{}", self.prefix, encode_key(key))
    }

    /// The marker of a shared hold of `session_id` on `key`.
    pub(super) fn shared_marker(&self, key: &str, session_id: &str) -> String {
        format!("{}r/{}/{session_id}", self.prefix, encode_key(key))
    }

    /// Every shared hold's marker: what the shared-holds gauge counts.
    pub(super) fn all_shared_markers(&self) -> String {
        format!("{}r/", self.prefix)
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
    /// The token epoch (`epoch`): absent until `lock-server etcd-restored` first raises it.
    pub(super) fn epoch(&self) -> String {
        format!("{}epoch", self.prefix)
    }

    pub(super) fn holder_id_key(&self) -> String {
        format!("{}k/holder-id", self.prefix)
    }

    /// The key the readiness probe puts (outside the watched range: no watcher hears it).
    pub(super) fn probe(&self) -> String {
        format!("{}k/probe", self.prefix)
    }

    /// The session's ticket in the key's wait queue.
    pub(super) fn ticket(&self, key: &str, session_id: &str) -> String {
        format!("{}q/{}/{session_id}", self.prefix, encode_key(key))
    }

    /// The key's wait queue (a prefix; `encode_key` escapes `/`, so it covers no other key's).
    pub(super) fn queue(&self, key: &str) -> String {
        format!("{}q/{}/", self.prefix, encode_key(key))
    }

    /// The cause marker of `session_id`'s hold of `key`: written by the transaction that
    /// ends that hold on purpose (L6, R1, L3's hand-off), so a watcher tells it from an expiry.
    pub(super) fn cause(&self, key: &str, session_id: &str) -> String {
        format!("{}m/{}/{session_id}", self.prefix, encode_key(key))
    }

    /// The closing marker of a session (L3): on its lease, deleted with its holds when L3
    /// revokes the lease, so a watcher sees those holds released, not expired.
    pub(super) fn closing(&self, session_id: &str) -> String {
        format!("{}n/{session_id}", self.prefix)
    }

    /// The range one watch covers for every watched key: holds, cause and closing markers,
    /// tickets (`[start, end)`).
    pub(super) fn watched_range(&self) -> (String, String) {
        (format!("{}l/", self.prefix), format!("{}q0", self.prefix))
    }

    /// What a key in [`Keys::watched_range`] is.
    pub(super) fn parse_watched<'k>(&self, key: &'k [u8]) -> Option<Watched<'k>> {
        let rest = key.strip_prefix(self.prefix.as_bytes())?;
        let rest = std::str::from_utf8(rest).ok()?;
        let (kind, rest) = rest.split_at_checked(2)?;
        if kind == "n/" {
            return Some(Watched::Closing(rest));
        }
        let (enc, session) = rest.split_once('/')?;
        match kind {
            "l/" => Some(Watched::Hold(enc, session)),
            "m/" => Some(Watched::Cause(enc, session)),
            "q/" => Some(Watched::Ticket(enc, session)),
            _ => None,
        }
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

    /// The unfenced demo ledger's head of `key`: under `u/`, apart from the fenced ledger.
    pub(super) fn unfenced_head(&self, key: &str) -> String {
        format!("{}u/g/{}", self.prefix, encode_key(key))
    }

    /// Zero-padded like [`Keys::ledger_entry`].
    pub(super) fn unfenced_entry(&self, key: &str, seq: u64) -> String {
        format!("{}u/e/{}/{seq:020}", self.prefix, encode_key(key))
    }

    pub(super) fn unfenced_entries(&self, key: &str) -> String {
        format!("{}u/e/{}/", self.prefix, encode_key(key))
    }
}

/// A key of [`Keys::watched_range`]: the encoded lock key and the session, or a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watched<'k> {
    Hold(&'k str, &'k str),
    Cause(&'k str, &'k str),
    Ticket(&'k str, &'k str),
    Closing(&'k str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slashes_in_keys_cannot_alias_another_keys_prefix() {
        let keys = Keys::new("/p/");
        assert_eq!(keys.stamp("a/b"), "/p/v/a%2Fb");
        assert_eq!(keys.hold("a/b", "s1"), "/p/l/a%2Fb/s1");
        assert!(!keys.hold("a/b", "s1").starts_with(&keys.holds("a")));
        assert!(keys.hold("a", "s1").starts_with(&keys.holds("a")));
        assert!(!keys.holds("a").starts_with(&keys.stamp("a/")));
        assert!(!keys.ticket("a/b", "s1").starts_with(&keys.queue("a")));
        assert!(!keys
            .ledger_entry("a/b", 0)
            .starts_with(&keys.ledger_entries("a")));
        assert_eq!(keys.ledger_entry("a", 7), "/p/e/a/00000000000000000007");
        assert!(!keys
            .unfenced_entry("a/b", 0)
            .starts_with(&keys.unfenced_entries("a")));
        assert_eq!(keys.unfenced_entry("a", 7), "/p/u/e/a/00000000000000000007");
        // The two ledgers share no key.
        assert!(!keys.unfenced_head("a").starts_with(&keys.ledger_head("a")));
        assert!(!keys
            .unfenced_entry("a", 0)
            .starts_with(&keys.ledger_entries("a")));
    }

    #[test]
    fn one_range_covers_holds_markers_and_tickets_and_nothing_else() {
        let keys = Keys::new("/p/");
        let (start, end) = keys.watched_range();
        let inside = |k: &str| start.as_str() <= k && k < end.as_str();
        for k in [
            keys.hold("a/b", "s1"),
            keys.cause("a", "s1"),
            keys.closing("s1"),
            keys.ticket("a", "s1"),
        ] {
            assert!(inside(&k), "{k}");
        }
        for k in [
            keys.held("s1", "a"),
            keys.stamp("a"),
            keys.session("s1"),
            keys.shared_marker("a", "s1"),
            keys.holder_id_key(),
            keys.probe(),
            keys.epoch(),
            keys.unfenced_head("a"),
            keys.unfenced_entry("a", 0),
        ] {
            assert!(!inside(&k), "{k}");
        }
        let parse = |k: String| keys.parse_watched(k.as_bytes()).map(|w| format!("{w:?}"));
        assert_eq!(
            parse(keys.hold("a/b", "s1")).unwrap(),
            r#"Hold("a%2Fb", "s1")"#
        );
        assert_eq!(parse(keys.cause("a", "s1")).unwrap(), r#"Cause("a", "s1")"#);
        assert_eq!(
            parse(keys.ticket("a", "s1")).unwrap(),
            r#"Ticket("a", "s1")"#
        );
        assert_eq!(parse(keys.closing("s1")).unwrap(), r#"Closing("s1")"#);
    }
}
