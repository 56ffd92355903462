//! The short chaos run of the default suite (well under 3 minutes): a real lock-server, 15
//! contender processes using the native SDK — holders of exclusive keys, readers and writers
//! of a read-write key, holders of a semaphore of 2 permits — SIGSTOP/SIGCONT of holders
//! past their TTL and kill -9 restarts of the server; the checker must find 0 violations,
//! the faults must really have been injected and every role must have held its key. The same
//! on the etcd backend over a 3-member etcd cluster, with SIGKILLs of the etcd leader; and
//! contenders queued in the server's wait queue through kill -9 restarts. The long run is
//! the `chaos` command (docs/RELIABILITY.md).

use std::sync::Mutex;
use std::time::Duration;

use lock_api::LockMode;
use lock_chaos::history::{read_history, AcquireOutcome, Event, LedgerVerdict};
use lock_chaos::run::{run, ChaosConfig, ChaosOutcome, Mix, RW_KEY, SEMAPHORE_KEY};

/// The runs take turns: 20 processes on 2 cores at once would test the machine, not the code.
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn a_short_chaos_run_has_no_violations() {
    let _turn = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::Builder::new()
        .prefix("chaos-short-")
        .tempdir()
        .expect("temp dir");
    let mut config = ChaosConfig::long(dir.path().to_owned(), 42);
    config.contenders = 6;
    config.keys = 2;
    config.mix = Mix {
        readers: 3,
        writers: 2,
        semaphore_holders: 4,
        permits: 2,
    };
    config.duration = Duration::from_secs(40);
    config.pauses = 5;
    config.server_kills = 3;
    let outcome = run(&config).expect("chaos run");
    assert_every_role_held(&outcome);
    assert_no_violations(&outcome, dir);
    let r = &outcome.report;
    assert_eq!(
        r.faults.get("pause"),
        Some(&5),
        "every pause must be injected"
    );
    assert_eq!(
        r.faults.get("server_kill"),
        Some(&3),
        "every kill must be injected"
    );
    assert!(
        r.grants > 50,
        "the contenders must actually get locks: {}",
        r.grants
    );
    assert!(r.ledger_writes[0] > 50, "the ledger must see writes");
}

#[test]
fn a_short_chaos_run_on_etcd_with_leader_kills_has_no_violations() {
    let _turn = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::Builder::new()
        .prefix("chaos-short-etcd-")
        .tempdir()
        .expect("temp dir");
    let mut config = ChaosConfig::long(dir.path().to_owned(), 43);
    config.contenders = 4;
    config.keys = 1;
    config.mix = Mix {
        readers: 2,
        writers: 1,
        semaphore_holders: 3,
        permits: 2,
    };
    config.duration = Duration::from_secs(40);
    config.pauses = 3;
    config.server_kills = 1;
    config.etcd_members = 3;
    config.etcd_kills = 2;
    let outcome = run(&config).expect("chaos run");
    assert_every_role_held(&outcome);
    assert_no_violations(&outcome, dir);
    let r = &outcome.report;
    assert_eq!(r.faults.get("etcd_kill"), Some(&2), "{:?}", r.faults);
    assert_eq!(r.faults.get("server_kill"), Some(&1), "{:?}", r.faults);
    assert!(
        r.grants > 20,
        "the contenders must actually get locks: {}",
        r.grants
    );
    assert!(r.ledger_writes[0] > 20, "the ledger must see writes");
}

/// Contenders wait in the server's queue (`waitMillis` 1 s) for one key while lock-server is
/// killed with -9 three times: the queue is lost with the process (tickets are not durable),
/// so the waiters' requests fail and they re-send to the restarted server. The checker finds
/// no two holders and tokens in order, and every kill is followed by grants: the waiters were
/// served again.
#[test]
fn queued_waiters_survive_kill_9_and_are_served_again() {
    let _turn = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::Builder::new()
        .prefix("chaos-short-queue-")
        .tempdir()
        .expect("temp dir");
    let mut config = ChaosConfig::long(dir.path().to_owned(), 44);
    config.contenders = 6;
    config.keys = 1;
    config.duration = Duration::from_secs(20);
    config.pauses = 2;
    config.server_kills = 3;
    config.wait = Duration::from_millis(1_000);
    let outcome = run(&config).expect("chaos run");
    let events = read_history(&outcome.history).expect("history");
    assert_no_violations(&outcome, dir);
    let r = &outcome.report;
    assert_eq!(r.faults.get("server_kill"), Some(&3), "{:?}", r.faults);
    let kills: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { kind, window, .. } if kind == "server_kill" => Some(window.recv),
            _ => None,
        })
        .collect();
    let grants: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::AcquireEnd {
                at,
                outcome: AcquireOutcome::Granted { .. },
                ..
            } => Some(*at),
            _ => None,
        })
        .collect();
    for kill in &kills {
        let after = grants.iter().filter(|at| **at > *kill).count();
        assert!(
            after > 0,
            "no grant after the kill at {kill}: the queue never recovered"
        );
    }
    assert!(r.grants > 20, "the waiters must get the lock: {}", r.grants);
}

/// Every role of the mix was granted its hold in its mode and did its part (writers and
/// semaphore holders wrote, readers read the ledger), and shared holds really stood side by
/// side: some L7 answer listed two readers at once, and two permits at once.
fn assert_every_role_held(outcome: &ChaosOutcome) {
    let events = read_history(&outcome.history).expect("history");
    let grants = |prefix: &str, mode: LockMode| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Grant { proc, mode: m, .. } if proc.starts_with(prefix) && *m == mode))
            .count()
    };
    let writes = |prefix: &str| {
        events
            .iter()
            .filter(|e| matches!(e, Event::LedgerWrite { proc, verdict: LedgerVerdict::Accepted, .. } if proc.starts_with(prefix)))
            .count()
    };
    let r = &outcome.report;
    for (role, prefix, mode) in [
        ("writers", "w", LockMode::Exclusive),
        ("readers", "r", LockMode::Shared),
        ("semaphore holders", "s", LockMode::Shared),
    ] {
        assert!(
            grants(prefix, mode) > 5,
            "{role} were hardly granted: {}",
            grants(prefix, mode)
        );
    }
    assert!(writes("w") > 5, "writers' ledger writes: {}", writes("w"));
    assert!(
        writes("s") > 5,
        "semaphore holders' ledger writes: {}",
        writes("s")
    );
    assert!(
        r.ledger_reads > 5,
        "readers' ledger reads: {}",
        r.ledger_reads
    );
    for key in [RW_KEY, SEMAPHORE_KEY] {
        let most = r.most_holders.get(key).copied().unwrap_or(0);
        assert!(
            most >= 2,
            "{key}: never two shared holders at once ({most})"
        );
    }
}

fn assert_no_violations(outcome: &ChaosOutcome, dir: tempfile::TempDir) {
    let r = &outcome.report;
    println!(
        "operations {}, grants {} ({} shared), ledger {:?}, ledger reads {}, most holders {:?}, faults {:?}, violations {}",
        r.operations(),
        r.grants,
        r.shared_grants,
        r.ledger_writes,
        r.ledger_reads,
        r.most_holders,
        r.faults,
        r.violations.len()
    );
    if !r.violations.is_empty() {
        panic!(
            "violations (history kept in {}): {:#?}",
            dir.keep().display(),
            r.violations
        );
    }
}
