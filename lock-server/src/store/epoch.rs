//! Token epochs: what lets a restored store (SQLite from a backup, etcd from a snapshot)
//! issue tokens above every token the old one may have issued after the copy was taken.
//!
//! A fencing token is `(epoch << EPOCH_BITS) + n`, where `n` counts within the epoch (SQLite:
//! the global counter; etcd: the hold key's revision). A restore cannot know how far the old
//! store got after its copy, only where the copy was; so it moves to the start of the next
//! epoch, which is above every token of the copy's epoch. That is safe as long as the old
//! store issued fewer than `2^EPOCH_BITS` tokens after the copy (ASSUMPTION: 2^40 per epoch;
//! at 20,000 grants/s that is over 1.7 years of grants). Epoch 0 is every token issued before
//! epochs existed, so a store that was never restored issues exactly the tokens it always did.
//! JavaScript numbers stay exact up to `2^53`: 8,191 restores (`MAX_EPOCH`).

use lock_api::limits::MAX_FENCING_TOKEN;

/// Bits of a token below its epoch (ASSUMPTION: 40, see the module docs).
pub const EPOCH_BITS: u32 = 40;

/// The largest epoch whose tokens stay below [`MAX_FENCING_TOKEN`] (2^53 − 1): 8,191.
pub const MAX_EPOCH: u64 = MAX_FENCING_TOKEN >> EPOCH_BITS;

/// A restore would need an epoch past [`MAX_EPOCH`]: the token space is used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("fencing token space exhausted: no epoch after {0} fits in 2^53")]
pub struct EpochsExhausted(pub u64);

/// The epoch a token belongs to.
pub fn epoch_of(token: u64) -> u64 {
    token >> EPOCH_BITS
}

/// The first token of `epoch` (its `n` is 0, never issued: SQLite resumes above it, and etcd
/// revisions start at 1).
pub fn epoch_start(epoch: u64) -> u64 {
    epoch << EPOCH_BITS
}

/// The token of count `n` (an etcd revision) in `epoch`; `None` if `n` has outgrown its
/// epoch or the token would pass 2^53 − 1 (never issue it: it could equal a later epoch's).
pub fn token(epoch: u64, n: u64) -> Option<u64> {
    if n >> EPOCH_BITS != 0 || epoch > MAX_EPOCH {
        return None;
    }
    let token = epoch_start(epoch) + n;
    (token <= MAX_FENCING_TOKEN).then_some(token)
}

/// The restore rule: the first token of the epoch after `mark`'s, where `mark` is the highest
/// token the old store may have issued as far as the restorer knows (the larger of the copy's
/// mark and the target's own).
pub fn floor_above(mark: u64) -> Result<u64, EpochsExhausted> {
    let next = epoch_of(mark) + 1;
    if next > MAX_EPOCH {
        return Err(EpochsExhausted(epoch_of(mark)));
    }
    Ok(epoch_start(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_zero_is_the_tokens_of_before() {
        assert_eq!(token(0, 8_608), Some(8_608));
        assert_eq!(epoch_of(8_608), 0);
        assert_eq!(epoch_start(0), 0);
    }

    #[test]
    fn every_token_of_an_epoch_is_below_every_token_of_the_next() {
        let last_of_zero = token(0, (1 << EPOCH_BITS) - 1).unwrap();
        let first_of_one = token(1, 1).unwrap();
        assert!(last_of_zero < first_of_one);
        assert_eq!(epoch_of(last_of_zero), 0);
        assert_eq!(epoch_of(first_of_one), 1);
        assert_eq!(token(0, 1 << EPOCH_BITS), None, "a count past its epoch");
    }

    #[test]
    fn the_floor_is_the_next_epoch_above_the_mark() {
        assert_eq!(floor_above(0), Ok(1 << 40));
        assert_eq!(floor_above(65_536), Ok(1 << 40));
        assert_eq!(floor_above((1 << 40) - 1), Ok(1 << 40));
        assert_eq!(floor_above(1 << 40), Ok(2 << 40));
        assert_eq!(floor_above((1 << 40) + 5), Ok(2 << 40));
        // Above the mark by at least one, and never below it.
        for mark in [0, 1, 8_608, (3 << 40) + 17, (5 << 40) - 1] {
            let floor = floor_above(mark).unwrap();
            assert!(floor > mark);
            assert_eq!(floor % (1 << EPOCH_BITS), 0);
        }
    }

    #[test]
    fn restores_run_out_after_8191_epochs_within_js_numbers() {
        assert_eq!(MAX_EPOCH, 8_191);
        let last = floor_above(epoch_start(MAX_EPOCH - 1)).unwrap();
        assert_eq!(epoch_of(last), MAX_EPOCH);
        assert!(last <= MAX_FENCING_TOKEN);
        assert_eq!(
            floor_above(epoch_start(MAX_EPOCH)),
            Err(EpochsExhausted(MAX_EPOCH))
        );
        assert_eq!(token(MAX_EPOCH + 1, 1), None);
        assert!(token(MAX_EPOCH, (1 << EPOCH_BITS) - 1).unwrap() <= MAX_FENCING_TOKEN);
    }
}
