//! The safety checker: reads a merged [`History`](crate::history) and reports every
//! violation of the safety claims below (docs/RELIABILITY.md, "What each check proves").
//!
//! Reasoning is by *windows*: every observation happened at some unknown point inside its
//! `[sent, recv]`, so a violation is only reported when it holds for every such point (no
//! false alarms from clock skew between the two ends of a request).
//!
//! Checks:
//! - [`Check::TwoHolders`]: a lock is live on an interval that starts when it is granted and,
//!   once over, never comes back. Token `a` proven live (an L7 sample naming it, or a 204
//!   release of it) strictly after a higher token `b > a` of the same key was certainly
//!   granted means both were live at `b`'s grant: two holders.
//! - [`Check::StaleLedgerWrite`]: the ledger accepted token `a` after it had certainly
//!   accepted `b > a`; or its final content is not in non-decreasing token order.
//! - [`Check::TokenOrder`]: a grant requested after another grant of the same key was
//!   received carries a token that is not larger (except the idempotent re-grant of L4: the
//!   same session, the same token, not released in between — on a key held shared, not
//!   necessarily the highest token then, since others may be granted beside it; and on such
//!   a key a grant is requested as early as the unanswered acquires of its key right before
//!   it, see `first_asks`); or one token was granted to two sessions.
//! - [`Check::AcquireBudget`]: an acquire returned later than its budget plus the time its
//!   process was paused (SIGSTOP) plus a scheduling tolerance, or never returned.
//! - [`Check::FencedNotLost`]: the ledger answered FENCED_OUT while the SDK still reported
//!   the handle valid (a holder paused past its lease must find its handle lost on resuming:
//!   docs/fencing.md, "Why: the paused worker").
//! - [`Check::RetriedAfterFence`]: a process wrote again with a token the ledger had
//!   fenced out for it (the side effect is never retried).
//! - [`Check::ReleasedStillLive`]: every acknowledged release released: token `a` seen live
//!   (an L7 answer listing it, or another 204 release of it) strictly after a 204 release of
//!   `a` was received.
//! - [`Check::ExclusiveNotAlone`] and [`Check::OverLimit`], on keys held shared (`holds`):
//!   an exclusive hold live beside any other hold of its key; more shared holds live at once
//!   than the key's limit. Such keys get these instead of [`Check::TwoHolders`], since
//!   shared holds live side by side by design; every other check covers every key.

use std::collections::{BTreeMap, HashMap, HashSet};

use lock_api::LockMode;

use crate::history::{AcquireOutcome, Event, LedgerVerdict, Window};

mod holds;

/// Which claim a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// Two live holders of one key.
    TwoHolders,
    /// The ledger accepted a stale token.
    StaleLedgerWrite,
    /// Tokens per key not strictly increasing (or reused).
    TokenOrder,
    /// An acquire outlived its budget.
    AcquireBudget,
    /// FENCED_OUT while the SDK said the handle was valid.
    FencedNotLost,
    /// A fenced-out write was retried.
    RetriedAfterFence,
    /// An exclusive hold live beside another hold of its key.
    ExclusiveNotAlone,
    /// More shared holds of a key live at once than its limit.
    OverLimit,
    /// A token seen live after its release was acknowledged (204).
    ReleasedStillLive,
}

/// One broken claim, with a human-readable account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The claim.
    pub check: Check,
    /// What happened, with times and tokens.
    pub message: String,
}

/// Checker settings.
#[derive(Debug, Clone, Copy)]
pub struct CheckerConfig {
    /// Slack added to every acquire budget for OS scheduling of many processes on few cores
    /// (ASSUMPTION: 500 ms; the client core itself is held to the exact budget in the seeded
    /// simulation).
    pub budget_tolerance_micros: u64,
}

impl Default for CheckerConfig {
    fn default() -> Self {
        CheckerConfig {
            budget_tolerance_micros: 500_000,
        }
    }
}

/// What the history contained and what broke.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Acquire calls.
    pub acquires: usize,
    /// Grants.
    pub grants: usize,
    /// Of which shared.
    pub shared_grants: usize,
    /// Successful releases.
    pub releases: usize,
    /// Ledger writes (accepted, fenced out, indeterminate).
    pub ledger_writes: [usize; 3],
    /// L7 samples.
    pub samples: usize,
    /// Readers' ledger reads.
    pub ledger_reads: usize,
    /// Per key, the most holders one L7 answer listed.
    pub most_holders: BTreeMap<String, usize>,
    /// Faults by kind.
    pub faults: BTreeMap<String, usize>,
    /// Largest `acquire duration - budget - pauses` seen, in microseconds (may be negative).
    pub worst_budget_overrun_micros: i64,
    /// Every violation found.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Total operations (acquires, releases, ledger writes, samples).
    pub fn operations(&self) -> usize {
        self.acquires
            + self.releases
            + self.ledger_writes.iter().sum::<usize>()
            + self.samples
            + self.ledger_reads
    }

    /// Number of violations of `check`.
    pub fn count(&self, check: Check) -> usize {
        self.violations.iter().filter(|v| v.check == check).count()
    }

    fn violate(&mut self, check: Check, message: String) {
        self.violations.push(Violation { check, message });
    }
}

/// Runs every check over `events` (any order; merged from all processes).
pub fn check(events: &[Event], config: CheckerConfig) -> Report {
    let mut report = Report::default();
    count(events, &mut report);
    let shared = holds::shared_keys(events);
    check_two_holders(events, &shared, &mut report);
    holds::check_holds(events, &shared, &mut report);
    check_ledger(events, &mut report);
    check_token_order(events, &shared, &mut report);
    check_budgets(events, config, &mut report);
    check_releases(events, &mut report);
    report
}

/// [`Check::ReleasedStillLive`] on every key: a 204 release ends its hold for good, so no
/// observation sent after the 204 was received may show the token live.
fn check_releases(events: &[Event], report: &mut Report) {
    // When each (key, token) was first certainly released.
    let mut released: HashMap<(&str, u64), u64> = HashMap::new();
    for e in events {
        if let Event::Release {
            key,
            token,
            window,
            ok: true,
            ..
        } = e
        {
            let at = released.entry((key, *token)).or_insert(window.recv);
            *at = (*at).min(window.recv);
        }
    }
    for e in events {
        let (key, tokens, window, what): (&str, Vec<u64>, Window, &str) = match e {
            Event::L7Sample {
                key,
                token,
                holders,
                window,
                ..
            } => {
                let mut live = holders.clone();
                live.extend(*token);
                (key, live, *window, "listed by L7")
            }
            Event::Release {
                key,
                token,
                window,
                ok: true,
                ..
            } => (key, vec![*token], *window, "released (204) again"),
            _ => continue,
        };
        for token in tokens {
            if let Some(at) = released.get(&(key, token)).filter(|at| window.sent > **at) {
                report.violate(
                    Check::ReleasedStillLive,
                    format!(
                        "key {key}: token {token} {what} in [{}, {}] after its release was acknowledged at {at}",
                        window.sent, window.recv
                    ),
                );
            }
        }
    }
}

fn count(events: &[Event], report: &mut Report) {
    for e in events {
        match e {
            Event::AcquireStart { .. } => report.acquires += 1,
            Event::Grant { mode, .. } => {
                report.grants += 1;
                if *mode == LockMode::Shared {
                    report.shared_grants += 1;
                }
            }
            Event::Release { ok: true, .. } => report.releases += 1,
            Event::LedgerWrite { verdict, .. } => {
                report.ledger_writes[match verdict {
                    LedgerVerdict::Accepted => 0,
                    LedgerVerdict::FencedOut => 1,
                    LedgerVerdict::Indeterminate => 2,
                }] += 1
            }
            Event::L7Sample {
                key,
                token,
                holders,
                ..
            } => {
                report.samples += 1;
                let listed = holders.len().max(usize::from(token.is_some()));
                let most = report.most_holders.entry(key.clone()).or_default();
                *most = (*most).max(listed);
            }
            Event::LedgerRead { .. } => report.ledger_reads += 1,
            Event::Fault { kind, .. } => *report.faults.entry(kind.clone()).or_default() += 1,
            _ => {}
        }
    }
}

/// Per key and token: the earliest time it was certainly granted, and every window in
/// which it was certainly live.
#[derive(Default)]
struct TokenFacts {
    granted_by: Option<u64>,
    live: Vec<Window>,
}

fn fact<'a, 'm>(
    keys: &'m mut HashMap<&'a str, BTreeMap<u64, TokenFacts>>,
    key: &'a str,
    token: u64,
) -> &'m mut TokenFacts {
    keys.entry(key).or_default().entry(token).or_default()
}

/// [`Check::TwoHolders`] on every key never held shared.
fn check_two_holders(events: &[Event], shared: &HashSet<&str>, report: &mut Report) {
    let mut keys: HashMap<&str, BTreeMap<u64, TokenFacts>> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| !event_key(e).is_some_and(|k| shared.contains(k)))
    {
        match e {
            Event::Grant {
                key, token, window, ..
            } => {
                let f = fact(&mut keys, key, *token);
                f.granted_by = Some(f.granted_by.map_or(window.recv, |g| g.min(window.recv)));
            }
            Event::L7Sample {
                key,
                token: Some(token),
                window,
                ..
            } => {
                let f = fact(&mut keys, key, *token);
                f.granted_by = Some(f.granted_by.map_or(window.recv, |g| g.min(window.recv)));
                f.live.push(*window);
            }
            Event::Release {
                key,
                token,
                window,
                ok: true,
                ..
            } => fact(&mut keys, key, *token).live.push(*window),
            _ => {}
        }
    }
    for (key, tokens) in &keys {
        // Walk tokens from the highest down, keeping the earliest certain grant of any
        // higher token and which token that was.
        let mut earliest_higher: Option<(u64, u64)> = None;
        for (&token, facts) in tokens.iter().rev() {
            if let Some((b, granted)) = earliest_higher {
                if let Some(w) = facts.live.iter().find(|w| w.sent > granted) {
                    report.violate(
                        Check::TwoHolders,
                        format!(
                            "key {key}: token {token} was live in [{}, {}] after token {b} was granted by {granted}",
                            w.sent, w.recv
                        ),
                    );
                }
            }
            if let Some(g) = facts.granted_by {
                if earliest_higher.is_none_or(|(_, e)| g < e) {
                    earliest_higher = Some((token, g));
                }
            }
        }
    }
}

/// The lock key an event of the two-holder check is about.
fn event_key(e: &Event) -> Option<&str> {
    match e {
        Event::Grant { key, .. } | Event::L7Sample { key, .. } | Event::Release { key, .. } => {
            Some(key)
        }
        _ => None,
    }
}

/// One ledger write of the history, borrowed.
struct LedgerWrite<'a> {
    proc: &'a str,
    key: &'a str,
    token: u64,
    window: Window,
    verdict: LedgerVerdict,
    lost_after: bool,
}

fn ledger_writes(events: &[Event]) -> impl Iterator<Item = LedgerWrite<'_>> {
    events.iter().filter_map(|e| match e {
        Event::LedgerWrite {
            proc,
            key,
            token,
            window,
            verdict,
            lost_after,
        } => Some(LedgerWrite {
            proc,
            key,
            token: *token,
            window: *window,
            verdict: *verdict,
            lost_after: *lost_after,
        }),
        _ => None,
    })
}

fn check_ledger(events: &[Event], report: &mut Report) {
    // Accepted writes per key, sorted by the time they were certainly done.
    let mut accepted: HashMap<&str, Vec<(u64, Window)>> = HashMap::new();
    let mut fenced: HashMap<(&str, &str, u64), u64> = HashMap::new();
    for w in ledger_writes(events) {
        let LedgerWrite {
            proc, key, token, ..
        } = w;
        match w.verdict {
            LedgerVerdict::Accepted => accepted.entry(key).or_default().push((token, w.window)),
            LedgerVerdict::FencedOut => {
                if !w.lost_after {
                    report.violate(
                        Check::FencedNotLost,
                        format!("{proc}: key {key} token {token} FENCED_OUT at {} but the SDK handle was not lost", w.window.recv),
                    );
                }
                fenced.entry((proc, key, token)).or_insert(w.window.recv);
            }
            LedgerVerdict::Indeterminate => {}
        }
    }
    for w in ledger_writes(events) {
        let (proc, key, token, sent) = (w.proc, w.key, w.token, w.window.sent);
        if let Some(at) = fenced.get(&(proc, key, token)) {
            if sent > *at {
                report.violate(
                    Check::RetriedAfterFence,
                    format!("{proc}: key {key} token {token} written again at {sent} after FENCED_OUT at {at}"),
                );
            }
        }
    }
    for (key, writes) in &mut accepted {
        writes.sort_by_key(|(_, w)| w.recv);
        let mut highest_done: Option<(u64, u64)> = None; // (token, recv) certainly accepted
        let mut i = 0;
        let by_sent = {
            let mut v = writes.clone();
            v.sort_by_key(|(_, w)| w.sent);
            v
        };
        for (token, w) in by_sent {
            while i < writes.len() && writes[i].1.recv < w.sent {
                if highest_done.is_none_or(|(t, _)| writes[i].0 > t) {
                    highest_done = Some((writes[i].0, writes[i].1.recv));
                }
                i += 1;
            }
            if let Some((high, at)) = highest_done {
                if token < high {
                    report.violate(
                        Check::StaleLedgerWrite,
                        format!("key {key}: token {token} accepted in [{}, {}] after token {high} was accepted by {at}", w.sent, w.recv),
                    );
                }
            }
        }
    }
    for e in events {
        if let Event::LedgerSnapshot { key, tokens } = e {
            if let Some(pair) = tokens.windows(2).find(|p| p[1] < p[0]) {
                report.violate(
                    Check::StaleLedgerWrite,
                    format!(
                        "key {key}: ledger content has token {} after {}",
                        pair[1], pair[0]
                    ),
                );
            }
        }
    }
}

/// For each grant of a key held shared, by `(process, key, acquire start)`: when the hold may
/// first have been asked for. An acquire that ended without a grant (its L4's answer lost to
/// a timeout or a server kill, or its budget run out) may still have created a hold, and
/// L4 is idempotent per session: the session's next acquire of the key is answered with that
/// very hold, whose token was issued before the grants other readers received meanwhile.
/// So a grant is dated from the first of the unanswered acquires of its key right before it.
/// (On a key held exclusively nobody else is granted meanwhile, and the re-grant rule of
/// [`Check::TokenOrder`] covers it.)
fn first_asks<'a>(
    events: &'a [Event],
    shared: &HashSet<&str>,
) -> HashMap<(&'a str, &'a str, u64), u64> {
    let mut asks = HashMap::new();
    let mut started: HashMap<&str, u64> = HashMap::new();
    let mut unanswered_since: HashMap<(&str, &str), u64> = HashMap::new();
    // Each process's own events are in its order in the merged history.
    for e in events {
        match e {
            Event::AcquireStart { proc, at, .. } => {
                started.insert(proc, *at);
            }
            Event::AcquireEnd {
                proc, key, outcome, ..
            } if shared.contains(key.as_str()) => {
                let Some(&start) = started.get(proc.as_str()) else {
                    continue;
                };
                let since = (proc.as_str(), key.as_str());
                if let AcquireOutcome::Granted { .. } = outcome {
                    let first = unanswered_since.remove(&since).unwrap_or(start);
                    asks.insert((proc.as_str(), key.as_str(), start), first);
                } else {
                    unanswered_since.entry(since).or_insert(start);
                }
            }
            _ => {}
        }
    }
    asks
}

fn check_token_order(events: &[Event], shared: &HashSet<&str>, report: &mut Report) {
    let asks = first_asks(events, shared);
    let mut grants: HashMap<&str, Vec<(u64, &str, Window)>> = HashMap::new();
    // Successful (204) releases per (key, token): when the token certainly died.
    let mut released: HashMap<(&str, u64), u64> = HashMap::new();
    for e in events {
        match e {
            Event::Grant {
                proc,
                key,
                token,
                session,
                window,
                ..
            } => {
                let sent = asks
                    .get(&(proc.as_str(), key.as_str(), window.sent))
                    .copied()
                    .unwrap_or(window.sent);
                let window = Window { sent, ..*window };
                grants
                    .entry(key)
                    .or_default()
                    .push((*token, session, window))
            }
            Event::Release {
                key,
                token,
                window,
                ok: true,
                ..
            } => {
                let at = released.entry((key, *token)).or_insert(window.recv);
                *at = (*at).min(window.recv);
            }
            _ => {}
        }
    }
    for (key, list) in &mut grants {
        let mut owner: HashMap<u64, &str> = HashMap::new();
        for (token, session, _) in list.iter() {
            if let Some(other) = owner.insert(*token, session) {
                if other != *session {
                    report.violate(
                        Check::TokenOrder,
                        format!(
                            "key {key}: token {token} granted to sessions {other} and {session}"
                        ),
                    );
                }
            }
        }
        let mut by_recv = list.clone();
        by_recv.sort_by_key(|(_, _, w)| w.recv);
        // Each token's first grant received: its session and when.
        let mut first_received: HashMap<u64, (&str, u64)> = HashMap::new();
        for (token, session, w) in by_recv.iter().rev() {
            first_received.insert(*token, (session, w.recv));
        }
        list.sort_by_key(|(_, _, w)| w.sent);
        let mut i = 0;
        let mut highest: Option<(u64, &str, u64)> = None;
        for (token, session, w) in list.iter() {
            while i < by_recv.len() && by_recv[i].2.recv < w.sent {
                if highest.is_none_or(|(t, _, _)| by_recv[i].0 > t) {
                    highest = Some((by_recv[i].0, by_recv[i].1, by_recv[i].2.recv));
                }
                i += 1;
            }
            let Some((high, high_session, at)) = highest else {
                continue;
            };
            // L4 is idempotent per session: a session that still holds the key (e.g. its
            // release was lost to a server kill) gets the same token again. That is only
            // legal while the token has not certainly died by a 204 release.
            let regrant = *token == high
                && *session == high_session
                && released
                    .get(&(*key, high))
                    .is_none_or(|died| *died > w.sent);
            // On a key held shared, others may be granted beside the session's hold
            // meanwhile, so its re-grant need not be the highest token: it is the session's
            // own earlier grant of the key, not certainly released before this request.
            let own_regrant = shared.contains(key)
                && first_received
                    .get(token)
                    .is_some_and(|(s, at)| s == session && *at < w.sent)
                && released
                    .get(&(*key, *token))
                    .is_none_or(|died| *died > w.sent);
            if *token <= high && !regrant && !own_regrant {
                report.violate(
                    Check::TokenOrder,
                    format!("key {key}: token {token} granted in [{}, {}] after token {high} was granted by {at}", w.sent, w.recv),
                );
            }
        }
    }
}

fn check_budgets(events: &[Event], config: CheckerConfig, report: &mut Report) {
    let mut pauses: HashMap<&str, Vec<Window>> = HashMap::new();
    for e in events {
        if let Event::Fault {
            kind,
            target,
            window,
        } = e
        {
            if kind == "pause" {
                pauses.entry(target).or_default().push(*window);
            }
        }
    }
    let paused = |proc: &str, from: u64, to: u64| -> u64 {
        pauses.get(proc).map_or(0, |ws| {
            ws.iter()
                .map(|w| w.recv.min(to).saturating_sub(w.sent.max(from)))
                .sum()
        })
    };
    // Each process is sequential: its starts and ends alternate in its own order.
    let mut open: HashMap<&str, (&str, u64, u64)> = HashMap::new();
    report.worst_budget_overrun_micros = i64::MIN;
    for e in events {
        match e {
            Event::AcquireStart {
                proc,
                key,
                at,
                budget_ms,
            } => {
                if let Some((k, start, _)) = open.insert(proc, (key, *at, *budget_ms)) {
                    report.violate(
                        Check::AcquireBudget,
                        format!("{proc}: acquire of {k} started at {start} never returned"),
                    );
                }
            }
            Event::AcquireEnd {
                proc, at, outcome, ..
            } => {
                let Some((key, start, budget_ms)) = open.remove(proc.as_str()) else {
                    continue;
                };
                let took = at.saturating_sub(start);
                let allowed = budget_ms * 1_000 + paused(proc, start, *at);
                let overrun = took as i64 - allowed as i64;
                report.worst_budget_overrun_micros =
                    report.worst_budget_overrun_micros.max(overrun);
                if took > allowed + config.budget_tolerance_micros {
                    report.violate(
                        Check::AcquireBudget,
                        format!("{proc}: acquire of {key} took {took} µs, budget {budget_ms} ms (+{} µs paused), outcome {outcome:?}", allowed - budget_ms * 1_000),
                    );
                }
            }
            _ => {}
        }
    }
    for (proc, (key, start, _)) in open {
        report.violate(
            Check::AcquireBudget,
            format!("{proc}: acquire of {key} started at {start} never returned"),
        );
    }
    if report.worst_budget_overrun_micros == i64::MIN {
        report.worst_budget_overrun_micros = 0;
    }
}

#[cfg(test)]
mod tests;
