//! Native tests of the runner on the SDK's fakes: the scripted transport answers L1–L8,
//! the manual clock makes every sleep and hold simulated time, and a fake ledger plays the
//! fenced resource. A single-threaded executor drives the run; whenever it stalls, the clock
//! jumps to the next timer.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use lock_api::{ErrorCode, LedgerAppend, LockMode};
use lock_wasm::{BoxFuture, ManualClock, ScriptedTransport, Spawner};

use super::ledger::MemoryLedger;
use super::*;
use lock_lab::strategy::Strategy;

/// Heartbeat tasks are dropped: runs here are far shorter than any TTL.
struct DropSpawner;

impl Spawner for DropSpawner {
    fn spawn(&self, _task: BoxFuture<'static, ()>) {}
}

struct Harness {
    env: Env,
    clock: ManualClock,
    transport: ScriptedTransport,
    ledger: Rc<MemoryLedger>,
}

fn harness() -> Harness {
    let clock = ManualClock::new();
    let transport = ScriptedTransport::new();
    let ledger = Rc::new(MemoryLedger::default());
    let env = Env {
        transport: Arc::new(transport.clone()),
        clock: Arc::new(clock.clone()),
        spawner: Arc::new(DropSpawner),
        ledger: ledger.clone(),
    };
    Harness {
        env,
        clock,
        transport,
        ledger,
    }
}

/// Runs `config` to completion on simulated time and returns the record.
fn run(h: &Harness, config: ExperimentConfig, cancel: &CancelFlag) -> RunRecord {
    run_until(h, config, cancel, None)
}

/// As [`run`], pressing Cancel once simulated time passes `cancel_at`.
fn run_until(
    h: &Harness,
    config: ExperimentConfig,
    cancel: &CancelFlag,
    cancel_at: Option<std::time::Duration>,
) -> RunRecord {
    let recorder = start_recorder(&h.env, "t", &config);
    let mut pool = LocalPool::new();
    let done = Rc::new(RefCell::new(false));
    {
        let (env, recorder, cancel, done) = (
            h.env.clone(),
            recorder.clone(),
            cancel.clone(),
            done.clone(),
        );
        pool.spawner()
            .spawn_local(async move {
                run_experiment(&env, &recorder, &cancel).await;
                *done.borrow_mut() = true;
            })
            .expect("spawn");
    }
    for _ in 0..100_000 {
        pool.run_until_stalled();
        if *done.borrow() {
            return recorder.snapshot();
        }
        assert!(
            h.clock.advance_to_next_timer(),
            "run stalled with no timer pending"
        );
        if cancel_at.is_some_and(|at| lock_wasm::Clock::now(&h.clock) >= at) {
            cancel.cancel();
        }
    }
    panic!("run did not finish");
}

fn config(strategy: Strategy, sessions: u32) -> ExperimentConfig {
    ExperimentConfig {
        sessions,
        rounds: 1,
        strategy,
        ..ExperimentConfig::default()
    }
}

#[test]
fn own_loop_retries_with_its_strategy_and_writes_the_ledger() {
    let h = harness();
    h.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
    h.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::ContentionExceeded)));
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 3_000)));
    let record = run(&h, config(Strategy::NoJitter, 1), &CancelFlag::default());
    let c = record.counters;
    assert_eq!(
        (c.l4_calls, c.contended_409, c.exceeded_429, c.grants),
        (3, 1, 1, 1)
    );
    assert_eq!(c.fenced_out, 0);
    // No jitter sleeps exactly the ceiling: base, then 2·base.
    let delays: Vec<u64> = record.sleeps.iter().map(|s| s.delay_millis).collect();
    assert_eq!(delays, [10, 20]);
    assert_eq!(record.holds.len(), 1);
    let hold = &record.holds[0];
    assert!(hold.ledger_accepted);
    let held_for = hold.released_at.unwrap() - hold.granted_at;
    assert!(
        (held_for - 40.0).abs() < 1.0,
        "held {held_for} ms of simulated time"
    );
    assert_eq!(h.ledger.entries.borrow().values().flatten().count(), 1);
    assert_eq!(h.transport.release_calls(), 1);
    assert_eq!(record.error, None);
    assert!(record.completed_millis.is_some());
}

#[test]
fn a_stale_token_is_counted_as_fenced_out() {
    let h = harness();
    let earlier = LedgerAppend {
        fencing_token: 100,
        entry: "a later holder's write".into(),
    };
    h.ledger
        .entries
        .borrow_mut()
        .insert("k".into(), vec![earlier]);
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 3_000)));
    let record = run(&h, config(Strategy::EqualJitter, 1), &CancelFlag::default());
    assert_eq!(record.counters.fenced_out, 1);
    assert!(!record.holds[0].ledger_accepted);
}

#[test]
fn own_loop_gives_up_after_max_attempts_without_sleeping_after_the_last() {
    let h = harness();
    let mut cfg = config(Strategy::DecorrelatedJitter, 1);
    cfg.policy.max_attempts = 3;
    let record = run(&h, cfg, &CancelFlag::default());
    assert_eq!(record.counters.l4_calls, 3);
    assert_eq!(record.counters.gave_up, 1);
    assert_eq!(record.sleeps.len(), 2);
}

#[test]
fn full_jitter_goes_through_the_sdk_and_its_sleeps_are_recorded() {
    let h = harness();
    h.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
    h.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("bench/t/k0", "s1", 3, 3_000)));
    let record = run(&h, config(Strategy::FullJitter, 1), &CancelFlag::default());
    assert_eq!(record.counters.grants, 1, "{record:?}");
    assert_eq!(record.counters.l4_calls, 3);
    assert_eq!(record.counters.contended_409, 2);
    assert_eq!(record.sleeps.len(), 2);
    for sleep in &record.sleeps {
        assert!(sleep.delay_millis <= sleep.ceiling_millis, "{sleep:?}");
    }
    assert_eq!(record.sleeps[1].ceiling_millis, 20);
    assert_eq!(record.holds[0].attempts, 3);
    assert_eq!(record.sessions[0].id, "s1");
}

#[test]
fn a_cancelled_run_stops_closes_its_sessions_and_says_so() {
    let h = harness();
    let cancel = CancelFlag::default();
    // Nobody is ever granted (the scripted L4 answers 409 forever): only Cancel ends this.
    let mut cfg = config(Strategy::NoJitter, 3);
    cfg.policy.max_attempts = 1_000;
    cfg.policy.budget_millis = 300_000;
    let record = run_until(&h, cfg, &cancel, Some(std::time::Duration::from_secs(2)));
    assert_eq!(record.error.as_deref(), Some("cancelled"));
    assert_eq!(record.counters.grants, 0);
    assert!(record.counters.l4_calls > 3);
    let closes = h
        .transport
        .calls()
        .iter()
        .filter(|c| matches!(c, lock_wasm::transport::Call::CloseSession(_)))
        .count();
    assert_eq!(closes, 3, "every session is closed on cancel");
    let elapsed = record.completed_millis.unwrap();
    assert!(
        (2_000.0..3_000.0).contains(&elapsed),
        "stopped at {elapsed} simulated ms"
    );
}

#[test]
fn a_run_cancelled_before_it_starts_does_nothing() {
    let h = harness();
    let cancel = CancelFlag::default();
    cancel.cancel();
    let record = run(&h, config(Strategy::NoJitter, 2), &cancel);
    assert_eq!(record.error.as_deref(), Some("cancelled"));
    assert_eq!(record.counters.l4_calls, 0);
}

#[test]
fn an_expired_session_is_explained_and_counted_as_an_error() {
    let h = harness();
    h.transport
        .push_acquire(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
    let record = run(&h, config(Strategy::NoJitter, 1), &CancelFlag::default());
    assert_eq!(record.counters.errors, 1);
    assert_eq!(
        record.counters.l4_calls, 1,
        "SESSION_NOT_FOUND is never retried"
    );
    assert_eq!(record.error.as_deref(), Some(failure::SESSION_EXPIRED));
}

/// The modes of the L4 calls sent, in order.
fn asked_modes(h: &Harness) -> Vec<(Option<LockMode>, Option<u32>)> {
    h.transport
        .calls()
        .iter()
        .filter_map(|c| match c {
            lock_wasm::transport::Call::Acquire(_, body) => Some((body.mode, body.limit)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_reader_asks_for_a_permit_of_the_semaphore_and_records_its_shared_hold() {
    let h = harness();
    let grant = lock_api::LockGrant {
        mode: LockMode::Shared,
        limit: Some(3),
        ..ScriptedTransport::grant("bench/t/k0", "s1", 4, 3_000)
    };
    h.transport.push_acquire(Ok(grant));
    let mut cfg = config(Strategy::ServerQueue, 1);
    cfg.reader_percent = 100;
    cfg.semaphore_limit = Some(3);
    let record = run(&h, cfg, &CancelFlag::default());
    assert_eq!(asked_modes(&h), [(Some(LockMode::Shared), Some(3))]);
    let hold = &record.holds[0];
    assert_eq!((hold.mode, hold.limit), (LockMode::Shared, Some(3)));
    assert!(
        h.ledger.entries.borrow().is_empty(),
        "a reader writes nothing to the ledger"
    );
    assert_eq!(record.counters.fenced_out, 0);
}

#[test]
fn a_writer_asks_as_before() {
    let h = harness();
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("bench/t/k0", "s1", 4, 3_000)));
    let record = run(&h, config(Strategy::FullJitter, 1), &CancelFlag::default());
    // No mode and no limit on the wire: byte for byte the exclusive L4 of before.
    assert_eq!(asked_modes(&h), [(None, None)]);
    assert_eq!(record.holds[0].mode, LockMode::Exclusive);
    assert!(
        record.holds[0].ledger_accepted,
        "a writer writes the ledger"
    );
}

/// An L8 event of the run's one key, stamped `at_millis` by the server.
fn event(kind: lock_api::EventKind, at_millis: u64, token: Option<u64>) -> lock_api::WatchEvent {
    lock_api::WatchEvent {
        id: at_millis.to_string(),
        kind,
        key: "bench/t/k0".into(),
        at_millis,
        fencing_token: token,
        holder_id: token.map(|t| format!("h{t}")),
        owner: None,
        mode: token.map(|_| LockMode::Exclusive),
        limit: None,
        value: None,
        waiter_count: 0,
        state: kind.is_state().then(|| lock_api::LockState {
            key: "bench/t/k0".into(),
            mode: None,
            holder: None,
            holders: vec![],
            limit: None,
            waiter_count: 0,
        }),
    }
}

#[test]
fn the_watcher_records_the_keys_stream_and_the_timeline_is_drawn_from_it() {
    use crate::model::timeline::{Source, Timeline};
    use lock_api::{EventBatch, EventKind};
    let h = harness();
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("bench/t/k0", "s1", 7, 3_000)));
    let t0 = 1_700_000_000_000;
    h.transport.push_events(Ok(EventBatch {
        events: vec![event(EventKind::Snapshot, t0, None)],
    }));
    h.transport.push_events(Ok(EventBatch {
        events: vec![
            event(EventKind::Granted, t0 + 1, Some(7)),
            event(EventKind::Released, t0 + 41, Some(7)),
        ],
    }));
    let record = run(&h, config(Strategy::FullJitter, 1), &CancelFlag::default());
    assert_eq!(record.stream_error, None);
    let kinds: Vec<EventKind> = record.events.iter().map(|o| o.event.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::Snapshot, EventKind::Granted, EventKind::Released]
    );
    let timeline = Timeline::build(&record);
    assert_eq!(timeline.source, Source::Stream);
    assert_eq!(timeline.grants_unseen, Some(0));
    assert_eq!(timeline.bars.len(), 1);
    assert_eq!(timeline.bars[0].session, Some(0));
    // The scripted L7 answers 404: no sample listed the hold the stream saw.
    assert_eq!(record.counters.missed_by_sampling, Some(1));
}

#[test]
fn a_server_without_an_event_stream_leaves_the_timeline_to_the_samples() {
    use crate::model::timeline::{Source, Timeline};
    let h = harness();
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("bench/t/k0", "s1", 7, 3_000)));
    h.transport
        .push_events(Err(ScriptedTransport::error(ErrorCode::NotFound)));
    let record = run(&h, config(Strategy::FullJitter, 1), &CancelFlag::default());
    let why = record.stream_error.clone().unwrap_or_default();
    assert!(why.contains("bench/t/k0"), "{why}");
    assert_eq!(record.error, None, "the run itself went fine");
    assert_eq!(record.counters.grants, 1);
    assert_eq!(Timeline::build(&record).source, Source::Samples);
    assert_eq!(record.counters.missed_by_sampling, None);
}

#[test]
fn a_sweep_point_watches_nothing() {
    let h = harness();
    h.transport
        .push_acquire(Ok(ScriptedTransport::grant("bench/t/k0", "s1", 7, 3_000)));
    let mut cfg = config(Strategy::FullJitter, 1);
    cfg.watch_events = false;
    let record = run(&h, cfg, &CancelFlag::default());
    assert!(record.events.is_empty() && record.stream_error.is_none());
    let polls = h
        .transport
        .calls()
        .iter()
        .filter(|c| matches!(c, lock_wasm::transport::Call::Events(..)))
        .count();
    assert_eq!(polls, 0);
}
