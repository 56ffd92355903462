//! The model's rules for exclusive and shared holds, driven with requests through a network
//! without delay or loss, waiting requests on the simulation's executor.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use lock_api::{
    AcquireRequest, ErrorCode, HoldKind, LockGrant, LockMode, LockState, OpenSessionRequest,
    ReleaseRequest, RevokeRequest,
};

use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::sim::executor::SimExecutor;
use crate::sim::network::{Network, SimTransport};
use crate::transport::{SessionRef, TransportExt};

use super::{Faults, SimService, Step};

const EXCLUSIVE: HoldKind = HoldKind::Exclusive;
const READ: HoldKind = HoldKind::Shared { limit: None };
const fn permits(n: u32) -> HoldKind {
    HoldKind::Shared { limit: Some(n) }
}
const TIMEOUT: Duration = Duration::from_secs(60);

/// An answer a waiting L4 will leave here.
type Pending = Arc<Mutex<Option<Result<LockGrant, TransportError>>>>;

/// The model, its executor and a network that answers at once.
struct Model {
    clock: ManualClock,
    exec: SimExecutor,
    service: SimService,
    net: SimTransport,
}

impl Model {
    fn new() -> Self {
        Model::with(Faults::default())
    }

    fn with(faults: Faults) -> Self {
        Model::serving(faults, true)
    }

    /// The model with `faults` planted, keeping its history if `recording`.
    fn serving(faults: Faults, recording: bool) -> Self {
        let clock = ManualClock::new();
        let service = SimService::new(clock.clone(), faults);
        let service = if recording {
            service.recording_history()
        } else {
            service
        };
        let direct = Network {
            delay_millis: (0, 0),
            loss: 0.0,
        };
        Model {
            exec: SimExecutor::new(clock.clone()),
            net: SimTransport::new(service.clone(), direct, 1),
            clock,
            service,
        }
    }

    /// L1 with a session TTL of a minute.
    fn session(&self) -> String {
        let request = OpenSessionRequest {
            ttl_millis: Some(60_000),
            owner: None,
        };
        let opened = self.net.open_session(&request, TIMEOUT).now_or_never();
        opened.unwrap().unwrap().session_id
    }

    /// An L4 that does not wait, for a 10 s hold.
    fn l4(&self, id: &str, key: &str, kind: HoldKind) -> Result<LockGrant, TransportError> {
        let request = body(id, kind, 0);
        let answer = self.net.acquire(key, &request, TIMEOUT).now_or_never();
        answer.expect("an L4 without a wait answers at once")
    }

    /// An L4 that waits up to `wait_millis` in the queue, left running; its answer lands in
    /// the returned slot.
    fn queue(&self, id: &str, key: &str, kind: HoldKind, wait_millis: u64) -> Pending {
        let slot: Pending = Arc::default();
        let (net, key, request, out) = (
            self.net.clone(),
            key.to_owned(),
            body(id, kind, wait_millis),
            slot.clone(),
        );
        self.exec.spawn_in(0, async move {
            let answer = net.acquire(&key, &request, TIMEOUT).await;
            *out.lock().unwrap() = Some(answer);
        });
        self.advance(Duration::ZERO);
        slot
    }

    /// Runs every waiting request while the clock moves on by `by`.
    fn advance(&self, by: Duration) {
        let done = Arc::new(Mutex::new(false));
        let (clock, flag) = (self.clock.clone(), done.clone());
        self.exec.spawn_in(0, async move {
            clock.sleep(by).await;
            // A few turns, so requests woken by the last change run before this ends.
            for _ in 0..8 {
                yield_once().await;
            }
            *flag.lock().unwrap() = true;
        });
        let limit = self.clock.now() + by;
        self.exec
            .run_until(limit, || *done.lock().unwrap(), || {})
            .unwrap();
    }

    fn release(&self, key: &str, token: u64) -> Result<(), TransportError> {
        let request = ReleaseRequest {
            fencing_token: token,
            session_id: None,
        };
        let answer = self.net.release(key, &request, TIMEOUT).now_or_never();
        let answer = answer.unwrap();
        self.advance(Duration::ZERO);
        answer
    }

    fn read(&self, key: &str) -> LockState {
        self.net
            .read_lock(key, TIMEOUT)
            .now_or_never()
            .unwrap()
            .unwrap()
    }

    /// The tokens of `key`'s live holds, in order.
    fn tokens(&self, key: &str) -> Vec<u64> {
        self.service.holds(key).iter().map(|h| h.token).collect()
    }
}

/// Gives way to every other runnable task once.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

fn body(id: &str, kind: HoldKind, wait_millis: u64) -> AcquireRequest {
    AcquireRequest {
        value: None,
        session_id: id.to_owned(),
        ttl_millis: Some(10_000),
        wait_millis: Some(wait_millis),
        mode: Some(kind.mode()),
        limit: kind.limit(),
    }
}

/// The error code of a failed call.
fn code<T: std::fmt::Debug>(answer: Result<T, TransportError>) -> ErrorCode {
    match answer {
        Err(TransportError::Status { body, .. }) => body.code,
        other => panic!("expected an error answer, got {other:?}"),
    }
}

/// The grant a waiting L4 got by now (`None`: still waiting).
fn granted(slot: &Pending) -> Option<LockGrant> {
    match &*slot.lock().unwrap() {
        None => None,
        Some(Ok(grant)) => Some(grant.clone()),
        Some(Err(e)) => panic!("the waiting L4 failed: {e}"),
    }
}

#[test]
fn exclusive_needs_a_free_key_and_shared_needs_no_exclusive_holder() {
    let m = Model::new();
    let (a, b, c) = (m.session(), m.session(), m.session());
    let writer = m.l4(&a, "k", EXCLUSIVE).unwrap();
    assert_eq!(writer.mode, LockMode::Exclusive);
    assert_eq!(code(m.l4(&b, "k", READ)), ErrorCode::LockContended);
    assert_eq!(code(m.l4(&b, "k", EXCLUSIVE)), ErrorCode::LockContended);
    m.release("k", writer.fencing_token).unwrap();

    let first = m.l4(&a, "k", READ).unwrap();
    let second = m.l4(&b, "k", READ).unwrap();
    assert_eq!(
        (first.mode, second.mode),
        (LockMode::Shared, LockMode::Shared)
    );
    assert_eq!(code(m.l4(&c, "k", EXCLUSIVE)), ErrorCode::LockContended);
    assert_eq!(m.tokens("k"), [first.fencing_token, second.fencing_token]);
}

#[test]
fn every_grant_of_a_key_takes_a_higher_token_from_its_one_counter() {
    let m = Model::new();
    let (a, b) = (m.session(), m.session());
    let mut tokens = Vec::new();
    for kind in [READ, READ, EXCLUSIVE, permits(2), EXCLUSIVE] {
        let (x, y) = (m.l4(&a, "k", kind).unwrap(), m.l4(&b, "k", kind));
        tokens.push(x.fencing_token);
        m.release("k", x.fencing_token).unwrap();
        if let Ok(y) = y {
            tokens.push(y.fencing_token);
            m.release("k", y.fencing_token).unwrap();
        }
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(tokens.len(), 8, "{tokens:?}");
}

#[test]
fn a_semaphore_grants_up_to_its_limit() {
    let m = Model::new();
    let ids: Vec<String> = (0..4).map(|_| m.session()).collect();
    let one = m.l4(&ids[0], "sem", permits(3)).unwrap();
    assert_eq!(one.limit, Some(3));
    m.l4(&ids[1], "sem", permits(3)).unwrap();
    m.l4(&ids[2], "sem", permits(3)).unwrap();
    assert_eq!(
        code(m.l4(&ids[3], "sem", permits(3))),
        ErrorCode::LockContended
    );
    m.release("sem", one.fencing_token).unwrap();
    assert!(m.l4(&ids[3], "sem", permits(3)).is_ok());
    assert_eq!(m.service.holds("sem").len(), 3);
}

#[test]
fn a_limit_other_than_the_one_in_force_is_refused_with_it() {
    let m = Model::new();
    let (a, b, c) = (m.session(), m.session(), m.session());
    let limit_of = |answer: Result<LockGrant, TransportError>| match answer {
        Err(TransportError::Status { body, .. }) if body.code == ErrorCode::LimitMismatch => {
            body.limit
        }
        other => panic!("expected LIMIT_MISMATCH, got {other:?}"),
    };
    let held = m.l4(&a, "k", permits(2)).unwrap();
    assert_eq!(limit_of(m.l4(&b, "k", permits(3))), Some(2));
    assert_eq!(limit_of(m.l4(&b, "k", READ)), Some(2));
    m.release("k", held.fencing_token).unwrap();

    // Held by nobody shared: any limit goes, and the first holder sets it.
    let unlimited = m.l4(&a, "k", READ).unwrap();
    assert_eq!(limit_of(m.l4(&b, "k", permits(3))), None);
    m.release("k", unlimited.fencing_token).unwrap();

    // Held exclusive: the first queued reader's limit is in force.
    let writer = m.l4(&a, "k", EXCLUSIVE).unwrap();
    let reader = m.queue(&b, "k", permits(5), 5_000);
    assert_eq!(limit_of(m.l4(&c, "k", permits(4))), Some(5));
    m.release("k", writer.fencing_token).unwrap();
    assert_eq!(granted(&reader).unwrap().limit, Some(5));
}

#[test]
fn a_limit_without_shared_or_out_of_range_is_a_validation_failure() {
    let m = Model::new();
    let a = m.session();
    for (mode, limit) in [(None, Some(2)), (Some(LockMode::Shared), Some(0))] {
        let request = AcquireRequest {
            mode,
            limit,
            ..body(&a, EXCLUSIVE, 0)
        };
        let answer = m
            .net
            .acquire("k", &request, TIMEOUT)
            .now_or_never()
            .unwrap();
        match answer {
            Err(TransportError::Status { body, .. }) => {
                assert_eq!(body.code, ErrorCode::ValidationFailed);
                assert_eq!(body.field.as_deref(), Some("limit"));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_reader_that_fits_does_not_barge_past_a_queued_writer() {
    let m = Model::new();
    let (a, w, r) = (m.session(), m.session(), m.session());
    let reading = m.l4(&a, "k", READ).unwrap();
    let writer = m.queue(&w, "k", EXCLUSIVE, 5_000);
    assert_eq!(code(m.l4(&r, "k", READ)), ErrorCode::LockContended);
    let late_reader = m.queue(&r, "k", READ, 5_000);
    assert_eq!(m.read("k").waiter_count, 2);
    m.release("k", reading.fencing_token).unwrap();
    let written = granted(&writer).expect("the writer is next");
    assert!(granted(&late_reader).is_none());
    m.release("k", written.fencing_token).unwrap();
    assert!(granted(&late_reader).unwrap().fencing_token > written.fencing_token);
}

#[test]
fn a_hand_off_grants_the_head_readers_together_and_stops_at_a_writer() {
    let m = Model::new();
    let ids: Vec<String> = (0..5).map(|_| m.session()).collect();
    let first = m.l4(&ids[0], "k", EXCLUSIVE).unwrap();
    let r1 = m.queue(&ids[1], "k", READ, 5_000);
    let r2 = m.queue(&ids[2], "k", READ, 5_000);
    let w = m.queue(&ids[3], "k", EXCLUSIVE, 5_000);
    let r3 = m.queue(&ids[4], "k", READ, 5_000);
    m.release("k", first.fencing_token).unwrap();
    let (g1, g2) = (granted(&r1).unwrap(), granted(&r2).unwrap());
    assert!(granted(&w).is_none() && granted(&r3).is_none());
    assert!(first.fencing_token < g1.fencing_token && g1.fencing_token < g2.fencing_token);
    // Both readers were granted in the one hand-off of the release.
    let handed: Vec<_> = m
        .service
        .history()
        .expect("the model records its history")
        .events()
        .iter()
        .filter(|e| {
            matches!(
                e.step,
                Step::Granted {
                    ticket: Some(_),
                    ..
                }
            )
        })
        .map(|e| e.at)
        .collect();
    assert_eq!(handed.len(), 2);

    m.release("k", g1.fencing_token).unwrap();
    assert!(granted(&w).is_none(), "a reader still holds");
    m.release("k", g2.fencing_token).unwrap();
    let gw = granted(&w).unwrap();
    assert!(granted(&r3).is_none());
    m.release("k", gw.fencing_token).unwrap();
    assert!(granted(&r3).unwrap().fencing_token > gw.fencing_token);
}

#[test]
fn a_hand_off_to_a_semaphore_stops_at_its_limit() {
    let m = Model::new();
    let ids: Vec<String> = (0..5).map(|_| m.session()).collect();
    let writer = m.l4(&ids[0], "sem", EXCLUSIVE).unwrap();
    let waiting: Vec<Pending> = ids[1..]
        .iter()
        .map(|id| m.queue(id, "sem", permits(2), 5_000))
        .collect();
    m.release("sem", writer.fencing_token).unwrap();
    let got: Vec<bool> = waiting.iter().map(|p| granted(p).is_some()).collect();
    assert_eq!(got, [true, true, false, false]);
    m.release("sem", granted(&waiting[0]).unwrap().fencing_token)
        .unwrap();
    let got: Vec<bool> = waiting.iter().map(|p| granted(p).is_some()).collect();
    assert_eq!(got, [true, true, true, false]);
}

#[test]
fn a_stream_of_readers_does_not_starve_a_queued_writer() {
    let m = Model::new();
    let ids: Vec<String> = (0..8).map(|_| m.session()).collect();
    let held = m.l4(&ids[0], "k", READ).unwrap();
    let writer = m.queue(&ids[1], "k", EXCLUSIVE, 20_000);
    // Readers keep arriving while the first one holds: each waits behind the writer.
    let readers: Vec<Pending> = ids[2..]
        .iter()
        .map(|id| {
            m.advance(Duration::from_millis(300));
            m.queue(id, "k", READ, 20_000)
        })
        .collect();
    m.release("k", held.fencing_token).unwrap();
    let written = granted(&writer).expect("the writer goes first");
    assert!(readers.iter().all(|r| granted(r).is_none()));
    m.release("k", written.fencing_token).unwrap();
    assert!(
        readers.iter().all(|r| granted(r).is_some()),
        "then every reader"
    );
}

#[test]
fn the_same_rules_starve_no_writer_when_the_readers_hold_expires() {
    let m = Model::new();
    let (r, w, late) = (m.session(), m.session(), m.session());
    m.l4(&r, "k", READ).unwrap();
    let writer = m.queue(&w, "k", EXCLUSIVE, 20_000);
    m.advance(Duration::from_millis(100));
    let reader = m.queue(&late, "k", READ, 20_000);
    // Nobody renews the first reader's 10 s hold (no heartbeats here).
    m.advance(Duration::from_millis(10_000));
    assert!(granted(&writer).is_some());
    assert!(granted(&reader).is_none());
}

#[test]
fn a_reader_cannot_upgrade_and_a_writer_nesting_a_read_keeps_its_grant() {
    let m = Model::new();
    let (a, b) = (m.session(), m.session());
    let read = m.l4(&a, "r", READ).unwrap();
    assert_eq!(code(m.l4(&a, "r", EXCLUSIVE)), ErrorCode::UpgradeNotAllowed);
    assert_eq!(
        m.l4(&a, "r", READ).unwrap(),
        read,
        "a repeated read is idempotent"
    );

    let write = m.l4(&b, "w", EXCLUSIVE).unwrap();
    let nested = m.l4(&b, "w", READ).unwrap();
    assert_eq!(nested, write);
    assert_eq!(nested.mode, LockMode::Exclusive);
    assert_eq!(m.tokens("w"), [write.fencing_token]);
}

#[test]
fn each_shared_holder_releases_its_own_token() {
    let m = Model::new();
    let (a, b) = (m.session(), m.session());
    let (x, y) = (m.l4(&a, "k", READ).unwrap(), m.l4(&b, "k", READ).unwrap());
    m.release("k", x.fencing_token).unwrap();
    assert_eq!(m.tokens("k"), [y.fencing_token]);
    assert_eq!(code(m.release("k", x.fencing_token)), ErrorCode::LockLost);
    m.release("k", y.fencing_token).unwrap();
    assert!(m.tokens("k").is_empty());
}

#[test]
fn r1_revokes_every_holder_or_the_one_named() {
    let m = Model::new();
    let ids: Vec<String> = (0..3).map(|_| m.session()).collect();
    let tokens: Vec<u64> = ids
        .iter()
        .map(|id| m.l4(id, "k", READ).unwrap().fencing_token)
        .collect();
    let one = RevokeRequest {
        reason: "drill".into(),
        fencing_token: Some(tokens[1]),
    };
    assert_eq!(m.service.revoke_request("k", &one), [tokens[1]]);
    assert_eq!(m.tokens("k"), [tokens[0], tokens[2]]);

    let all = RevokeRequest {
        reason: "drill".into(),
        fencing_token: None,
    };
    assert_eq!(m.service.revoke_request("k", &all), [tokens[0], tokens[2]]);
    assert_eq!(m.service.revoke_request("k", &all), Vec::<u64>::new());
}

#[test]
fn a_revoke_hands_the_key_on() {
    let m = Model::new();
    let (a, w) = (m.session(), m.session());
    m.l4(&a, "k", READ).unwrap();
    let writer = m.queue(&w, "k", EXCLUSIVE, 5_000);
    assert_eq!(m.service.revoke("k"), Some(1));
    m.advance(Duration::ZERO);
    assert_eq!(granted(&writer).unwrap().fencing_token, 2);
}

#[test]
fn l7_names_the_exclusive_holder_alone_and_every_holder_in_token_order() {
    let m = Model::new();
    let ids: Vec<String> = (0..3).map(|_| m.session()).collect();
    let free = m.read("k");
    assert_eq!((free.mode, free.holder, free.limit), (None, None, None));
    assert!(free.holders.is_empty());

    let write = m.l4(&ids[0], "k", EXCLUSIVE).unwrap();
    let _waiting = m.queue(&ids[1], "k", permits(3), 5_000);
    let state = m.read("k");
    assert_eq!(state.mode, Some(LockMode::Exclusive));
    assert_eq!(
        state.holder.as_ref().unwrap().fencing_token,
        write.fencing_token
    );
    assert_eq!(state.holders, vec![state.holder.clone().unwrap()]);
    assert_eq!((state.limit, state.waiter_count), (None, 1));

    m.release("k", write.fencing_token).unwrap();
    m.l4(&ids[2], "k", permits(3)).unwrap();
    let state = m.read("k");
    assert_eq!(state.mode, Some(LockMode::Shared));
    assert_eq!(state.holder, None);
    let tokens: Vec<u64> = state.holders.iter().map(|h| h.fencing_token).collect();
    assert_eq!(tokens, [2, 3]);
    assert_eq!(state.holders[0].holder_id, format!("holder-of-{}", ids[1]));
    assert_eq!((state.limit, state.waiter_count), (Some(3), 0));
}

#[test]
fn heartbeats_and_status_carry_each_holds_mode() {
    let m = Model::new();
    let a = m.session();
    m.l4(&a, "r", READ).unwrap();
    m.l4(&a, "w", EXCLUSIVE).unwrap();
    let holder = super::sim_holder_id(&a);
    let a_ref = SessionRef {
        id: &a,
        holder_id: &holder,
    };
    let renewed = m
        .net
        .heartbeat(a_ref, TIMEOUT)
        .now_or_never()
        .unwrap()
        .unwrap();
    let modes: Vec<(String, LockMode)> = renewed
        .locks
        .unwrap()
        .into_iter()
        .map(|l| (l.key, l.mode))
        .collect();
    let expected = [
        ("r".to_owned(), LockMode::Shared),
        ("w".to_owned(), LockMode::Exclusive),
    ];
    assert_eq!(modes, expected);
    let status = m
        .net
        .session_status(a_ref, TIMEOUT)
        .now_or_never()
        .unwrap()
        .unwrap();
    let modes: Vec<(String, LockMode)> =
        status.locks.into_iter().map(|l| (l.key, l.mode)).collect();
    assert_eq!(modes, expected);
}

#[test]
fn a_closed_session_ends_its_shared_hold_alone() {
    let m = Model::new();
    let (a, b) = (m.session(), m.session());
    m.l4(&a, "k", READ).unwrap();
    let kept = m.l4(&b, "k", READ).unwrap();
    let holder = super::sim_holder_id(&a);
    let a_ref = SessionRef {
        id: &a,
        holder_id: &holder,
    };
    m.net
        .close_session(a_ref, TIMEOUT)
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(m.tokens("k"), [kept.fencing_token]);
}

#[test]
fn a_queued_request_whose_wait_ends_is_contended_and_its_ticket_lapses_after_grace() {
    let m = Model::new();
    let (a, w, r) = (m.session(), m.session(), m.session());
    let held = m.l4(&a, "k", READ).unwrap();
    let writer = m.queue(&w, "k", EXCLUSIVE, 500);
    m.advance(Duration::from_millis(500));
    assert_eq!(
        code(writer.lock().unwrap().take().unwrap()),
        ErrorCode::LockContended
    );
    // Within the grace period the writer's ticket still holds readers back; after it, not.
    assert_eq!(code(m.l4(&r, "k", READ)), ErrorCode::LockContended);
    m.advance(super::GRACE);
    assert!(m.l4(&r, "k", READ).is_ok());
    m.release("k", held.fencing_token).unwrap();
}

/// The history is kept only when asked for: a server that serves for long (the test kit,
/// a soak test) must not grow with every request.
#[test]
fn only_a_recording_server_keeps_a_history() {
    for recording in [false, true] {
        let m = Model::serving(Faults::default(), recording);
        let id = m.session();
        let grant = m.l4(&id, "k", EXCLUSIVE).unwrap();
        m.release("k", grant.fencing_token).unwrap();
        let steps = m.service.history().map(|h| h.events().len());
        assert_eq!(steps, recording.then_some(2), "recording: {recording}");
    }
}

/// L2 with `since`, answered at once.
fn beat(m: &Model, id: &str, since: Option<&str>) -> lock_api::HeartbeatResponse {
    let request = lock_api::HeartbeatRequest {
        since: since.map(str::to_owned),
    };
    let holder_id = super::sim_holder_id(id);
    let session = SessionRef {
        id,
        holder_id: &holder_id,
    };
    let answer = m
        .net
        .heartbeat_since(session, &request, TIMEOUT)
        .now_or_never();
    answer.unwrap().unwrap()
}

/// L2, L3 and L5 whose path's holder id is not the session's: SESSION_NOT_FOUND, as the
/// server answers (the session id alone, or another session's holder id, names nothing).
#[test]
fn a_session_named_by_another_holder_id_is_not_found() {
    let m = Model::new();
    let (a, b) = (m.session(), m.session());
    let b_holder = super::sim_holder_id(&b);
    for holder_id in [a.as_str(), b_holder.as_str()] {
        let wrong = SessionRef { id: &a, holder_id };
        let beat = m.net.heartbeat(wrong, TIMEOUT).now_or_never().unwrap();
        assert_eq!(code(beat), ErrorCode::SessionNotFound);
        let status = m.net.session_status(wrong, TIMEOUT).now_or_never().unwrap();
        assert_eq!(code(status), ErrorCode::SessionNotFound);
        let closed = m.net.close_session(wrong, TIMEOUT).now_or_never().unwrap();
        assert_eq!(code(closed), ErrorCode::SessionNotFound);
    }
    // Nothing was closed: the right pair still renews (`beat` panics on an error).
    beat(&m, &a, None);
}

#[test]
fn heartbeats_answer_what_changed_since_the_clients_version() {
    use lock_api::ChangeKind;
    let m = Model::new();
    let a = m.session();
    let first = m.l4(&a, "a", EXCLUSIVE).unwrap();
    let full = beat(&m, &a, None);
    assert_eq!(full.locks.as_ref().map(Vec::len), Some(1));
    let v1 = full.version.unwrap();
    let same = beat(&m, &a, Some(&v1));
    assert_eq!((same.locks, same.changes), (None, None));
    assert_eq!(same.version.as_deref(), Some(v1.as_str()));

    // A grant and a revoke the client did not see: both in the delta, under a new version.
    let second = m.l4(&a, "b", EXCLUSIVE).unwrap();
    assert_eq!(m.service.revoke("a"), Some(first.fencing_token));
    let delta = beat(&m, &a, Some(&v1));
    let changes: Vec<_> = delta
        .changes
        .unwrap()
        .into_iter()
        .map(|c| (c.key, c.fencing_token, c.change))
        .collect();
    let expected = [
        ("b".to_owned(), second.fencing_token, ChangeKind::Granted),
        ("a".to_owned(), first.fencing_token, ChangeKind::Gone),
    ];
    assert_eq!(changes, expected);
    let v2 = delta.version.unwrap();
    assert_ne!(v2, v1);

    // An older version, a foreign one, and any version after a restart: the full list.
    for since in [v1.as_str(), "x"] {
        assert!(beat(&m, &a, Some(since)).locks.is_some(), "{since}");
    }
    let v3 = beat(&m, &a, None).version.unwrap();
    m.service.restart_feeds();
    let after = beat(&m, &a, Some(&v3));
    assert_eq!(after.locks.map(|l| l.len()), Some(1));
}
