//! Exclusive and shared holds of one key: the grant rules both backends apply, stated once.
//!
//! A key is free, held exclusive by one session, or held shared by up to its limit of
//! sessions (no limit when `None`), never both. A request is *compatible* with the holders
//! when it could be granted beside them: exclusive needs no holder at all; shared needs no
//! exclusive holder and fewer shared holders than the limit. A request is granted only when
//! it is compatible and nothing queues ahead of it (no barging). When holds end, the
//! queue's head tickets are granted in order while each is compatible with the holders
//! then (the ones just granted included), and the hand-off stops at the first that is not:
//! readers behind the head are batched up to the first writer, and a queued writer blocks
//! every reader behind it (no writer starvation).
//!
//! Every shared holder of a key agrees on its limit: the limit *in force* is the shared
//! holders' or, while none hold the key shared, the first live queued shared request's. A
//! shared request under another limit is refused (LIMIT_MISMATCH); a key with neither takes
//! any limit.

use lock_api::HoldKind;

/// How a key is held at one instant, as far as granting is concerned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Held {
    /// Nobody holds it.
    #[default]
    Free,
    /// One exclusive holder.
    Exclusive,
    /// `count` ≥ 1 shared holders under `limit`.
    Shared { count: u32, limit: Option<u32> },
}

impl Held {
    /// The key's holders as a list of their kinds (every shared holder of a live key carries
    /// the same limit; the first one's is taken).
    pub fn of(holds: impl IntoIterator<Item = HoldKind>) -> Held {
        holds
            .into_iter()
            .fold(Held::Free, |held, hold| held.with(hold))
    }

    /// The key after `hold` is granted beside its holders.
    pub fn with(self, hold: HoldKind) -> Held {
        match (self, hold) {
            (Held::Shared { count, limit }, HoldKind::Shared { .. }) => Held::Shared {
                count: count + 1,
                limit,
            },
            (_, HoldKind::Shared { limit }) => Held::Shared { count: 1, limit },
            (_, HoldKind::Exclusive) => Held::Exclusive,
        }
    }

    /// Whether `hold` may be granted beside the current holders (queue aside).
    pub fn admits(self, hold: HoldKind) -> bool {
        match (self, hold) {
            (Held::Free, _) => true,
            (Held::Exclusive, _) => false,
            (Held::Shared { .. }, HoldKind::Exclusive) => false,
            (Held::Shared { count, limit }, HoldKind::Shared { .. }) => {
                limit.is_none_or(|limit| count < limit)
            }
        }
    }

    /// The shared limit the holders agreed on; `None` when the key is not held shared.
    pub fn shared_limit(self) -> Option<Option<u32>> {
        match self {
            Held::Shared { limit, .. } => Some(limit),
            _ => None,
        }
    }
}

/// The limit a new shared request must carry: the shared holders', else the first queued
/// shared request's (`queued`, in queue order), else `None` (any limit goes).
pub fn limit_in_force(
    held: Held,
    queued: impl IntoIterator<Item = HoldKind>,
) -> Option<Option<u32>> {
    held.shared_limit().or_else(|| {
        queued.into_iter().find_map(|hold| match hold {
            HoldKind::Shared { limit } => Some(limit),
            HoldKind::Exclusive => None,
        })
    })
}

/// Refuses a shared `hold` whose limit differs from the one in force (LIMIT_MISMATCH,
/// carrying the limit in force); exclusive requests carry no limit and always pass.
pub fn check_limit(hold: HoldKind, in_force: Option<Option<u32>>) -> Result<(), Option<u32>> {
    match (hold, in_force) {
        (HoldKind::Shared { limit }, Some(agreed)) if limit != agreed => Err(agreed),
        _ => Ok(()),
    }
}

/// How many of the queue's head tickets (`queued`, in order) a hand-off grants beside the
/// holders `held`: each while it is compatible with the holders then, stopping at the
/// first that is not.
pub fn grantable_heads(held: Held, queued: impl IntoIterator<Item = HoldKind>) -> usize {
    let mut held = held;
    let mut granted = 0;
    for hold in queued {
        if !held.admits(hold) {
            break;
        }
        held = held.with(hold);
        granted += 1;
    }
    granted
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: HoldKind = HoldKind::Exclusive;
    const R: HoldKind = HoldKind::Shared { limit: None };
    const S2: HoldKind = HoldKind::Shared { limit: Some(2) };

    #[test]
    fn the_grant_matrix() {
        assert!(Held::Free.admits(X) && Held::Free.admits(R) && Held::Free.admits(S2));
        assert!(!Held::Exclusive.admits(X) && !Held::Exclusive.admits(R));
        assert!(!Held::of([R]).admits(X));
        assert!(Held::of([R, R, R]).admits(R));
        assert!(Held::of([S2]).admits(S2));
        assert!(!Held::of([S2, S2]).admits(S2));
    }

    #[test]
    fn the_limit_in_force_is_the_holders_then_the_first_queued_shared() {
        assert_eq!(limit_in_force(Held::Free, []), None);
        assert_eq!(limit_in_force(Held::Exclusive, [X, S2, R]), Some(Some(2)));
        assert_eq!(limit_in_force(Held::of([R]), [S2]), Some(None));
        assert_eq!(check_limit(S2, Some(None)), Err(None));
        assert_eq!(check_limit(R, Some(Some(2))), Err(Some(2)));
        assert_eq!(check_limit(S2, Some(Some(2))), Ok(()));
        assert_eq!(check_limit(X, Some(Some(2))), Ok(()));
        assert_eq!(check_limit(S2, None), Ok(()));
    }

    #[test]
    fn readers_behind_the_head_are_batched_up_to_the_first_writer() {
        assert_eq!(grantable_heads(Held::Free, [R, R, X, R]), 2);
        assert_eq!(grantable_heads(Held::Free, [X, R]), 1);
        assert_eq!(grantable_heads(Held::of([R]), [X, R]), 0);
        assert_eq!(grantable_heads(Held::of([S2]), [S2, S2]), 1);
        assert_eq!(grantable_heads(Held::Exclusive, [R]), 0);
    }
}
