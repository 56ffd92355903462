//! The short partition run of the default suite (about 80 s): three etcd members and two
//! lock-server replicas, each in its own network namespace, 12 contender processes through
//! both replicas, and a nemesis that cuts an etcd follower from the other members, cuts a
//! replica from etcd (its clients still reach it), isolates the etcd leader, and SIGSTOPs
//! the leader or a replica, with heals in between; holders are paused past their TTL
//! beside it. The checker must find 0 violations, every kind of fault must have been
//! injected, and both replicas' contenders must have been granted locks. Needs root and
//! `ip` (iproute2): without them the test fails and says so. The long run is the
//! `partition` command (docs/RELIABILITY.md, "Partitions").

use std::time::Duration;

use lock_chaos::partition::{run, Nemesis, PartitionConfig};

#[test]
fn a_short_partition_run_has_no_violations() {
    let dir = tempfile::Builder::new()
        .prefix("partition-short-")
        .tempdir()
        .expect("temp dir");
    let mut config = PartitionConfig::long(dir.path().to_owned(), 51);
    config.chaos.duration = Duration::from_secs(80);
    config.chaos.contenders = 6;
    config.chaos.keys = 2;
    config.chaos.pauses = 4;
    let outcome = run(&config).unwrap_or_else(|e| {
        panic!("partition run could not start (needs root, iproute2, etcd): {e}")
    });
    let r = &outcome.report;
    println!(
        "operations {}, acquires {}, grants {} ({} shared; per replica {:?}; during faults {}), ledger {:?}, L7 samples {}, worst overrun {} ms, faults {:?}, violations {}",
        r.operations(),
        r.acquires,
        r.grants,
        r.shared_grants,
        outcome.grants_per_replica,
        outcome.grants_during_faults,
        r.ledger_writes,
        r.samples,
        r.worst_budget_overrun_micros / 1_000,
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
    for kind in Nemesis::ALL {
        assert!(
            r.faults.get(kind.name()).is_some_and(|n| *n > 0),
            "{} never injected: {:?}",
            kind.name(),
            r.faults
        );
    }
    for (replica, grants) in outcome.grants_per_replica.iter().enumerate() {
        assert!(
            *grants > 10,
            "replica {replica}'s contenders were hardly granted: {grants}"
        );
    }
    assert!(
        outcome.grants_during_faults > 0,
        "no grant while a fault was in force"
    );
    assert!(r.ledger_writes[0] > 20, "the ledger must see writes");
}
