//! The fault switch (`lock_wasm::fault`) against the real SDK: a client on a switch's clock
//! and transport, a scripted server behind it, simulated time.
#![cfg(not(target_arch = "wasm32"))]
// the contender runs on the native simulated executor
// Answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use lock_api::ReleaseRequest;

use lock_wasm::clock::{Clock, ManualClock};
use lock_wasm::fault::{Fault, FaultKind, FaultSpan, FaultSwitch};
use lock_wasm::handle::LostReason;
use lock_wasm::sim::{run_with, SimExecutor};
use lock_wasm::transport::{Answer, Call, Request, ScriptedTransport, Transport, TransportExt};
use lock_wasm::{
    AcquirePolicy, ClientConfig, LockClient, LockClientSession, SeededRngSource, TransportError,
};

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// A client whose seams go through a fault switch, in front of a scripted server.
struct Contender {
    clock: ManualClock,
    exec: SimExecutor,
    server: ScriptedTransport,
    switch: FaultSwitch,
    client: LockClient,
}

impl Contender {
    /// Sessions of 15 s (a heartbeat every 5 s, valid locally for 13.5 s).
    fn new() -> Self {
        let clock = ManualClock::new();
        let exec = SimExecutor::new(clock.clone());
        let server = ScriptedTransport::new();
        let switch = FaultSwitch::new(Arc::new(clock.clone()));
        let client = LockClient::new(
            switch.transport(Arc::new(server.clone())),
            switch.clock(),
            exec.spawner(1),
            Arc::new(SeededRngSource::new(1)),
        )
        .with_config(ClientConfig {
            session_ttl: Some(Duration::from_secs(15)),
            request_timeout: ms(500),
            ..ClientConfig::default()
        });
        Contender {
            clock,
            exec,
            server,
            switch,
            client,
        }
    }

    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        run_with(&self.exec, fut)
    }

    /// Runs everything until `at` on the clock.
    fn run_until(&self, at: Duration) {
        let wait = self.clock.sleep(at.saturating_sub(self.clock.now()));
        self.run(wait);
    }

    fn session(&self) -> LockClientSession {
        let client = self.client.clone();
        let session = self.run(async move { client.open_session().await.unwrap() });
        self.run(async {});
        session
    }

    fn heartbeats(&self) -> usize {
        let calls = self.server.calls();
        calls
            .iter()
            .filter(|c| matches!(c, Call::Heartbeat(..)))
            .count()
    }
}

#[test]
fn a_paused_contender_sends_no_heartbeat_during_the_pause_and_resumes_after() {
    let c = Contender::new();
    let _session = c.session();
    c.run_until(ms(4_000));
    c.switch.inject(Fault::Pause(ms(6_000)));
    // Its heartbeat was due at 5 s.
    c.run_until(ms(9_999));
    assert_eq!(c.heartbeats(), 0);
    c.run_until(ms(10_000));
    assert_eq!(
        c.heartbeats(),
        1,
        "the heartbeat leaves when the pause ends"
    );
    c.run_until(ms(15_000));
    assert_eq!(
        c.heartbeats(),
        2,
        "and the next one on its period after that"
    );
    assert_eq!(
        c.switch.spans(),
        [FaultSpan {
            kind: FaultKind::Pause,
            start: ms(4_000),
            end: Some(ms(10_000)),
        }]
    );
}

#[test]
fn the_gate_resolves_only_when_the_pause_ends() {
    let clock = ManualClock::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    assert!(switch.gate().now_or_never().is_some(), "no pause: open");
    clock.advance(ms(50));
    switch.inject(Fault::Pause(ms(1_000)));
    let mut gate = switch.gate();
    assert_eq!(switch.in_force(), Some(FaultKind::Pause));
    clock.advance(ms(999));
    assert!((&mut gate).now_or_never().is_none());
    clock.advance(ms(1));
    assert!(gate.now_or_never().is_some());
    assert_eq!(switch.in_force(), None);
}

#[test]
fn a_sleep_spanning_a_pause_ends_at_the_pause_end() {
    let clock = ManualClock::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    let paused_clock = switch.clock();
    let mut spanning = paused_clock.sleep(ms(300));
    let mut before = paused_clock.sleep(ms(80));
    clock.advance(ms(100));
    assert!(
        (&mut before).now_or_never().is_some(),
        "ended before the pause"
    );
    switch.inject(Fault::Pause(ms(500)));
    clock.advance(ms(200));
    assert!(
        (&mut spanning).now_or_never().is_none(),
        "its end fell in the pause"
    );
    clock.advance_to(ms(599));
    assert!((&mut spanning).now_or_never().is_none());
    clock.advance_to(ms(600));
    assert!(spanning.now_or_never().is_some());
    assert_eq!(paused_clock.now(), ms(600), "the time itself goes on");
}

fn release_call(
    t: &Arc<dyn Transport>,
) -> impl std::future::Future<Output = Result<(), TransportError>> + Send + 'static {
    let t = t.clone();
    async move {
        let body = ReleaseRequest {
            fencing_token: 1,
            session_id: None,
        };
        t.release("k", &body, ms(100)).await
    }
}

#[test]
fn a_partition_fails_requests_as_a_network_error_without_reaching_the_server() {
    let clock = ManualClock::new();
    let server = ScriptedTransport::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    let t = switch.transport(Arc::new(server.clone()));
    switch.inject(Fault::Partition {
        length: ms(1_000),
        hang: false,
    });
    let failed = release_call(&t).now_or_never().expect("fails at once");
    assert!(
        matches!(failed, Err(TransportError::Network(_))),
        "{failed:?}"
    );
    assert_eq!(server.release_calls(), 0);
    clock.advance(ms(1_000));
    assert_eq!(release_call(&t).now_or_never(), Some(Ok(())), "healed");
    assert_eq!(server.release_calls(), 1);
}

#[test]
fn a_hanging_partition_fails_requests_when_it_heals() {
    let clock = ManualClock::new();
    let server = ScriptedTransport::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    let t = switch.transport(Arc::new(server.clone()));
    switch.inject(Fault::Partition {
        length: ms(1_000),
        hang: true,
    });
    let mut call = Box::pin(release_call(&t));
    assert!((&mut call).now_or_never().is_none());
    clock.advance(ms(999));
    assert!((&mut call).now_or_never().is_none(), "hangs until the heal");
    clock.advance(ms(1));
    let failed = call.now_or_never().expect("fails at the heal");
    assert!(
        matches!(failed, Err(TransportError::Network(_))),
        "{failed:?}"
    );
    assert_eq!(server.release_calls(), 0);
}

#[test]
fn a_request_made_during_a_pause_leaves_at_its_end() {
    let clock = ManualClock::new();
    let server = ScriptedTransport::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    let t = switch.transport(Arc::new(server.clone()));
    switch.inject(Fault::Pause(ms(300)));
    let mut call = Box::pin(release_call(&t));
    clock.advance(ms(299));
    assert!((&mut call).now_or_never().is_none());
    assert_eq!(server.release_calls(), 0, "nothing left during the pause");
    clock.advance(ms(1));
    assert_eq!(call.now_or_never(), Some(Ok(())));
    assert_eq!(server.release_calls(), 1);
}

#[test]
fn an_answer_arriving_during_a_pause_is_read_at_its_end() {
    // A transport whose answer takes 100 ms; the pause starts while it is in flight.
    struct Slow(ManualClock, ScriptedTransport);
    #[async_trait::async_trait]
    impl Transport for Slow {
        async fn send(&self, request: Request<'_>, timeout: Duration) -> Answer {
            let answer = self.1.send(request, timeout).await;
            self.0.sleep(ms(100)).await;
            answer
        }
    }
    let clock = ManualClock::new();
    let server = ScriptedTransport::new();
    let switch = FaultSwitch::new(Arc::new(clock.clone()));
    let t = switch.transport(Arc::new(Slow(clock.clone(), server.clone())));
    let mut call = Box::pin(release_call(&t));
    assert!((&mut call).now_or_never().is_none());
    assert_eq!(server.release_calls(), 1, "sent before the pause");
    clock.advance(ms(50));
    switch.inject(Fault::Pause(ms(200)));
    clock.advance(ms(50));
    assert!(
        (&mut call).now_or_never().is_none(),
        "answered at 100 ms, read at 250 ms"
    );
    clock.advance_to(ms(250));
    assert_eq!(call.now_or_never(), Some(Ok(())));
}

#[test]
fn a_partitioned_contender_loses_its_handle_at_the_deadline_and_sends_no_heartbeat() {
    let c = Contender::new();
    let session = c.session();
    c.server
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 3_000)));
    let s = session.clone();
    let handle = c.run(async move {
        let policy = AcquirePolicy::default();
        s.acquire("k", ms(3_000), &policy).await.unwrap().unwrap()
    });
    c.switch.inject(Fault::Partition {
        length: ms(20_000),
        hang: false,
    });
    // Granted at 0 with a TTL of 3 s: valid locally until 2.5 s.
    assert_eq!(handle.deadline(), ms(2_500));
    let (lost_at, clock, h) = (Arc::new(Mutex::new(None)), c.clock.clone(), handle.clone());
    let seen = lost_at.clone();
    c.exec.spawn_in(2, async move {
        let reason = h.lost().await;
        *seen.lock().unwrap() = Some((clock.now(), reason));
    });
    c.run_until(ms(3_000));
    assert_eq!(
        *lost_at.lock().unwrap(),
        Some((ms(2_500), LostReason::DeadlinePassed))
    );
    assert_eq!(c.heartbeats(), 0, "no heartbeat reached the server");
}

#[test]
fn a_crashed_contender_sends_nothing_more_not_even_its_close() {
    let c = Contender::new();
    let session = c.session();
    c.server
        .push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 3_000)));
    let s = session.clone();
    let handle = c.run(async move {
        let policy = AcquirePolicy::default();
        s.acquire("k", ms(3_000), &policy).await.unwrap().unwrap()
    });
    let before = c.server.calls().len();
    c.switch.inject(Fault::Crash);
    assert!(c.switch.is_crashed());
    let s = session.clone();
    let released = c.run(async move { s.release(&handle).await });
    assert!(released.is_err(), "its L6 could not leave");
    let s = session.clone();
    let closed = c.run(async move { s.close().await });
    assert!(closed.is_err(), "its L3 could not leave");
    drop(session);
    c.run_until(ms(60_000));
    let after: Vec<Call> = c.server.calls().split_off(before);
    assert_eq!(after, [], "nothing reached the server after the crash");
    assert_eq!(c.switch.in_force(), Some(FaultKind::Crash));
    assert_eq!(c.switch.spans()[0].end, None);
}

#[test]
fn a_switch_and_what_it_hands_out_cross_threads_natively() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let switch = FaultSwitch::new(Arc::new(ManualClock::new()));
    send_sync(&switch);
    send_sync(&switch.clock());
    send_sync(&switch.transport(Arc::new(ScriptedTransport::new())));
    send(&switch.gate());
}
