//! The modelled server's two demo ledgers, the protected resource a lock holder writes to
//! with its fencing token: the fenced one refuses a token lower than the highest it accepted
//! for the key (409 FENCED_OUT, as lock-server's `/v1/demo/ledger`), the unfenced one accepts
//! every write and only marks the ones the fenced ledger would have refused as stale (as
//! `/v1/demo/unfenced-ledger`): a stale write it accepted is the corruption fencing prevents.

use std::collections::BTreeMap;

/// Both ledgers: the highest token each accepted, per key.
#[derive(Default)]
pub(super) struct Ledgers {
    fenced: BTreeMap<String, u64>,
    unfenced: BTreeMap<String, u64>,
}

impl Ledgers {
    /// An append of `token` to the fenced ledger of `key`: accepted iff the token is at least
    /// the highest accepted so far (equal tokens: one holder writing several entries).
    pub(super) fn append_fenced(&mut self, key: &str, token: u64) -> bool {
        let highest = self.fenced.entry(key.to_owned()).or_default();
        if token < *highest {
            return false;
        }
        *highest = token;
        true
    }

    /// An append of `token` to the unfenced ledger of `key`, always accepted: whether it was
    /// stale (below the highest token accepted before it).
    pub(super) fn append_unfenced(&mut self, key: &str, token: u64) -> bool {
        let highest = self.unfenced.entry(key.to_owned()).or_default();
        let stale = token < *highest;
        *highest = token.max(*highest);
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fenced_ledger_refuses_what_the_unfenced_one_marks_stale() {
        let mut ledgers = Ledgers::default();
        let writes = [
            (2, true, false),
            (2, true, false),
            (1, false, true),
            (3, true, false),
        ];
        for (token, accepted, stale) in writes {
            assert_eq!(ledgers.append_fenced("k", token), accepted, "token {token}");
            assert_eq!(ledgers.append_unfenced("k", token), stale, "token {token}");
        }
        assert!(ledgers.append_fenced("other", 1), "per key");
        assert!(!ledgers.append_unfenced("other", 1));
    }
}
