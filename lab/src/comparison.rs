//! The comparison retry loop: how the experiments acquire with the strategies the SDK does
//! not offer (no jitter, equal jitter, decorrelated jitter).
//!
//! It mirrors the SDK's loop shape — deadline fixed at entry, attempts as a secondary cap,
//! never sleeping past the budget, only retry-safe refusals (409/429/503) retried — and
//! differs only in the delay rule, so a comparison measures the strategy and nothing else.
//! Every call goes through the SDK's seams ([`Transport`], [`Clock`], [`RngSource`]), so the
//! wire behaviour is the SDK's too. Full-jitter contenders do not run here: they use the
//! SDK's own `LockClientSession::acquire`, unchanged.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use lock_api::{AcquireRequest, ErrorCode, LockGrant, OpenSessionRequest, ReleaseRequest};
use lock_wasm::{
    AcquirePolicy, Clock, RngSource, SessionRef, Transport, TransportError, TransportExt,
};

use crate::strategy::{whole_millis, Delays, Strategy};

/// Per-request timeout of every experiment call (ASSUMPTION: 5 s; a loopback server answers
/// in milliseconds, so this only bounds a hung or dead server).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Round trip the loop budgets for before sleeping (ASSUMPTION: 5 ms, loopback): a retry
/// whose sleep plus this would end past the deadline is not made.
pub const RTT_ESTIMATE: Duration = Duration::from_millis(5);

/// Shortest heartbeat interval the loop's sessions use, whatever L1 suggests.
const MIN_HEARTBEAT: Duration = Duration::from_millis(50);

/// What one acquire ended with.
#[derive(Debug, Clone, PartialEq)]
pub enum Acquired {
    /// Granted after `attempts` L4 calls.
    Granted {
        /// The grant.
        grant: LockGrant,
        /// L4 calls it took.
        attempts: u32,
    },
    /// The budget or the attempts ran out.
    NotGranted,
}

/// What the loop reports as it goes. The dashboard records it; the bench counts calls at
/// its transport instead and passes `()`.
pub trait Observer {
    /// An L4 call is about to be sent.
    fn on_call(&mut self) {}
    /// A retry-safe refusal came back.
    fn on_refusal(&mut self, _code: ErrorCode) {}
    /// The loop sleeps `delay` after failed call `attempt` (from 0), whose window was
    /// `ceiling`.
    fn on_sleep(&mut self, _attempt: u32, _delay: Duration, _ceiling: Duration) {}
}

impl Observer for () {}

/// Everything the loop runs with: the SDK's seams, the strategy and the SDK's policy (base,
/// cap, budget, attempts). The loop sends `waitMillis` 0 whatever the policy says: the
/// strategies are compared on client-side backoff alone.
#[derive(Clone)]
pub struct Comparison {
    /// L1–L7.
    pub transport: Arc<dyn Transport>,
    /// Deadlines and sleeps.
    pub clock: Arc<dyn Clock>,
    /// One generator per acquire, as the SDK draws them.
    pub rng: Arc<dyn RngSource>,
    /// The delay rule under test.
    pub strategy: Strategy,
    /// Backoff window, budget and attempt cap.
    pub policy: AcquirePolicy,
}

impl Comparison {
    /// Opens a session (L1) for the loop to acquire in.
    pub async fn open_session(
        &self,
        request: &OpenSessionRequest,
    ) -> Result<ComparisonSession, TransportError> {
        let opened = self
            .transport
            .open_session(request, REQUEST_TIMEOUT)
            .await?;
        Ok(ComparisonSession {
            comparison: self.clone(),
            id: opened.session_id,
            holder_id: opened.holder_id,
            heartbeat_every: Duration::from_millis(opened.heartbeat_millis).max(MIN_HEARTBEAT),
        })
    }
}

/// One session driven by the comparison loop.
pub struct ComparisonSession {
    comparison: Comparison,
    id: String,
    holder_id: String,
    heartbeat_every: Duration,
}

impl ComparisonSession {
    /// The server's id of this session.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session as L2, L3 and L5 name it.
    pub fn session_ref(&self) -> SessionRef<'_> {
        SessionRef {
            id: &self.id,
            holder_id: &self.holder_id,
        }
    }

    /// Heartbeats (L2) at the interval L1 suggested until dropped; the caller races it
    /// against the session's work. A failed heartbeat is not fatal here: the next acquire
    /// or release reports the session's fate.
    pub async fn heartbeat_forever(&self) -> Infallible {
        let c = &self.comparison;
        loop {
            c.clock.sleep(self.heartbeat_every).await;
            let _ = c
                .transport
                .heartbeat(self.session_ref(), REQUEST_TIMEOUT)
                .await;
        }
    }

    /// Acquires `key` for `ttl` with the comparison's strategy: L4; on a retry-safe refusal
    /// sleep the strategy's delay and try again, while the budget and the attempts last.
    /// Any other error is returned at once.
    pub async fn acquire<O: Observer + ?Sized>(
        &self,
        key: &str,
        ttl: Duration,
        observer: &mut O,
    ) -> Result<Acquired, TransportError> {
        let c = &self.comparison;
        let deadline = c.clock.now() + c.policy.total_budget();
        let request = AcquireRequest {
            value: None,
            session_id: self.id.clone(),
            ttl_millis: Some(whole_millis(ttl)),
            wait_millis: Some(0),
            mode: None,
            limit: None,
        };
        let mut delays = Delays::new(c.strategy, c.policy.base_backoff(), c.policy.max_backoff());
        let mut rng = c.rng.rng();
        let max_attempts = c.policy.max_attempts();
        for attempt in 0..max_attempts {
            observer.on_call();
            match c.transport.acquire(key, &request, REQUEST_TIMEOUT).await {
                Ok(grant) => {
                    let attempts = attempt + 1;
                    return Ok(Acquired::Granted { grant, attempts });
                }
                Err(err) => match err.code() {
                    Some(code) if code.retry_safe() => observer.on_refusal(code),
                    _ => return Err(err),
                },
            }
            if attempt + 1 == max_attempts {
                break;
            }
            let delay = delays.next(attempt, &mut rng);
            // Never sleep past the budget: a retry that cannot finish in time is pointless.
            if c.clock.now() + delay + RTT_ESTIMATE > deadline {
                break;
            }
            observer.on_sleep(attempt, delay, delays.ceiling(attempt));
            c.clock.sleep(delay).await;
        }
        Ok(Acquired::NotGranted)
    }

    /// Releases `grant` (L6). `Ok(false)` when the lock was already gone (LOCK_LOST).
    pub async fn release(&self, grant: &LockGrant) -> Result<bool, TransportError> {
        let request = ReleaseRequest {
            fencing_token: grant.fencing_token,
            session_id: Some(self.id.clone()),
        };
        let answer = self
            .comparison
            .transport
            .release(&grant.key, &request, REQUEST_TIMEOUT)
            .await;
        match answer {
            Ok(()) => Ok(true),
            Err(err) if err.code() == Some(ErrorCode::LockLost) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Closes the session (L3); a failure is ignored, the TTL cleans up.
    pub async fn close(&self) {
        let transport = &self.comparison.transport;
        let _ = transport
            .close_session(self.session_ref(), REQUEST_TIMEOUT)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use lock_wasm::transport::Call;
    use lock_wasm::{ManualClock, PolicySettings, ScriptedTransport, SeededRngSource};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Everything the loop reported.
    #[derive(Default)]
    struct Log {
        calls: u32,
        refusals: Vec<ErrorCode>,
        sleeps: Vec<(u32, u64, u64)>,
    }

    impl Observer for Log {
        fn on_call(&mut self) {
            self.calls += 1;
        }
        fn on_refusal(&mut self, code: ErrorCode) {
            self.refusals.push(code);
        }
        fn on_sleep(&mut self, attempt: u32, delay: Duration, ceiling: Duration) {
            self.sleeps
                .push((attempt, whole_millis(delay), whole_millis(ceiling)));
        }
    }

    fn comparison(
        strategy: Strategy,
        transport: &ScriptedTransport,
        clock: &ManualClock,
    ) -> Comparison {
        Comparison {
            transport: Arc::new(transport.clone()),
            clock: Arc::new(clock.clone()),
            rng: Arc::new(SeededRngSource::new(1)),
            strategy,
            policy: AcquirePolicy::new(PolicySettings {
                total_budget: Duration::from_secs(1),
                base_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(400),
                max_attempts: 5,
                wait_millis: 0,
            })
            .unwrap(),
        }
    }

    /// Opens a session of `comparison` and acquires `k` once on simulated time; returns the
    /// outcome, what the loop reported and the simulated time it took.
    fn run_acquire(
        comparison: Comparison,
        clock: &ManualClock,
    ) -> (Result<Acquired, TransportError>, Log, Duration) {
        let result = Rc::new(RefCell::new(None));
        let mut pool = LocalPool::new();
        let out = result.clone();
        pool.spawner()
            .spawn_local(async move {
                let request = OpenSessionRequest::default();
                let session = comparison.open_session(&request).await.unwrap();
                let mut log = Log::default();
                let acquired = session.acquire("k", Duration::from_secs(3), &mut log).await;
                *out.borrow_mut() = Some((acquired, log));
            })
            .unwrap();
        loop {
            pool.run_until_stalled();
            if let Some((acquired, log)) = result.borrow_mut().take() {
                return (acquired, log, lock_wasm::Clock::now(clock));
            }
            assert!(
                clock.advance_to_next_timer(),
                "stalled with no timer pending"
            );
        }
    }

    fn acquire_once(
        strategy: Strategy,
        transport: &ScriptedTransport,
    ) -> (Result<Acquired, TransportError>, Log, Duration) {
        let clock = ManualClock::new();
        run_acquire(comparison(strategy, transport, &clock), &clock)
    }

    #[test]
    fn refusals_are_retried_with_the_strategys_delays_until_granted() {
        let transport = ScriptedTransport::new();
        transport.push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
        transport.push_acquire(Err(ScriptedTransport::error(ErrorCode::ContentionExceeded)));
        transport.push_acquire(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        transport.push_acquire(Ok(ScriptedTransport::grant("k", "s1", 7, 3_000)));
        let (acquired, log, took) = acquire_once(Strategy::NoJitter, &transport);
        let Ok(Acquired::Granted { grant, attempts }) = acquired else {
            panic!("{acquired:?}")
        };
        assert_eq!((grant.fencing_token, attempts, log.calls), (7, 4, 4));
        assert_eq!(log.refusals.len(), 3);
        // No jitter sleeps exactly the SDK's window: base, 2·base, 4·base.
        assert_eq!(log.sleeps, [(0, 10, 10), (1, 20, 20), (2, 40, 40)]);
        assert_eq!(took, Duration::from_millis(70));
        let Call::Acquire(_, request) = &transport.calls()[1] else {
            panic!("L4 expected")
        };
        assert_eq!(
            (request.ttl_millis, request.wait_millis),
            (Some(3_000), Some(0))
        );
    }

    #[test]
    fn the_attempts_cap_ends_the_loop_without_a_sleep_after_the_last() {
        let transport = ScriptedTransport::new();
        let (acquired, log, _) = acquire_once(Strategy::DecorrelatedJitter, &transport);
        assert_eq!(acquired, Ok(Acquired::NotGranted));
        assert_eq!((log.calls, log.sleeps.len()), (5, 4));
        assert_eq!(transport.acquire_calls(), 5);
    }

    #[test]
    fn no_sleep_runs_past_the_budget() {
        let transport = ScriptedTransport::new();
        let clock = ManualClock::new();
        let mut c = comparison(Strategy::NoJitter, &transport, &clock);
        c.policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_millis(100),
            max_attempts: 50,
            ..c.policy.settings()
        })
        .unwrap();
        let (acquired, log, took) = run_acquire(c, &clock);
        assert_eq!(acquired, Ok(Acquired::NotGranted));
        // 10 + 20 + 40 = 70 ms slept; the next 80 ms (+5 ms round trip) would end past 100.
        assert_eq!(log.sleeps.len(), 3);
        assert!(took <= Duration::from_millis(100), "{took:?}");
    }

    #[test]
    fn other_errors_are_returned_at_once() {
        let transport = ScriptedTransport::new();
        transport.push_acquire(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
        let (acquired, log, _) = acquire_once(Strategy::EqualJitter, &transport);
        assert_eq!(
            acquired.unwrap_err().code(),
            Some(ErrorCode::SessionNotFound)
        );
        assert_eq!((log.calls, log.sleeps.len()), (1, 0));
    }

    #[test]
    fn release_reports_a_lock_already_gone() {
        let transport = ScriptedTransport::new();
        transport.push_release(Ok(()));
        transport.push_release(Err(ScriptedTransport::error(ErrorCode::LockLost)));
        transport.push_release(Err(ScriptedTransport::error(ErrorCode::Internal)));
        let clock = ManualClock::new();
        let c = comparison(Strategy::NoJitter, &transport, &clock);
        let grant = ScriptedTransport::grant("k", "s1", 3, 3_000);
        futures::executor::block_on(async {
            let session = c
                .open_session(&OpenSessionRequest::default())
                .await
                .unwrap();
            assert_eq!(session.release(&grant).await, Ok(true));
            assert_eq!(session.release(&grant).await, Ok(false));
            assert!(session.release(&grant).await.is_err());
            session.close().await;
        });
        assert!(transport
            .calls()
            .iter()
            .any(|call| matches!(call, Call::CloseSession(id) if id == "s1")));
    }
}
