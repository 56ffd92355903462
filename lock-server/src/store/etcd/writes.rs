//! The writes of one transaction, at most one per etcd key.
//!
//! Why: etcd refuses a transaction that writes one key twice ("duplicate key"), and a
//! transaction that ends holds and grants the key to queued tickets may name a key twice (the
//! marker of a shared hold that ends, written again for the same session's new hold). Here
//! the later write of a key replaces the earlier one, in its place.

use etcd_client::{PutOptions, TxnOp};

/// The writes of one transaction, in order, one per key.
#[derive(Debug, Default)]
pub(super) struct Writes {
    writes: Vec<(String, Write)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Write {
    /// A put on the given lease.
    Put(Vec<u8>, i64),
    Delete,
}

impl Writes {
    /// Puts `value` at `key` on `lease`.
    pub(super) fn put(&mut self, key: String, value: Vec<u8>, lease: i64) {
        self.set(key, Write::Put(value, lease));
    }

    /// Deletes `key` (nothing happens if it is absent).
    pub(super) fn delete(&mut self, key: String) {
        self.set(key, Write::Delete);
    }

    fn set(&mut self, key: String, write: Write) {
        match self.writes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, earlier)) => *earlier = write,
            None => self.writes.push((key, write)),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.writes.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The transaction's operations.
    pub(super) fn into_ops(self) -> Vec<TxnOp> {
        self.writes
            .into_iter()
            .map(|(key, write)| match write {
                Write::Put(value, lease) => {
                    TxnOp::put(key, value, Some(PutOptions::new().with_lease(lease)))
                }
                Write::Delete => TxnOp::delete(key, None),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_twice_keeps_the_later_write_in_its_place() {
        let mut writes = Writes::default();
        writes.delete("a".into());
        writes.put("b".into(), b"1".to_vec(), 7);
        writes.put("a".into(), b"2".to_vec(), 8);
        assert_eq!(writes.len(), 2);
        assert_eq!(
            writes.writes[0],
            ("a".to_owned(), Write::Put(b"2".to_vec(), 8))
        );
        assert_eq!(writes.writes[1].0, "b");
        writes.delete("b".into());
        assert_eq!(writes.writes[1], ("b".to_owned(), Write::Delete));
        assert_eq!(writes.into_ops().len(), 2);
    }
}
