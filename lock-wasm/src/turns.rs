//! Turns: within one session, one caller at a time has a key, and the others wait for it in
//! arrival order.
//!
//! A session is shared by independent callers (every request handler of a service, every
//! task). Async Rust and JavaScript have no thread identity, so the SDK cannot tell a nested
//! call from a stranger's: a key this session holds, or is acquiring, for one caller is
//! never handed to another. The next caller waits here, without sending anything, until the
//! turn passes to it: when the holder's release was answered (or failed, see
//! `crate::session`), or the acquire before it ended without a grant. Then it sends an L4 of
//! its own and gets a token of its own. Nesting is explicit, through the handle
//! ([`LockHandle::nest`]), so it is never granted to a stranger.
//!
//! Shared holds take turns too: the server keeps one hold per session and key, so two
//! callers of one session holding the key shared at once would share one grant and one
//! token. Shared holds at the same time need sessions of their own (C2 ct2-shared).
//!
//! A turn is held by exactly one of: an acquire in flight, the holder of a grant (its handle
//! is registered here, for heartbeats), a release until its L6 is answered, or the
//! heartbeat's release of an orphan. A key has an entry only while its turn is held, and a
//! waiter that goes away (its budget ran out, its signal aborted, its future was dropped)
//! takes its place in the line with it, so memory does not grow with the number of acquires.
//!
//! Ordered maps, not hash maps: iteration order must be a function of the inputs so a seeded
//! simulation replays exactly.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::handle::LockHandle;

/// The turns of one session's keys, shared by its acquires, releases and heartbeat task.
#[derive(Default)]
pub(crate) struct Turns {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Keys whose turn is held; a free key has no entry.
    keys: BTreeMap<String, KeyTurn>,
    next_waiter: u64,
}

#[derive(Default)]
struct KeyTurn {
    /// The grant the turn's holder was given, once registered.
    held: Option<LockHandle>,
    /// A waiter the turn was passed to and that has not taken it yet.
    handed_to: Option<u64>,
    /// Waiters, oldest first, with the waker of their last poll.
    waiting: VecDeque<(u64, Option<Waker>)>,
}

impl Turns {
    /// Waits for `key`'s turn: at once if the key is free, else after every caller that
    /// asked before. Race it against the caller's budget and the session's end.
    pub(crate) fn wait(self: &Arc<Self>, key: &str) -> TurnWait {
        TurnWait {
            turns: self.clone(),
            key: key.to_owned(),
            id: None,
        }
    }

    /// `key`'s turn if it is free now (nobody holds it, so nobody waits for it either).
    pub(crate) fn try_take(self: &Arc<Self>, key: &str) -> Option<Turn> {
        let mut inner = self.inner.lock().unwrap();
        if inner.keys.contains_key(key) {
            return None;
        }
        inner.keys.insert(key.to_owned(), KeyTurn::default());
        Some(Turn::new(self, key))
    }

    /// Takes back the turn of `handle`'s key from the handle, if this exact grant holds it:
    /// the release owns the turn until its L6 is answered. `None` if the grant is not (or no
    /// longer) registered.
    pub(crate) fn take_held(self: &Arc<Self>, handle: &LockHandle) -> Option<Turn> {
        let mut inner = self.inner.lock().unwrap();
        let turn = inner.keys.get_mut(handle.key())?;
        if !turn.held.as_ref().is_some_and(|h| h.same_grant(handle)) {
            return None;
        }
        turn.held = None;
        Some(Turn::new(self, handle.key()))
    }

    /// Every registered grant (for heartbeat renewal and deadlines).
    pub(crate) fn handles(&self) -> Vec<LockHandle> {
        let inner = self.inner.lock().unwrap();
        inner.keys.values().filter_map(|t| t.held.clone()).collect()
    }

    /// Unregisters every grant (the session closed or was lost), returning them. Their turns
    /// stay taken: nothing can be acquired on an ended session anyway.
    pub(crate) fn clear(&self) -> Vec<LockHandle> {
        let mut inner = self.inner.lock().unwrap();
        inner
            .keys
            .values_mut()
            .filter_map(|t| t.held.take())
            .collect()
    }

    /// How many keys have an entry (for the tests of flat memory).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.inner.lock().unwrap().keys.len()
    }

    /// The turn of `key` ends: it passes to the oldest waiter, or the key is free.
    fn pass_on(&self, key: &str) {
        let waker = {
            let mut inner = self.inner.lock().unwrap();
            let Some(turn) = inner.keys.get_mut(key) else {
                return;
            };
            match turn.waiting.pop_front() {
                Some((id, waker)) => {
                    turn.handed_to = Some(id);
                    waker
                }
                None => {
                    inner.keys.remove(key);
                    None
                }
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The future of [`Turns::wait`].
pub(crate) struct TurnWait {
    turns: Arc<Turns>,
    key: String,
    /// Its place in the line, once it had to queue; `None` again once it got the turn.
    id: Option<u64>,
}

impl Future for TurnWait {
    type Output = Turn;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Turn> {
        let this = self.get_mut();
        let mut inner = this.turns.inner.lock().unwrap();
        let Inner { keys, next_waiter } = &mut *inner;
        let Some(turn) = keys.get_mut(&this.key) else {
            // Free (only a caller that never queued can find it so: a queued one keeps the
            // entry alive until it is handed the turn or leaves).
            keys.insert(this.key.clone(), KeyTurn::default());
            this.id = None;
            return Poll::Ready(Turn::new(&this.turns, &this.key));
        };
        match this.id {
            Some(id) if turn.handed_to == Some(id) => {
                turn.handed_to = None;
                this.id = None;
                Poll::Ready(Turn::new(&this.turns, &this.key))
            }
            Some(id) => {
                if let Some((_, waker)) = turn.waiting.iter_mut().find(|(w, _)| *w == id) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            None => {
                *next_waiter += 1;
                this.id = Some(*next_waiter);
                turn.waiting
                    .push_back((*next_waiter, Some(cx.waker().clone())));
                Poll::Pending
            }
        }
    }
}

impl Drop for TurnWait {
    /// A waiter that goes away leaves the line; one that was handed the turn and never took
    /// it passes it on.
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let handed = {
            let mut inner = self.turns.inner.lock().unwrap();
            let Some(turn) = inner.keys.get_mut(&self.key) else {
                return;
            };
            turn.waiting.retain(|(w, _)| *w != id);
            let handed = turn.handed_to == Some(id);
            if handed {
                turn.handed_to = None;
            }
            handed
        };
        if handed {
            self.turns.pass_on(&self.key);
        }
    }
}

/// Holds one key's turn. Dropping it (the acquire ended without a grant, the release's L6
/// was answered or failed, the future holding it was dropped) passes the turn on, so no
/// outcome leaves the key stuck.
pub(crate) struct Turn {
    turns: Arc<Turns>,
    key: String,
    /// Set by [`Turn::hold`]: the registered grant keeps the turn, nothing passes on.
    kept: bool,
}

impl Turn {
    fn new(turns: &Arc<Turns>, key: &str) -> Self {
        Turn {
            turns: turns.clone(),
            key: key.to_owned(),
            kept: false,
        }
    }

    /// Registers `handle` as the grant of this turn; the turn stays taken until a release
    /// takes it back ([`Turns::take_held`]).
    pub(crate) fn hold(mut self, handle: LockHandle) {
        let mut inner = self.turns.inner.lock().unwrap();
        let turn = inner.keys.entry(self.key.clone()).or_default();
        turn.held = Some(handle);
        self.kept = true;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.kept {
            self.turns.pass_on(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use futures::FutureExt;
    use std::time::Duration;

    fn handle(key: &str) -> LockHandle {
        let grant = lock_api::LockGrant {
            key: key.into(),
            session_id: "s".into(),
            fencing_token: 1,
            ttl_millis: 1_000,
            waited_millis: 0,
            mode: lock_api::LockMode::Exclusive,
            limit: None,
        };
        let lease = crate::handle::Lease {
            seq: 0,
            anchor: Duration::ZERO,
            deadline: Duration::from_secs(1),
        };
        LockHandle::new(&grant, lease, Arc::new(ManualClock::new()))
    }

    fn poll(wait: &mut TurnWait) -> Option<Turn> {
        match Pin::new(wait).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(turn) => Some(turn),
            Poll::Pending => None,
        }
    }

    #[test]
    fn waiters_get_the_turn_in_arrival_order() {
        let turns = Arc::new(Turns::default());
        let first = turns.wait("k").now_or_never().expect("a free key at once");
        let (mut second, mut third) = (turns.wait("k"), turns.wait("k"));
        assert!(poll(&mut second).is_none());
        assert!(poll(&mut third).is_none());
        drop(first);
        assert!(poll(&mut third).is_none(), "not before the older waiter");
        let second = poll(&mut second).expect("the oldest waiter is next");
        drop(second);
        assert!(poll(&mut third).is_some());
    }

    #[test]
    fn a_held_grant_keeps_the_turn_until_its_release_takes_it_back() {
        let turns = Arc::new(Turns::default());
        let h = handle("k");
        turns.wait("k").now_or_never().unwrap().hold(h.clone());
        let mut next = turns.wait("k");
        assert!(poll(&mut next).is_none());
        assert_eq!(turns.handles().len(), 1);
        assert!(turns.take_held(&handle("k")).is_none(), "another grant");
        let release = turns.take_held(&h).expect("this grant holds the turn");
        assert!(turns.handles().is_empty());
        assert!(
            poll(&mut next).is_none(),
            "until the release's L6 is answered"
        );
        drop(release);
        assert!(poll(&mut next).is_some());
    }

    #[test]
    fn a_waiter_that_leaves_takes_its_place_with_it() {
        let turns = Arc::new(Turns::default());
        let first = turns.try_take("k").unwrap();
        assert!(turns.try_take("k").is_none());
        let mut handed = turns.wait("k");
        let mut last = turns.wait("k");
        assert!(poll(&mut handed).is_none());
        assert!(poll(&mut last).is_none());
        for _ in 0..1_000 {
            let mut gone = turns.wait("k");
            assert!(poll(&mut gone).is_none());
        }
        drop(first); // handed the turn, but drops before taking it: it passes on
        drop(handed);
        let last = poll(&mut last).expect("the turn passed over the waiters that left");
        drop(last);
        assert_eq!(turns.entries(), 0, "a free key has no entry");
        assert!(turns.try_take("k").is_some());
    }
}
