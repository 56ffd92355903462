//! Hand-made histories: a correct one passes, and each bad one trips exactly its check, so
//! every check is shown able to fail.

use super::*;
use crate::history::AcquireOutcome;

fn w(sent: u64, recv: u64) -> Window {
    Window { sent, recv }
}

fn grant(proc: &str, key: &str, token: u64, sent: u64, recv: u64) -> Event {
    Event::Grant {
        proc: proc.into(),
        session: format!("s-{proc}"),
        key: key.into(),
        token,
        window: w(sent, recv),
        mode: LockMode::Exclusive,
        limit: None,
    }
}

fn sample(key: &str, token: Option<u64>, sent: u64, recv: u64) -> Event {
    Event::L7Sample {
        proc: "sampler".into(),
        key: key.into(),
        token,
        window: w(sent, recv),
        holders: token.into_iter().collect(),
        mode: token.map(|_| LockMode::Exclusive),
        limit: None,
    }
}

fn release(proc: &str, key: &str, token: u64, sent: u64, recv: u64) -> Event {
    Event::Release {
        proc: proc.into(),
        key: key.into(),
        token,
        window: w(sent, recv),
        ok: true,
    }
}

fn write(proc: &str, key: &str, token: u64, sent: u64, recv: u64, verdict: LedgerVerdict) -> Event {
    Event::LedgerWrite {
        proc: proc.into(),
        key: key.into(),
        token,
        window: w(sent, recv),
        verdict,
        lost_after: verdict == LedgerVerdict::FencedOut,
    }
}

fn acquire(proc: &str, key: &str, start: u64, end: u64, budget_ms: u64) -> [Event; 2] {
    [
        Event::AcquireStart {
            proc: proc.into(),
            key: key.into(),
            at: start,
            budget_ms,
        },
        Event::AcquireEnd {
            proc: proc.into(),
            key: key.into(),
            at: end,
            outcome: AcquireOutcome::NotGranted,
        },
    ]
}

/// The paused worker (docs/fencing.md) done right: c1 holds token 1, is paused past its TTL,
/// c2 takes token 2 and writes; c1 resumes, its write is fenced out and its handle reported
/// lost.
fn good_history() -> Vec<Event> {
    let mut h = vec![];
    h.extend(acquire("c1", "k", 0, 10, 1_000));
    h.push(grant("c1", "k", 1, 0, 10));
    h.push(sample("k", Some(1), 20, 30));
    h.push(write("c1", "k", 1, 40, 50, LedgerVerdict::Accepted));
    h.push(Event::Fault {
        kind: "pause".into(),
        target: "c1".into(),
        window: w(60, 5_000_000),
    });
    h.extend(acquire("c2", "k", 100, 3_000_000, 5_000));
    h.push(grant("c2", "k", 2, 2_900_000, 3_000_000));
    h.push(sample("k", Some(2), 3_100_000, 3_100_100));
    h.push(write(
        "c2",
        "k",
        2,
        3_200_000,
        3_200_100,
        LedgerVerdict::Accepted,
    ));
    h.push(release("c2", "k", 2, 3_300_000, 3_300_100));
    h.push(sample("k", None, 3_400_000, 3_400_100));
    h.push(write(
        "c1",
        "k",
        1,
        5_000_100,
        5_000_200,
        LedgerVerdict::FencedOut,
    ));
    h.push(Event::LedgerSnapshot {
        key: "k".into(),
        tokens: vec![1, 2],
    });
    h
}

fn only(report: &Report, check: Check) {
    assert!(report.count(check) > 0, "{check:?} not caught: {report:?}");
    assert!(
        report.violations.iter().all(|v| v.check == check),
        "unexpected other violations: {:?}",
        report.violations
    );
}

#[test]
fn a_correct_history_passes_and_is_counted() {
    let report = check(&good_history(), CheckerConfig::default());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.acquires, 2);
    assert_eq!(report.grants, 2);
    assert_eq!(report.ledger_writes, [2, 1, 0]);
    assert_eq!(report.faults.get("pause"), Some(&1));
}

#[test]
fn an_old_holder_seen_live_after_a_newer_grant_is_two_holders() {
    let mut h = good_history();
    // The sampler still sees token 1 after token 2 was certainly granted.
    h.push(sample("k", Some(1), 3_050_000, 3_050_100));
    only(&check(&h, CheckerConfig::default()), Check::TwoHolders);
}

#[test]
fn an_old_holder_releasing_successfully_after_a_newer_grant_is_two_holders() {
    let mut h = good_history();
    h.push(release("c1", "k", 1, 5_000_300, 5_000_400));
    only(&check(&h, CheckerConfig::default()), Check::TwoHolders);
}

#[test]
fn overlapping_windows_are_not_a_violation() {
    let mut h = good_history();
    // Sampled while token 2's grant was still in flight: could have been before it.
    h.push(sample("k", Some(1), 2_950_000, 3_050_000));
    assert!(check(&h, CheckerConfig::default()).violations.is_empty());
}

#[test]
fn a_stale_token_accepted_by_the_ledger_is_caught() {
    let mut h = good_history();
    h.push(write(
        "c3",
        "k",
        1,
        4_000_000,
        4_000_100,
        LedgerVerdict::Accepted,
    ));
    only(
        &check(&h, CheckerConfig::default()),
        Check::StaleLedgerWrite,
    );
}

#[test]
fn a_ledger_snapshot_out_of_order_is_caught() {
    let mut h = good_history();
    h.push(Event::LedgerSnapshot {
        key: "k".into(),
        tokens: vec![1, 3, 2],
    });
    only(
        &check(&h, CheckerConfig::default()),
        Check::StaleLedgerWrite,
    );
}

#[test]
fn a_token_that_does_not_increase_is_caught() {
    let mut h = good_history();
    h.push(grant("c3", "k", 2, 4_000_000, 4_000_100));
    let report = check(&h, CheckerConfig::default());
    assert!(report.count(Check::TokenOrder) >= 1, "{report:?}");
    assert!(report
        .violations
        .iter()
        .any(|v| v.message.contains("granted to sessions")));
}

#[test]
fn the_same_session_regranted_its_unreleased_token_is_legal_but_not_after_a_release() {
    let mut h = good_history();
    // c2's release was lost (server killed): L4 idempotence hands the same token back.
    h.retain(|e| !matches!(e, Event::Release { .. }));
    h.push(grant("c2", "k", 2, 3_050_000, 3_060_000));
    let report = check(&h, CheckerConfig::default());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // After a 204 release the token is dead: granting it again is a violation.
    let mut h = good_history();
    h.push(grant("c2", "k", 2, 3_350_000, 3_360_000));
    assert!(check(&h, CheckerConfig::default()).count(Check::TokenOrder) > 0);
}

#[test]
fn a_lower_token_granted_later_is_caught() {
    let mut h = good_history();
    h.push(grant("c3", "other", 9, 0, 10));
    h.push(grant("c4", "other", 4, 20, 30));
    only(&check(&h, CheckerConfig::default()), Check::TokenOrder);
}

#[test]
fn an_acquire_over_budget_is_caught_but_pauses_are_excused() {
    let mut h = good_history();
    // 1 s budget, took 3 s, not paused.
    h.extend(acquire("c5", "k", 10_000_000, 13_000_000, 1_000));
    only(&check(&h, CheckerConfig::default()), Check::AcquireBudget);

    let mut h = good_history();
    h.extend(acquire("c5", "k", 10_000_000, 13_000_000, 1_000));
    h.push(Event::Fault {
        kind: "pause".into(),
        target: "c5".into(),
        window: w(10_100_000, 12_100_000),
    });
    assert!(check(&h, CheckerConfig::default()).violations.is_empty());
}

#[test]
fn an_acquire_that_never_returns_is_caught() {
    let mut h = good_history();
    h.push(Event::AcquireStart {
        proc: "c6".into(),
        key: "k".into(),
        at: 1,
        budget_ms: 10,
    });
    only(&check(&h, CheckerConfig::default()), Check::AcquireBudget);
}

#[test]
fn fenced_out_with_a_valid_handle_is_caught() {
    let mut h = good_history();
    h.push(Event::LedgerWrite {
        proc: "c7".into(),
        key: "k".into(),
        token: 1,
        window: w(6_000_000, 6_000_100),
        verdict: LedgerVerdict::FencedOut,
        lost_after: false,
    });
    only(&check(&h, CheckerConfig::default()), Check::FencedNotLost);
}

#[test]
fn a_fenced_write_retried_is_caught() {
    let mut h = good_history();
    h.push(write(
        "c1",
        "k",
        1,
        5_100_000,
        5_100_100,
        LedgerVerdict::FencedOut,
    ));
    only(
        &check(&h, CheckerConfig::default()),
        Check::RetriedAfterFence,
    );
}

#[test]
fn a_token_seen_live_after_its_acknowledged_release_is_caught() {
    let mut h = good_history();
    // Token 2 was released (204 received at 3,300,100); an L7 sent later still lists it.
    h.push(sample("k", Some(2), 3_500_000, 3_500_100));
    only(
        &check(&h, CheckerConfig::default()),
        Check::ReleasedStillLive,
    );
    let mut h = good_history();
    // A second 204 for the same token: the first did not release it.
    h.push(release("c2", "k", 2, 3_600_000, 3_600_100));
    only(
        &check(&h, CheckerConfig::default()),
        Check::ReleasedStillLive,
    );
    let mut h = good_history();
    // Sampled while the release was in flight: could have been before it.
    h.push(sample("k", Some(2), 3_300_050, 3_300_200));
    assert!(check(&h, CheckerConfig::default()).violations.is_empty());
}
