//! [`HeldView`]: what the server says a session holds, as of the last L2 answer applied, and
//! the version that answer carried (contract C3, L2).
//!
//! The next L2 sends that version back as `since`; its answer is every lock (which replaces
//! the view), what changed after `since` (applied to it), or nothing (the view stands). So
//! after each answer the view is the server's list at that answer, whichever shape it had,
//! and the session judges its handles against it exactly as against a full list. A server
//! from before versions sends no version: the view is then rebuilt from every answer.

use std::collections::BTreeMap;

use lock_api::{ChangeKind, HeartbeatRequest, HeartbeatResponse, HeldLock};

/// The server's holds of one session at the last applied L2 answer, by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeldView {
    /// The answer's version; `None` before the first answer, or from a server without
    /// versions.
    version: Option<String>,
    holds: BTreeMap<String, HeldLock>,
}

impl HeldView {
    /// The next L2's body: `since` the view's version.
    pub(crate) fn request(&self) -> HeartbeatRequest {
        HeartbeatRequest {
            since: self.version.clone(),
        }
    }

    /// Applies `answer`, the reply to an L2 that sent `sent`. A delta or "unchanged" answer
    /// to an L2 that sent no version, or another one than the view's, cannot be applied
    /// exactly: the view then forgets its version, so the next L2 asks for every lock, and
    /// reports `false` (the caller then judges nothing by it).
    pub(crate) fn apply(&mut self, sent: &HeartbeatRequest, answer: &HeartbeatResponse) -> bool {
        if let Some(locks) = &answer.locks {
            self.holds = locks.iter().map(|l| (l.key.clone(), l.clone())).collect();
            self.version = answer.version.clone();
            return true;
        }
        if sent.since.is_none() || sent.since != self.version {
            self.version = None;
            return false;
        }
        for change in answer.changes.iter().flatten() {
            match change.change {
                ChangeKind::Granted => {
                    let held = HeldLock {
                        key: change.key.clone(),
                        fencing_token: change.fencing_token,
                        mode: change.mode,
                    };
                    self.holds.insert(change.key.clone(), held);
                }
                ChangeKind::Gone => {
                    self.holds.remove(&change.key);
                }
            }
        }
        self.version = answer.version.clone();
        true
    }

    /// The hold of `key` the server lists, if any.
    pub(crate) fn get(&self, key: &str) -> Option<&HeldLock> {
        self.holds.get(key)
    }

    /// Every hold the server lists, by key.
    pub(crate) fn holds(&self) -> impl Iterator<Item = &HeldLock> {
        self.holds.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::{HoldChange, LockMode};

    fn held(key: &str, token: u64) -> HeldLock {
        HeldLock {
            key: key.into(),
            fencing_token: token,
            mode: LockMode::Exclusive,
        }
    }

    fn change(key: &str, token: u64, change: ChangeKind) -> HoldChange {
        HoldChange {
            key: key.into(),
            fencing_token: token,
            mode: LockMode::Exclusive,
            change,
        }
    }

    fn tokens(view: &HeldView) -> Vec<(String, u64)> {
        view.holds()
            .map(|l| (l.key.clone(), l.fencing_token))
            .collect()
    }

    #[test]
    fn a_full_list_replaces_the_view_and_a_delta_edits_it() {
        let mut view = HeldView::default();
        assert_eq!(view.request().since, None);
        let full = HeartbeatResponse::full(9, Some("v1".into()), vec![held("a", 1), held("b", 2)]);
        assert!(view.apply(&view.request(), &full));
        assert_eq!(view.request().since.as_deref(), Some("v1"));
        let changes = vec![
            change("a", 1, ChangeKind::Gone),
            change("b", 5, ChangeKind::Granted),
            change("c", 3, ChangeKind::Granted),
        ];
        let delta = HeartbeatResponse::delta(9, "v2".into(), changes);
        assert!(view.apply(&view.request(), &delta));
        assert_eq!(tokens(&view), [("b".into(), 5), ("c".into(), 3)]);
        let same = HeartbeatResponse::unchanged(9, "v2".into());
        assert!(view.apply(&view.request(), &same));
        assert_eq!(view.request().since.as_deref(), Some("v2"));
        assert_eq!(tokens(&view).len(), 2);
        // A version reset (the server restarted): the full list under a new version.
        let reset = HeartbeatResponse::full(9, Some("other.1".into()), vec![held("c", 3)]);
        assert!(view.apply(&view.request(), &reset));
        assert_eq!(tokens(&view), [("c".into(), 3)]);
        assert_eq!(view.get("c").map(|l| l.fencing_token), Some(3));
    }

    #[test]
    fn a_delta_to_another_version_is_not_applied() {
        let mut view = HeldView::default();
        let full = HeartbeatResponse::full(9, Some("v1".into()), vec![held("a", 1)]);
        view.apply(&view.request(), &full);
        let stale = HeartbeatRequest {
            since: Some("v0".into()),
        };
        let delta = HeartbeatResponse::delta(9, "v2".into(), vec![]);
        assert!(!view.apply(&stale, &delta));
        assert_eq!(
            view.request().since,
            None,
            "the next L2 asks for every lock"
        );
        let unasked = HeartbeatResponse::unchanged(9, "v2".into());
        assert!(!view.apply(&HeartbeatRequest::default(), &unasked));
    }

    #[test]
    fn a_server_without_versions_gets_no_since() {
        let mut view = HeldView::default();
        let old = HeartbeatResponse::full(9, None, vec![held("a", 1)]);
        assert!(view.apply(&view.request(), &old));
        assert_eq!(view.request().since, None);
        assert_eq!(tokens(&view), [("a".into(), 1)]);
    }
}
