//! The checks of keys held shared (read-write locks, counting semaphores): never an
//! exclusive hold beside any other hold of the key ([`Check::ExclusiveNotAlone`]), never more
//! shared holds than the key's limit ([`Check::OverLimit`]).
//!
//! The reasoning is [`Check::TwoHolders`]' own, widened from a pair to a set. A hold is live
//! on one interval that begins at its grant, and tokens rise in grant order
//! ([`Check::TokenOrder`]). So every lower token `a` proven live (an L7 sample listing it, a
//! 204 release of it, its holder's SDK handle reporting it valid) strictly after the higher
//! token `b` was certainly granted was live throughout `b`'s grant; at that instant the key
//! was held by `b` and every such `a`. That set must contain no exclusive hold beside
//! another, and at most the limit of shared ones. One L7 answer is one instant of the store
//! too: its `holders` are checked as they stand.
//!
//! Evidence that `b` was granted by some time: its grant's answer, an L7 sample or a valid
//! handle check naming it, an accepted ledger write with it, a reader's ledger read that saw
//! it. A token in the key's own ledger is an exclusive hold's: only writers write there
//! (readers never write; a semaphore holder writes to a ledger of its own,
//! `<key>/by/<process>`). A ledger write is never evidence that its token was still live:
//! readers do not write, so a paused writer's late write can be accepted after its lease
//! ended.

use std::collections::{BTreeMap, HashMap, HashSet};

use lock_api::LockMode;

use super::{Check, Report};
use crate::history::{Event, LedgerVerdict, Window};

/// What the history says about one hold (one token of one key).
#[derive(Default)]
struct Hold {
    /// The earliest time it was certainly granted.
    granted_by: Option<u64>,
    /// The live window that began last: the latest proof that the hold was still on.
    latest_live: Option<Window>,
    /// Its mode, from its grant or an L7 sample.
    mode: Option<LockMode>,
    /// A shared hold's limit, from its grant or an L7 sample.
    limit: Option<u32>,
}

impl Hold {
    fn granted(&mut self, by: u64) {
        self.granted_by = Some(self.granted_by.map_or(by, |g| g.min(by)));
    }

    fn live(&mut self, window: Window) {
        self.granted(window.recv);
        if self.latest_live.is_none_or(|w| window.sent > w.sent) {
            self.latest_live = Some(window);
        }
    }

    fn learn(&mut self, mode: Option<LockMode>, limit: Option<u32>) {
        self.mode = self.mode.or(mode);
        self.limit = self.limit.or(limit);
    }
}

/// The keys held shared at least once (a shared grant, or an L7 sample of a shared key):
/// these get the checks of this module instead of [`Check::TwoHolders`].
pub(super) fn shared_keys(events: &[Event]) -> HashSet<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Grant {
                key,
                mode: LockMode::Shared,
                ..
            }
            | Event::L7Sample {
                key,
                mode: Some(LockMode::Shared),
                ..
            } => Some(key.as_str()),
            _ => None,
        })
        .collect()
}

/// Every hold of the `shared` keys, by key and token.
fn holds<'a>(events: &'a [Event], shared: &HashSet<&str>) -> HashMap<&'a str, BTreeMap<u64, Hold>> {
    let mut keys: HashMap<&str, BTreeMap<u64, Hold>> = HashMap::new();
    for e in events {
        match e {
            Event::Grant {
                key,
                token,
                window,
                mode,
                limit,
                ..
            } => {
                if let Some(h) = hold_of(&mut keys, shared, key, *token) {
                    h.granted(window.recv);
                    h.learn(Some(*mode), *limit);
                }
            }
            Event::L7Sample {
                key,
                token,
                window,
                holders,
                mode,
                limit,
                ..
            } => {
                for t in holders.iter().chain(token) {
                    if let Some(h) = hold_of(&mut keys, shared, key, *t) {
                        h.live(*window);
                        h.learn(*mode, *limit);
                    }
                }
            }
            Event::Release {
                key,
                token,
                window,
                ok: true,
                ..
            }
            | Event::HoldCheck {
                key,
                token,
                window,
                valid: true,
                ..
            } => {
                if let Some(h) = hold_of(&mut keys, shared, key, *token) {
                    h.live(*window);
                }
            }
            Event::LedgerWrite {
                key,
                token,
                window,
                verdict: LedgerVerdict::Accepted,
                ..
            }
            | Event::LedgerRead {
                key,
                highest: Some(token),
                window,
                ..
            } => {
                if let Some(h) = hold_of(&mut keys, shared, key, *token) {
                    h.granted(window.recv);
                    h.learn(Some(LockMode::Exclusive), None);
                }
            }
            _ => {}
        }
    }
    keys
}

/// The hold of `token` on `key`, if `key` is one of the `shared` keys.
fn hold_of<'m, 'a>(
    keys: &'m mut HashMap<&'a str, BTreeMap<u64, Hold>>,
    shared: &HashSet<&str>,
    key: &'a str,
    token: u64,
) -> Option<&'m mut Hold> {
    if !shared.contains(key) {
        return None;
    }
    Some(keys.entry(key).or_default().entry(token).or_default())
}

/// Runs both checks over the `shared` keys.
pub(super) fn check_holds(events: &[Event], shared: &HashSet<&str>, report: &mut Report) {
    let keys = holds(events, shared);
    check_samples(events, &keys, report);
    for (key, tokens) in &keys {
        // One key's limit: every shared holder must agree on it (LIMIT_MISMATCH otherwise).
        let key_limit = tokens.values().find_map(|h| h.limit);
        for (&b, hold) in tokens {
            let Some(granted) = hold.granted_by else {
                continue;
            };
            // Every lower token certainly still live after `b` was certainly granted.
            let beside: Vec<(u64, &Hold)> = tokens
                .range(..b)
                .filter(|(_, a)| a.latest_live.is_some_and(|w| w.sent > granted))
                .map(|(&a, h)| (a, h))
                .collect();
            let exclusive = |h: &Hold| h.mode == Some(LockMode::Exclusive);
            let shown = |a: u64, h: &Hold| {
                let w = h.latest_live.expect("live beside");
                format!("token {a} live in [{}, {}]", w.sent, w.recv)
            };
            if let Some((a, h)) = beside.iter().find(|(_, h)| exclusive(hold) || exclusive(h)) {
                report.violate(
                    Check::ExclusiveNotAlone,
                    format!(
                        "key {key}: {} after token {b} ({}) was granted by {granted}: an exclusive hold beside another",
                        shown(*a, h),
                        mode_name(hold.mode)
                    ),
                );
            }
            if hold.mode != Some(LockMode::Shared) {
                continue;
            }
            let Some(limit) = hold.limit.or(key_limit) else {
                continue;
            };
            let shared: Vec<u64> = beside
                .iter()
                .filter(|(_, h)| h.mode == Some(LockMode::Shared))
                .map(|(a, _)| *a)
                .collect();
            if shared.len() + 1 > limit as usize {
                report.violate(
                    Check::OverLimit,
                    format!(
                        "key {key}: tokens {shared:?} still live after shared token {b} was granted by {granted}: {} shared holds, limit {limit}",
                        shared.len() + 1
                    ),
                );
            }
        }
    }
}

/// One L7 answer: no exclusive holder beside another, at most the limit of shared holders.
fn check_samples(events: &[Event], keys: &HashMap<&str, BTreeMap<u64, Hold>>, report: &mut Report) {
    for e in events {
        let Event::L7Sample {
            key,
            window,
            holders,
            mode,
            limit,
            ..
        } = e
        else {
            continue;
        };
        let Some(tokens) = keys.get(key.as_str()) else {
            continue;
        };
        let mode_of = |t: &u64| tokens.get(t).and_then(|h| h.mode);
        let at = format!(
            "key {key}: L7 in [{}, {}] listed {holders:?}",
            window.sent, window.recv
        );
        let any_exclusive = *mode == Some(LockMode::Exclusive)
            || holders
                .iter()
                .any(|t| mode_of(t) == Some(LockMode::Exclusive));
        if holders.len() > 1 && any_exclusive {
            report.violate(
                Check::ExclusiveNotAlone,
                format!("{at}: an exclusive hold beside another"),
            );
        }
        let limit = limit.or_else(|| holders.iter().find_map(|t| tokens.get(t)?.limit));
        if let Some(limit) = limit.filter(|l| holders.len() > *l as usize) {
            report.violate(
                Check::OverLimit,
                format!("{at}: {} shared holders, limit {limit}", holders.len()),
            );
        }
    }
}

fn mode_name(mode: Option<LockMode>) -> &'static str {
    mode.map_or("mode unknown", LockMode::as_str)
}

#[cfg(test)]
mod tests;
