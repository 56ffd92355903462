//! Watch and leader election through the public API (C2 ct2-watch, ct2-election): the
//! watch's resume logic and end on a scripted server, `observe`'s deduplication, `leader`,
//! a lost leadership and `proclaim` after it; and on the simulated lock service, campaigns
//! of three sessions elected in the order they queued, and a watch that sees the terms.
#![cfg(not(target_arch = "wasm32"))]
// the fixture runs on the native simulated executor
// Scripted answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use lock_api::{ErrorCode, EventBatch, EventKind, Holder, LockMode, LockState, WatchEvent};
use lock_wasm::backoff::SeededRngSource;
use lock_wasm::clock::{Clock, ManualClock};
use lock_wasm::election::{CampaignOptions, Leader, Leadership};
use lock_wasm::error::TransportError;
use lock_wasm::sim::{Faults, Network, SimExecutor, SimService, SimTransport};
use lock_wasm::test_support::Fixture;
use lock_wasm::transport::{Call, ScriptedTransport};
use lock_wasm::{LockClient, LockError, LostReason};

fn event(id: &str, kind: EventKind, token: Option<u64>, value: Option<&str>) -> WatchEvent {
    WatchEvent {
        id: id.into(),
        kind,
        key: "e".into(),
        at_millis: 0,
        fencing_token: token,
        holder_id: token.map(|t| format!("h{t}")),
        owner: None,
        mode: token.map(|_| LockMode::Exclusive),
        limit: None,
        value: value.map(str::to_owned),
        waiter_count: 0,
        state: None,
    }
}

fn state(holder: Option<(u64, &str)>) -> LockState {
    let holder = holder.map(|(token, value)| Holder {
        holder_id: format!("h{token}"),
        owner: None,
        fencing_token: token,
        remaining_millis: 1_000,
        value: Some(value.into()),
    });
    LockState {
        key: "e".into(),
        mode: holder.as_ref().map(|_| LockMode::Exclusive),
        holders: holder.iter().cloned().collect(),
        holder,
        limit: None,
        waiter_count: 0,
    }
}

fn snapshot(id: &str, holder: Option<(u64, &str)>) -> WatchEvent {
    WatchEvent {
        state: Some(state(holder)),
        ..event(id, EventKind::Snapshot, None, None)
    }
}

fn batch(events: Vec<WatchEvent>) -> Result<EventBatch, TransportError> {
    Ok(EventBatch { events })
}

/// The L8 calls so far: `(after, waitMillis)`.
fn polls(transport: &ScriptedTransport) -> Vec<(Option<String>, u64)> {
    transport
        .calls()
        .into_iter()
        .filter_map(|call| match call {
            Call::Events(_, after, wait) => Some((after, wait)),
            _ => None,
        })
        .collect()
}

/// A watch yields each event once, in order, and resumes after a failed poll (here no
/// answer at all, then a network error) from the last id it yielded; the failures are not
/// yielded.
#[test]
fn a_watch_resumes_from_the_last_id_after_failures() {
    let f = Fixture::new();
    f.transport.push_events(batch(vec![snapshot("0-0", None)]));
    f.transport
        .push_events(Err(TransportError::Network("refused".into())));
    f.transport.push_events(batch(vec![
        event("0-1", EventKind::Granted, Some(1), None),
        event("0-2", EventKind::Released, Some(1), None),
    ]));
    let client = f.client.clone();
    let kinds = f.run(async move {
        let watch = client.watch("e");
        let events: Vec<_> = watch.take(3).collect().await;
        events
            .into_iter()
            .map(|e| e.unwrap().kind)
            .collect::<Vec<_>>()
    });
    assert_eq!(
        kinds,
        [EventKind::Snapshot, EventKind::Granted, EventKind::Released]
    );
    let resumed = Some("0-0".to_owned());
    assert_eq!(
        polls(&f.transport),
        [(None, 25_000), (resumed.clone(), 25_000), (resumed, 25_000)]
    );
}

/// A poll nobody answers is ended by the hop timeout (request timeout + the wait) on the
/// client's clock, and sent again from the same id.
#[test]
fn an_unanswered_poll_times_out_on_the_clock_and_is_sent_again() {
    let f = Fixture::new();
    f.transport.push_events(batch(vec![snapshot("0-0", None)]));
    // The second poll gets no answer (the scripted default), the third this one.
    let client = f.client.clone();
    let transport = f.transport.clone();
    let clock = f.clock.clone();
    let (kind, waited) = f.run(async move {
        let mut watch = client.watch("e");
        watch.next().await.unwrap().unwrap();
        let start = clock.now();
        // Queued after the first poll started waiting: answers the next one.
        let next = watch.next();
        futures::pin_mut!(next);
        assert!(futures::poll!(&mut next).is_pending());
        transport.push_events(batch(vec![event("0-1", EventKind::Waiters, None, None)]));
        let event = next.await.unwrap().unwrap();
        (event.kind, clock.now() - start)
    });
    assert_eq!(kind, EventKind::Waiters);
    assert!(waited >= Duration::from_secs(25), "{waited:?}");
    assert_eq!(polls(&f.transport).len(), 3);
}

/// A non-retryable answer (403 outside the key scope) is yielded and ends the stream.
#[test]
fn a_forbidden_watch_yields_the_error_and_ends() {
    let f = Fixture::new();
    f.transport
        .push_events(Err(ScriptedTransport::error(ErrorCode::Forbidden)));
    let client = f.client.clone();
    let items = f.run(async move { client.watch("e").collect::<Vec<_>>().await });
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(LockError::Forbidden { .. })));
}

fn leader(term: u64, value: &str) -> Option<Leader> {
    Some(Leader {
        value: Some(value.into()),
        term,
        holder_id: format!("h{term}"),
    })
}

/// `observe` yields the leader after each change of holder or value and nothing for events
/// that change neither (waiters, a proclaim of the same value, another holder's end).
#[test]
fn observe_yields_each_change_of_leader_once() {
    let f = Fixture::new();
    f.transport.push_events(batch(vec![
        snapshot("0-0", None),
        event("0-1", EventKind::Waiters, None, None),
        event("0-2", EventKind::Granted, Some(1), Some("a")),
        event("0-3", EventKind::Proclaimed, Some(1), Some("a")),
        event("0-4", EventKind::Waiters, None, None),
        event("0-5", EventKind::Proclaimed, Some(1), Some("b")),
        event("0-6", EventKind::Released, Some(1), None),
        event("0-7", EventKind::HandedOff, Some(2), Some("c")),
    ]));
    f.transport
        .push_events(Err(ScriptedTransport::error(ErrorCode::Unauthorized)));
    let client = f.client.clone();
    let items = f.run(async move { client.observe("e").collect::<Vec<_>>().await });
    let (leaders, end) = items.split_at(items.len() - 1);
    let leaders: Vec<_> = leaders.iter().map(|l| l.clone().unwrap()).collect();
    assert_eq!(
        leaders,
        [None, leader(1, "a"), leader(1, "b"), None, leader(2, "c")]
    );
    assert!(matches!(end[0], Err(LockError::Unauthorized { .. })));
}

/// `leader` reads L7: the exclusive holder, or none.
#[test]
fn leader_reads_the_holder() {
    let f = Fixture::new();
    f.transport.push_read(Ok(state(Some((4, "x")))));
    f.transport.push_read(Ok(state(None)));
    let client = f.client.clone();
    let (now, later) = f.run(async move {
        (
            client.leader("e").await.unwrap(),
            client.leader("e").await.unwrap(),
        )
    });
    assert_eq!((now, later), (leader(4, "x"), None));
}

/// A campaign is a queued exclusive L4 with the value; the leadership's term is the token.
/// A lost session ends it: `lost()` completes, and `proclaim` is refused with `LockLost`
/// without a request.
#[test]
fn a_lost_session_ends_the_leadership_and_proclaim_is_refused_unsent() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Ok(ScriptedTransport::grant("e", "s1", 7, 10_000)));
    let options = CampaignOptions {
        value: Some("10.0.0.1:80".into()),
        ttl: None,
    };
    let s = session.clone();
    let leadership = f.run(async move { s.campaign("e", options).await.unwrap() });
    assert_eq!(leadership.term(), 7);
    assert_eq!(leadership.value().as_deref(), Some("10.0.0.1:80"));
    let Some(Call::Acquire(_, body)) = f
        .transport
        .calls()
        .into_iter()
        .find(|c| matches!(c, Call::Acquire(..)))
    else {
        panic!("no L4");
    };
    assert_eq!(body.value.as_deref(), Some("10.0.0.1:80"));
    assert_eq!(body.wait_millis, Some(25_000));
    // A proclaim while leading is sent.
    let l = leadership.clone();
    f.run(async move { l.proclaim("10.0.0.2:80").await.unwrap() });
    assert_eq!(f.transport.proclaim_calls(), 1);
    assert_eq!(leadership.value().as_deref(), Some("10.0.0.2:80"));
    // The server forgets the session: the next heartbeat's 404 loses it.
    f.transport
        .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
    let l = leadership.clone();
    let reason = f.run(async move { l.lost().await });
    assert_eq!(reason, LostReason::SessionLost);
    assert!(leadership.is_lost());
    let l = leadership.clone();
    let refused = f.run(async move { l.proclaim("10.0.0.3:80").await });
    assert!(
        matches!(refused, Err(LockError::LockLost { .. })),
        "{refused:?}"
    );
    assert_eq!(
        f.transport.proclaim_calls(),
        1,
        "nothing sent after the loss"
    );
}

/// After `resign` the handle is released: `proclaim` is refused unsent.
#[test]
fn proclaim_after_resign_is_refused_unsent() {
    let f = Fixture::new();
    let session = f.session();
    f.transport
        .push_acquire(Ok(ScriptedTransport::grant("e", "s1", 3, 10_000)));
    let s = session.clone();
    let refused = f.run(async move {
        let leadership = s.campaign("e", CampaignOptions::default()).await.unwrap();
        leadership.resign().await.unwrap();
        leadership.proclaim("late").await
    });
    assert!(matches!(refused, Err(LockError::LockLost { .. })));
    assert_eq!(f.transport.proclaim_calls(), 0);
    assert_eq!(f.transport.release_calls(), 1);
}

/// A client over the simulated lock service, on a network without delay or loss.
struct Sim {
    clock: ManualClock,
    exec: SimExecutor,
    service: SimService,
    client: LockClient,
}

impl Sim {
    fn new() -> Self {
        let clock = ManualClock::new();
        let exec = SimExecutor::new(clock.clone());
        let service = SimService::new(clock.clone(), Faults::default());
        let direct = Network {
            delay_millis: (0, 0),
            loss: 0.0,
        };
        let net = SimTransport::new(service.clone(), direct, 1);
        let client = LockClient::new(
            Arc::new(net),
            Arc::new(clock.clone()),
            exec.spawner(1),
            Arc::new(SeededRngSource::new(1)),
        );
        Sim {
            clock,
            exec,
            service,
            client,
        }
    }

    /// Runs every task while the clock moves on by `by`.
    fn advance(&self, by: Duration) {
        let until = self.clock.now() + by;
        let clock = self.clock.clone();
        let done = Arc::new(Mutex::new(false));
        let flag = done.clone();
        self.exec.spawn_in(0, async move {
            clock.sleep(by).await;
            *flag.lock().unwrap() = true;
        });
        self.exec
            .run_until(until, || *done.lock().unwrap(), || {})
            .unwrap();
    }

    /// Starts a campaign of a new session; its leadership lands in the slot.
    fn campaign(&self, value: &str) -> Arc<Mutex<Option<Leadership>>> {
        let slot = Arc::new(Mutex::new(None));
        let (client, out, value) = (self.client.clone(), slot.clone(), value.to_owned());
        self.exec.spawn_in(0, async move {
            let session = client.open_session().await.unwrap();
            let options = CampaignOptions {
                value: Some(value),
                ttl: Some(Duration::from_secs(10)),
            };
            let won = session.campaign("e", options).await.unwrap();
            *out.lock().unwrap() = Some(won);
        });
        self.advance(Duration::from_millis(100));
        slot
    }

    fn resign(&self, leadership: &Leadership) {
        let l = leadership.clone();
        self.exec
            .spawn_in(0, async move { l.resign().await.unwrap() });
        self.advance(Duration::from_millis(100));
    }
}

fn won(slot: &Arc<Mutex<Option<Leadership>>>) -> Option<(u64, Option<String>)> {
    slot.lock().unwrap().as_ref().map(|l| (l.term(), l.value()))
}

/// Three sessions campaign; each resignation elects the next in the order they queued, with
/// a higher term, and a watch of the election sees every term begin and end, in order.
#[test]
fn campaigns_are_elected_in_queue_order_and_a_watch_sees_the_terms() {
    let sim = Sim::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (client, out) = (sim.client.clone(), seen.clone());
    sim.exec.spawn_in(0, async move {
        let mut watch = client.watch("e");
        while let Some(Ok(event)) = watch.next().await {
            out.lock()
                .unwrap()
                .push((event.kind, event.fencing_token, event.value));
        }
    });
    let a = sim.campaign("a");
    let b = sim.campaign("b");
    let c = sim.campaign("c");
    // Waiting longer than a campaign's round keeps the queue's order.
    sim.advance(Duration::from_secs(120));
    assert_eq!(won(&a), Some((1, Some("a".into()))));
    assert_eq!((won(&b), won(&c)), (None, None));
    sim.resign(&a.lock().unwrap().clone().unwrap());
    assert_eq!(won(&b), Some((2, Some("b".into()))));
    assert_eq!(won(&c), None);
    sim.resign(&b.lock().unwrap().clone().unwrap());
    assert_eq!(won(&c), Some((3, Some("c".into()))));
    assert_eq!(sim.service.holder("e").map(|(_, t)| t), Some(3));
    let grants: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(kind, ..)| kind.is_grant() || kind.is_end())
        .cloned()
        .collect();
    let v = |s: &str| Some(s.to_owned());
    assert_eq!(
        grants,
        [
            (EventKind::Granted, Some(1), v("a")),
            (EventKind::Released, Some(1), None),
            (EventKind::HandedOff, Some(2), v("b")),
            (EventKind::Released, Some(2), None),
            (EventKind::HandedOff, Some(3), v("c")),
        ]
    );
}

/// A watch of the simulated service resumes across a restart of its feed with a `reset`
/// carrying the state now, then live events again; `observe` follows the leader through it.
#[test]
fn a_watch_gets_a_reset_after_a_restart_and_observe_follows() {
    let sim = Sim::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let leaders = Arc::new(Mutex::new(Vec::new()));
    let (client, out) = (sim.client.clone(), seen.clone());
    sim.exec.spawn_in(0, async move {
        let mut watch = client.watch("e");
        while let Some(Ok(event)) = watch.next().await {
            out.lock().unwrap().push(event.kind);
        }
    });
    let (client, out) = (sim.client.clone(), leaders.clone());
    sim.exec.spawn_in(0, async move {
        let mut observe = client.observe("e");
        while let Some(Ok(leader)) = observe.next().await {
            out.lock().unwrap().push(leader.map(|l| l.term));
        }
    });
    sim.advance(Duration::from_millis(100));
    let a = sim.campaign("a");
    sim.service.restart_feeds();
    sim.advance(Duration::from_secs(1));
    let a = a.lock().unwrap().clone().unwrap();
    let l = a.clone();
    sim.exec
        .spawn_in(0, async move { l.proclaim("a2").await.unwrap() });
    sim.advance(Duration::from_millis(100));
    sim.resign(&a);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            EventKind::Snapshot,
            EventKind::Granted,
            EventKind::Reset,
            EventKind::Proclaimed,
            EventKind::Released,
        ]
    );
    assert_eq!(*leaders.lock().unwrap(), [None, Some(1), Some(1), None]);
}
