//! Each scenario's outcome with its defaults, and what the settings change.

use super::script::{A, B};
use super::*;

/// A's write after B's, with A's lower token: fenced out, and accepted as stale unfenced.
fn assert_stale_write_by_a(outcome: &LabOutcome) {
    assert_eq!(outcome.fenced_out, 1, "{outcome:#?}");
    assert_eq!(outcome.corrupted, 1, "{outcome:#?}");
    let contenders: Vec<(u32, WriteOutcome)> = outcome
        .fenced
        .iter()
        .map(|w| (w.contender, w.outcome))
        .collect();
    assert_eq!(
        contenders,
        [(B, WriteOutcome::Accepted), (A, WriteOutcome::FencedOut)]
    );
    let unfenced: Vec<WriteOutcome> = outcome.unfenced.iter().map(|w| w.outcome).collect();
    assert_eq!(unfenced, [WriteOutcome::Accepted, WriteOutcome::Corrupted]);
    assert!(outcome.fenced[1].token < outcome.fenced[0].token);
}

#[test]
fn a_gc_pause_past_the_lease_is_fenced_out_and_corrupts_the_unfenced_ledger() {
    let settings = LabScenario::GcPause.default_settings();
    let outcome = run_lab(LabScenario::GcPause, &settings);
    assert_stale_write_by_a(&outcome);
    let fault_at = outcome.fault_at_ms.unwrap();
    let pause_end = fault_at + settings.fault_ms;
    // B got the key when A's lease ran out, during the pause.
    let lease_end = outcome.lease_end_ms.unwrap();
    assert!(lease_end < pause_end && outcome.b_granted_ms.unwrap() >= lease_end);
    // A learnt of the loss only when it woke, and wrote after the pause.
    assert_eq!(outcome.lost_at_ms, Some(pause_end));
    assert!(outcome.fenced[1].at_ms >= pause_end);
}

#[test]
fn a_partition_past_the_lease_is_fenced_out_and_corrupts_the_unfenced_ledger() {
    let settings = LabScenario::Partitioned.default_settings();
    let outcome = run_lab(LabScenario::Partitioned, &settings);
    assert_stale_write_by_a(&outcome);
    // A's process ran on: its SDK reported the loss during the partition, before its write.
    let heal = outcome.fault_at_ms.unwrap() + settings.fault_ms;
    assert!(outcome.lost_at_ms.unwrap() < heal, "{outcome:#?}");
    assert!(outcome.fenced[1].at_ms >= heal);
}

#[test]
fn honouring_the_signal_turns_the_stale_write_into_none() {
    for scenario in [LabScenario::GcPause, LabScenario::Partitioned] {
        let settings = LabSettings {
            honours_signal: true,
            ..scenario.default_settings()
        };
        let outcome = run_lab(scenario, &settings);
        assert_eq!(
            (outcome.fenced_out, outcome.corrupted),
            (0, 0),
            "{outcome:#?}"
        );
        assert!(outcome.fenced.iter().all(|w| w.contender == B));
        assert_eq!(outcome.fenced.len(), 1);
    }
}

#[test]
fn a_crashed_holder_frees_the_key_only_when_its_session_ttl_passes() {
    let settings = LabScenario::Crashed.default_settings();
    assert!(settings.session_ttl_ms < settings.lock_ttl_ms);
    let outcome = run_lab(LabScenario::Crashed, &settings);
    assert_eq!(
        (outcome.fenced_out, outcome.corrupted),
        (0, 0),
        "{outcome:#?}"
    );
    assert_eq!(outcome.fenced.len(), 1, "only B writes");
    assert_eq!(outcome.fenced[0].contender, B);
    // No L3 or L6 reached the server: the session lived on until its TTL passed without a
    // heartbeat (the last one came at most a heartbeat period, a third of it, before the
    // crash), and only its end freed the key, well before the lock's own TTL.
    let crash = outcome.fault_at_ms.unwrap();
    let lease_end = outcome.lease_end_ms.unwrap();
    assert!(
        lease_end >= crash + settings.session_ttl_ms * 2 / 3,
        "{outcome:#?}"
    );
    assert!(lease_end < crash + settings.lock_ttl_ms, "{outcome:#?}");
    assert!(outcome.b_granted_ms.unwrap() >= lease_end);
    assert_eq!(outcome.lost_at_ms, None, "a dead process reports nothing");
}

#[test]
fn a_revoked_holder_that_ignores_its_signal_is_fenced_out_and_one_that_honours_it_writes_nothing() {
    let settings = LabScenario::OperatorRevoke.default_settings();
    assert!(!settings.honours_signal);
    let outcome = run_lab(LabScenario::OperatorRevoke, &settings);
    assert_stale_write_by_a(&outcome);
    // The key passed at the revoke; A heard of it at a heartbeat, before its write.
    assert_eq!(outcome.lease_end_ms, outcome.fault_at_ms);
    assert!(outcome.lost_at_ms.unwrap() < outcome.fenced[1].at_ms);

    let honours = LabSettings {
        honours_signal: true,
        ..settings
    };
    let outcome = run_lab(LabScenario::OperatorRevoke, &honours);
    assert_eq!(
        (outcome.fenced_out, outcome.corrupted),
        (0, 0),
        "{outcome:#?}"
    );
    assert_eq!(outcome.fenced.len(), 1);
}

#[test]
fn a_short_pause_loses_nothing() {
    let settings = LabScenario::ShortPause.default_settings();
    let outcome = run_lab(LabScenario::ShortPause, &settings);
    assert_eq!(
        (outcome.fenced_out, outcome.corrupted),
        (0, 0),
        "{outcome:#?}"
    );
    assert_eq!(outcome.lost_at_ms, None);
    let writers: Vec<(u32, WriteOutcome)> = outcome
        .fenced
        .iter()
        .map(|w| (w.contender, w.outcome))
        .collect();
    assert_eq!(
        writers,
        [(A, WriteOutcome::Accepted), (B, WriteOutcome::Accepted)]
    );
    // A's write waited out the pause, and B got the key only at A's release.
    let pause_end = outcome.fault_at_ms.unwrap() + settings.fault_ms;
    assert!(outcome.fenced[0].at_ms >= pause_end);
    assert!(outcome.b_granted_ms.unwrap() >= outcome.lease_end_ms.unwrap());
}

#[test]
fn the_same_seed_gives_the_same_outcome_and_another_seed_may_not() {
    for scenario in LabScenario::all() {
        let settings = scenario.default_settings();
        assert_eq!(run_lab(scenario, &settings), run_lab(scenario, &settings));
    }
    // The seed is used: the network's delays move the writes.
    let times = |seed| {
        let settings = LabSettings {
            seed,
            ..LabScenario::ShortPause.default_settings()
        };
        let outcome = run_lab(LabScenario::ShortPause, &settings);
        outcome.fenced.iter().map(|w| w.at_ms).collect::<Vec<_>>()
    };
    assert!((2..20).any(|seed| times(seed) != times(1)));
}

#[test]
fn the_outcome_holds_across_seeds() {
    for seed in 1..=20 {
        for scenario in LabScenario::all() {
            let settings = LabSettings {
                seed,
                ..scenario.default_settings()
            };
            let outcome = run_lab(scenario, &settings);
            let stale = match scenario {
                LabScenario::GcPause | LabScenario::Partitioned | LabScenario::OperatorRevoke => 1,
                LabScenario::Crashed | LabScenario::ShortPause => 0,
            };
            let got = (outcome.fenced_out, outcome.corrupted);
            assert_eq!(got, (stale, stale), "{} seed {seed}", scenario.slug());
        }
    }
}

#[test]
fn slugs_name_each_scenario_once_and_every_one_is_explained() {
    for scenario in LabScenario::all() {
        assert_eq!(LabScenario::from_slug(scenario.slug()), Some(scenario));
        assert!(!scenario.title().is_empty());
        assert!(scenario.explanation().len() > 200, "{}", scenario.slug());
    }
    assert_eq!(LabScenario::from_slug("gc"), None);
    let slugs: Vec<&str> = LabScenario::all().iter().map(|s| s.slug()).collect();
    assert_eq!(
        slugs,
        [
            "gc-pause",
            "partitioned",
            "crashed",
            "revoke",
            "short-pause"
        ]
    );
}

#[test]
fn settings_the_sdk_refuses_give_no_grant_and_no_write() {
    let settings = LabSettings {
        lock_ttl_ms: 150,
        ..LabScenario::GcPause.default_settings()
    };
    assert_eq!(
        run_lab(LabScenario::GcPause, &settings),
        LabOutcome::default()
    );
}
