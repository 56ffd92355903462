//! The short chaos run of the default suite (well under 3 minutes): a real lock-server, 12
//! contender processes using the native SDK, SIGSTOP/SIGCONT of holders past their TTL and
//! kill -9 restarts of the server; the checker must find 0 violations, and the faults must
//! really have been injected. The long run is the `chaos` command (docs/RELIABILITY.md).

use std::time::Duration;

use lock_chaos::run::{run, ChaosConfig};

#[test]
fn a_short_chaos_run_has_no_violations() {
    let dir = tempfile::Builder::new()
        .prefix("chaos-short-")
        .tempdir()
        .expect("temp dir");
    let mut config = ChaosConfig::long(dir.path().to_owned(), 42);
    config.contenders = 12;
    config.keys = 3;
    config.duration = Duration::from_secs(40);
    config.pauses = 5;
    config.server_kills = 3;
    let outcome = run(&config).expect("chaos run");
    let r = &outcome.report;
    println!(
        "operations {}, grants {}, ledger {:?}, faults {:?}, violations {}",
        r.operations(),
        r.grants,
        r.ledger_writes,
        r.faults,
        r.violations.len()
    );
    assert!(
        r.violations.is_empty(),
        "violations (history kept in {}): {:#?}",
        dir.keep().display(),
        r.violations
    );
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
