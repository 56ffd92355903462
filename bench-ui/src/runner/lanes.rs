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
//!
//! A call whose wait ran out (409) or went unanswered still holds its ticket in the server's
//! queue for the grace period, and the SDK re-sends it at once. Such a re-send takes the next
//! free lane before any first ask: behind the first asks it could spend the whole grace
//! period in the page's queue, lose the ticket, and be overtaken by contenders who asked
//! after it.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{select, Either};
use lock_api::ErrorCode;
use lock_wasm::clock::Clock;
use lock_wasm::error::TransportError;
use lock_wasm::transport::{Answer, Intercept, Outgoing, Route};

/// Waiting L4 calls in flight at once (ASSUMPTION: the browser's 6 connections per server,
/// minus 2 for releases, heartbeats, ledger writes and L7 reads).
pub const WAIT_LANES: usize = 4;

/// The free lanes and, in arrival order, the requests waiting for one.
struct Lanes {
    free: usize,
    /// Re-sends of calls that hold a ticket: served first.
    resends: VecDeque<oneshot::Sender<Lane>>,
    /// First asks.
    queue: VecDeque<oneshot::Sender<Lane>>,
    /// (session id, key) of the calls whose last wait ran out or went unanswered.
    ticketed: HashSet<(String, String)>,
}

impl Lanes {
    fn next_waiting(&mut self) -> Option<oneshot::Sender<Lane>> {
        self.resends.pop_front().or_else(|| self.queue.pop_front())
    }
}

/// A lane taken; dropping it hands it to the oldest request still waiting, or frees it.
struct Lane(Option<Arc<Mutex<Lanes>>>);

impl Drop for Lane {
    fn drop(&mut self) {
        let Some(lanes) = self.0.take() else { return };
        let mut state = lock(&lanes);
        let mut lane = Lane(Some(lanes.clone()));
        while let Some(next) = state.next_waiting() {
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

/// The lanes, in front of the page's transport (an [`Intercept`]).
pub struct WaitLanes {
    clock: Arc<dyn Clock>,
    lanes: Arc<Mutex<Lanes>>,
}

impl WaitLanes {
    /// `lanes` lanes; `clock` measures and bounds the time spent waiting for one.
    pub fn new(clock: Arc<dyn Clock>, lanes: usize) -> Self {
        WaitLanes {
            clock,
            lanes: Arc::new(Mutex::new(Lanes {
                free: lanes,
                resends: VecDeque::new(),
                queue: VecDeque::new(),
                ticketed: HashSet::new(),
            })),
        }
    }

    /// A lane, within `timeout`: `None` when none came in time.
    async fn lane(&self, timeout: Duration, resend: bool) -> Option<Lane> {
        let waiting = {
            let mut state = lock(&self.lanes);
            if state.free > 0 {
                state.free -= 1;
                return Some(Lane(Some(self.lanes.clone())));
            }
            let (tx, rx) = oneshot::channel();
            if resend {
                state.resends.push_back(tx);
            } else {
                state.queue.push_back(tx);
            }
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

impl Intercept for WaitLanes {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        let request = call.request();
        if request.route() != Route::Acquire || request.wait_millis() == 0 {
            return call.send().await;
        }
        let ticket = (
            request.session_id().unwrap_or_default().to_owned(),
            request.key().unwrap_or_default().to_owned(),
        );
        let resend = lock(&self.lanes).ticketed.remove(&ticket);
        let asked = self.clock.now();
        let Some(_lane) = self.lane(call.timeout(), resend).await else {
            // Not sent: a ticket it held is still held.
            if resend {
                lock(&self.lanes).ticketed.insert(ticket);
            }
            return Err(TransportError::Timeout(call.timeout()));
        };
        let left = call.timeout().saturating_sub(self.clock.now() - asked);
        let answer = call.send_within(left).await;
        if keeps_ticket(&answer) {
            lock(&self.lanes).ticketed.insert(ticket);
        }
        answer
    }
}

/// Whether a waiting L4's answer leaves its ticket in the server's queue: the wait ran out,
/// or no answer came (the server may have queued it).
fn keeps_ticket(answer: &Answer) -> bool {
    match answer {
        Err(TransportError::Status { body, .. }) => body.code == ErrorCode::LockContended,
        Err(TransportError::Timeout(_) | TransportError::Network(_)) => true,
        _ => false,
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use lock_api::AcquireRequest;
    use lock_wasm::transport::{Intercepted, Transport, TransportExt};
    use lock_wasm::{ManualClock, ScriptedTransport};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Holds every L4 in flight until the test lets it answer; records who got in.
    #[derive(Clone, Default)]
    struct Gate {
        entered: Arc<Mutex<Vec<String>>>,
        open: Arc<Mutex<Vec<oneshot::Sender<()>>>>,
    }

    impl Intercept for Gate {
        async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
            let key = call.request().key().unwrap();
            self.entered.lock().unwrap().push(key.to_owned());
            let (tx, rx) = oneshot::channel();
            self.open.lock().unwrap().push(tx);
            let _ = rx.await;
            call.send().await
        }
    }

    fn request(wait: u64) -> AcquireRequest {
        AcquireRequest {
            value: None,
            mode: None,
            limit: None,
            session_id: "s".into(),
            ttl_millis: None,
            wait_millis: Some(wait),
        }
    }

    /// A call whose wait ran out re-sends ahead of the first asks still queued for a lane.
    #[test]
    fn a_re_send_takes_the_next_lane_before_first_asks() {
        let gate = Gate::default();
        let scripted = ScriptedTransport::new();
        scripted.push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
        for _ in 0..4 {
            scripted.push_acquire(Ok(ScriptedTransport::grant("k", "s", 1, 1_000)));
        }
        let gated: Arc<dyn Transport> =
            Arc::new(Intercepted::new(Arc::new(scripted), gate.clone()));
        let clock = ManualClock::new();
        let lanes = Rc::new(Intercepted::new(
            gated,
            WaitLanes::new(Arc::new(clock.clone()), 2),
        ));
        let mut pool = LocalPool::new();
        for key in ["a", "b", "c", "d"] {
            let lanes = lanes.clone();
            pool.spawner()
                .spawn_local(async move {
                    let timeout = Duration::from_secs(10);
                    // Re-sent at once until granted, as the SDK does with `waitMillis` > 0.
                    while lanes.acquire(key, &request(1_000), timeout).await.is_err() {}
                })
                .unwrap();
        }
        pool.run_until_stalled();
        let entered = || gate.entered.lock().unwrap().clone();
        assert_eq!(entered(), ["a", "b"]);
        // a's wait runs out (409): its lane goes to c, already queued; a re-sends.
        for _ in 0..3 {
            gate.open.lock().unwrap().remove(0).send(()).unwrap();
            pool.run_until_stalled();
        }
        assert_eq!(entered(), ["a", "b", "c", "a", "d"], "a before d");
    }

    #[test]
    fn waiting_calls_take_lanes_in_order_and_others_pass() {
        let gate = Gate::default();
        let scripted = ScriptedTransport::new();
        for _ in 0..5 {
            scripted.push_acquire(Ok(ScriptedTransport::grant("k", "s", 1, 1_000)));
        }
        let gated: Arc<dyn Transport> =
            Arc::new(Intercepted::new(Arc::new(scripted), gate.clone()));
        let clock = ManualClock::new();
        let lanes = WaitLanes::new(Arc::new(clock.clone()), 2);
        let lanes = Rc::new(Intercepted::new(gated, lanes));
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
