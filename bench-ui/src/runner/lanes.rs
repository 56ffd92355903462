//! Lanes for waiting requests: a transport that lets at most [`WAIT_LANES`] L4 calls with
//! `waitMillis` > 0 be in flight at once, page-wide, and queues the rest in order.
//!
//! Why: a browser keeps at most 6 HTTP/1.1 connections per server, and a request waiting in
//! the server's queue holds one for its whole wait. With more waiting contenders than
//! connections every connection would be parked on the server, and the holder's release, the
//! heartbeats and the L7 reads would queue inside the browser behind them: releases stall
//! until some wait ends, sessions expire. Keeping two connections free for everything else
//! lets the queue run as it would from separate clients, with the page's own FIFO in front of
//! the server's for the contenders beyond the lanes. Every other call passes straight
//! through. Only the browser's transport is wrapped; natively nothing is.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{select, Either};
use lock_api::{
    AcquireRequest, HeartbeatResponse, LockGrant, LockState, OpenSessionRequest, ReleaseRequest,
    SessionOpened, SessionStatus,
};
use lock_wasm::clock::Clock;
use lock_wasm::error::TransportError;
use lock_wasm::transport::Transport;

/// Waiting L4 calls in flight at once (ASSUMPTION: the browser's 6 connections per server,
/// minus 2 for releases, heartbeats, ledger writes and L7 reads).
pub const WAIT_LANES: usize = 4;

/// The free lanes and, in arrival order, the requests waiting for one.
struct Lanes {
    free: usize,
    queue: VecDeque<oneshot::Sender<Lane>>,
}

/// A lane taken; dropping it hands it to the oldest request still waiting, or frees it.
struct Lane(Option<Arc<Mutex<Lanes>>>);

impl Drop for Lane {
    fn drop(&mut self) {
        let Some(lanes) = self.0.take() else { return };
        let mut state = lock(&lanes);
        let mut lane = Lane(Some(lanes.clone()));
        while let Some(next) = state.queue.pop_front() {
            // A waiter that gave up meanwhile returns the lane: try the next one.
            match next.send(lane) {
                Ok(()) => return,
                Err(back) => lane = back,
            }
        }
        state.free += 1;
        // Freed: this token hands nothing on when it drops.
        lane.0 = None;
    }
}

/// The wrapping transport.
pub struct WaitLanes {
    inner: Arc<dyn Transport>,
    clock: Arc<dyn Clock>,
    lanes: Arc<Mutex<Lanes>>,
}

impl WaitLanes {
    /// Wraps `inner`; `clock` measures and bounds the time spent waiting for a lane.
    pub fn new(inner: Arc<dyn Transport>, clock: Arc<dyn Clock>, lanes: usize) -> Self {
        WaitLanes {
            inner,
            clock,
            lanes: Arc::new(Mutex::new(Lanes {
                free: lanes,
                queue: VecDeque::new(),
            })),
        }
    }

    /// A lane, within `timeout`: `None` when none came in time.
    async fn lane(&self, timeout: Duration) -> Option<Lane> {
        let waiting = {
            let mut state = lock(&self.lanes);
            if state.free > 0 {
                state.free -= 1;
                return Some(Lane(Some(self.lanes.clone())));
            }
            let (tx, rx) = oneshot::channel();
            state.queue.push_back(tx);
            rx
        };
        match select(waiting, self.clock.sleep(timeout)).await {
            Either::Left((Ok(lane), _)) => Some(lane),
            _ => None,
        }
    }
}

fn lock(lanes: &Mutex<Lanes>) -> std::sync::MutexGuard<'_, Lanes> {
    lanes.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for WaitLanes {
    async fn open_session(
        &self,
        request: &OpenSessionRequest,
        timeout: Duration,
    ) -> Result<SessionOpened, TransportError> {
        self.inner.open_session(request, timeout).await
    }

    async fn heartbeat(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<HeartbeatResponse, TransportError> {
        self.inner.heartbeat(session_id, timeout).await
    }

    async fn close_session(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.close_session(session_id, timeout).await
    }

    async fn acquire(
        &self,
        key: &str,
        request: &AcquireRequest,
        timeout: Duration,
    ) -> Result<LockGrant, TransportError> {
        if request.wait_millis.unwrap_or(0) == 0 {
            return self.inner.acquire(key, request, timeout).await;
        }
        let asked = self.clock.now();
        let Some(_lane) = self.lane(timeout).await else {
            return Err(TransportError::Timeout(timeout));
        };
        let left = timeout.saturating_sub(self.clock.now() - asked);
        self.inner.acquire(key, request, left).await
    }

    async fn session_status(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, TransportError> {
        self.inner.session_status(session_id, timeout).await
    }

    async fn release(
        &self,
        key: &str,
        request: &ReleaseRequest,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.inner.release(key, request, timeout).await
    }

    async fn read_lock(&self, key: &str, timeout: Duration) -> Result<LockState, TransportError> {
        self.inner.read_lock(key, timeout).await
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use lock_wasm::{ManualClock, ScriptedTransport};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// L4s that stay in flight until the test lets them answer; records who got in.
    #[derive(Default)]
    struct Gate {
        entered: Mutex<Vec<String>>,
        open: Mutex<Vec<oneshot::Sender<()>>>,
    }

    #[async_trait::async_trait]
    impl Transport for Gate {
        async fn open_session(
            &self,
            _: &OpenSessionRequest,
            _: Duration,
        ) -> Result<SessionOpened, TransportError> {
            unreachable!()
        }
        async fn heartbeat(
            &self,
            _: &str,
            _: Duration,
        ) -> Result<HeartbeatResponse, TransportError> {
            unreachable!()
        }
        async fn close_session(&self, _: &str, _: Duration) -> Result<(), TransportError> {
            unreachable!()
        }
        async fn acquire(
            &self,
            key: &str,
            request: &AcquireRequest,
            _: Duration,
        ) -> Result<LockGrant, TransportError> {
            self.entered.lock().unwrap().push(key.to_string());
            let (tx, rx) = oneshot::channel();
            self.open.lock().unwrap().push(tx);
            let _ = rx.await;
            Ok(ScriptedTransport::grant(key, &request.session_id, 1, 1_000))
        }
        async fn session_status(
            &self,
            _: &str,
            _: Duration,
        ) -> Result<SessionStatus, TransportError> {
            unreachable!()
        }
        async fn release(
            &self,
            _: &str,
            _: &ReleaseRequest,
            _: Duration,
        ) -> Result<(), TransportError> {
            unreachable!()
        }
        async fn read_lock(&self, _: &str, _: Duration) -> Result<LockState, TransportError> {
            unreachable!()
        }
    }

    fn request(wait: u64) -> AcquireRequest {
        AcquireRequest {
            session_id: "s".into(),
            ttl_millis: None,
            wait_millis: Some(wait),
        }
    }

    #[test]
    fn waiting_calls_take_lanes_in_order_and_others_pass() {
        let gate = Arc::new(Gate::default());
        let clock = ManualClock::new();
        let lanes = Rc::new(WaitLanes::new(gate.clone(), Arc::new(clock.clone()), 2));
        let answered = Rc::new(RefCell::new(Vec::new()));
        let mut pool = LocalPool::new();
        let send = |key: &'static str, wait: u64, timeout: u64| {
            let (lanes, answered) = (lanes.clone(), answered.clone());
            pool.spawner()
                .spawn_local(async move {
                    let timeout = Duration::from_millis(timeout);
                    let outcome = lanes.acquire(key, &request(wait), timeout).await;
                    answered.borrow_mut().push((key, outcome.is_ok()));
                })
                .unwrap();
        };
        for key in ["a", "b", "c", "d"] {
            send(key, 1_000, 10_000);
        }
        send("impatient", 1_000, 100);
        send("no-wait", 0, 10_000);
        pool.run_until_stalled();
        let entered = || gate.entered.lock().unwrap().clone();
        assert_eq!(
            entered(),
            ["a", "b", "no-wait"],
            "two lanes; a wait-0 call passes"
        );
        // The impatient one gives up its place in the queue.
        clock.advance(Duration::from_millis(150));
        pool.run_until_stalled();
        assert_eq!(*answered.borrow(), [("impatient", false)]);
        // Each answer hands its lane to the oldest call still waiting.
        for _ in 0..3 {
            gate.open.lock().unwrap().remove(0).send(()).unwrap();
            pool.run_until_stalled();
        }
        assert_eq!(entered(), ["a", "b", "no-wait", "c", "d"]);
    }
}
