//! Running experiments against a live server: contenders, the L7 sampler, the L8 watchers,
//! cancellation and sweeps. Generic over the SDK's seams (`Transport`, `Clock`, `Spawner`) so the same code
//! runs in the browser (fetch, JS timers) and natively in unit tests (scripted transport,
//! manual clock). Full-jitter contenders run the SDK's own acquire ([`sdk`]), the others
//! `lock_lab`'s comparison loop ([`comparison`]). In the browser, `browser` (wasm32 only)
//! runs a job and reports on it, in the experiment engine (in a worker or on the page), driven by the
//! [`messages`].
//!
//! Concurrency is cooperative: every contender is a future, and the run joins them all in
//! one task (no spawning), so cancelling a run is dropping one future — which aborts the
//! in-flight fetches too.

pub mod admin;
#[cfg(target_arch = "wasm32")]
pub mod browser;
pub mod comparison;
pub mod contender;
pub mod failure;
pub mod lab;
pub mod lab_contender;
pub mod lab_recorder;
pub mod lanes;
pub mod ledger;
pub mod messages;
pub mod recorder;
pub mod sampler;
pub mod sdk;
pub mod setup;
pub mod simulated;
pub mod sweep;
pub mod watcher;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::LockGrant;
use lock_wasm::clock::Clock;
use lock_wasm::spawn::Spawner;
use lock_wasm::transport::{SessionRef, Transport, TransportExt};
use lock_wasm::LockHandle;

use crate::model::config::ExperimentConfig;
use crate::model::coverage::count_missed;
use crate::model::record::{OpenSession, RunRecord};

use ledger::Ledger;
use recorder::Recorder;

/// Per-request timeout of every call the dashboard makes, the experiments' one
/// (ASSUMPTION: 5 s, see `lock_lab::comparison`).
pub use lock_lab::comparison::REQUEST_TIMEOUT;

/// How often a cancelled run notices (ms of latency on the Cancel button).
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Everything a run talks to.
#[derive(Clone)]
pub struct Env {
    /// L1–L7.
    pub transport: Arc<dyn Transport>,
    /// Time: stamps, sleeps, holds.
    pub clock: Arc<dyn Clock>,
    /// Runs the SDK sessions' heartbeat tasks.
    pub spawner: Arc<dyn Spawner>,
    /// The fenced demo ledger.
    pub ledger: Rc<dyn Ledger>,
}

/// A grant a contender holds.
pub struct Held {
    /// The grant, in wire shape.
    pub grant: LockGrant,
    /// L4 calls it took.
    pub attempts: u32,
    /// The SDK's handle, when the SDK's loop got it (full jitter).
    pub handle: Option<LockHandle>,
}

/// A cancel switch shared by the Cancel button and the run.
#[derive(Clone, Default)]
pub struct CancelFlag(Rc<Cell<bool>>);

impl CancelFlag {
    /// Asks the run to stop.
    pub fn cancel(&self) {
        self.0.set(true);
    }

    /// Whether it was asked to.
    pub fn is_cancelled(&self) -> bool {
        self.0.get()
    }

    /// Completes once cancelled (polled on the clock).
    pub(crate) async fn wait(&self, clock: &dyn Clock) {
        while !self.is_cancelled() {
            clock.sleep(CANCEL_POLL).await;
        }
    }
}

/// Starts a run: the record the UI watches, filled in by [`run_experiment`].
pub fn start_recorder(env: &Env, run_id: &str, config: &ExperimentConfig) -> Recorder {
    let mut record = RunRecord::new(run_id, config.clone());
    record.sessions = vec![OpenSession::default(); config.sessions as usize];
    Recorder::new(record, env.clock.clone())
}

/// Runs one experiment to completion (or cancellation) and stamps its duration (the
/// contenders', or until cancelled) and what sampling missed.
pub async fn run_experiment(env: &Env, recorder: &Recorder, cancel: &CancelFlag) {
    let config = recorder.lock().config.clone();
    let run_id = recorder.lock().run_id.clone();
    let contenders = futures::future::join_all(
        (0..config.sessions).map(|i| contender::run(env, recorder, &config, &run_id, i, cancel)),
    );
    // The sampler and the watchers run until the contenders are done; they never end on
    // their own. Then the watchers alone go on until their streams showed the last releases
    // (the run's time and L7's view end with the contenders).
    let sampled = select(
        Box::pin(contenders),
        Box::pin(sampler::sample_forever(env, recorder, &config, &run_id)),
    );
    let work = async {
        let mut watchers = Box::pin(watcher::watch_forever(env, recorder, &config, &run_id));
        select(sampled, watchers.as_mut()).await;
        let done = recorder.elapsed_millis();
        recorder.lock().completed_millis = Some(done);
        if config.watch_events {
            select(watchers, Box::pin(watcher::settle(env, recorder))).await;
        }
    };
    if let Either::Right(_) =
        select(Box::pin(work), Box::pin(cancel.wait(env.clock.as_ref()))).await
    {
        close_sessions(env, recorder).await;
    }
    // Also when the contenders noticed the flag first and wound down on their own.
    if cancel.is_cancelled() {
        recorder.note_error("cancelled");
    }
    let elapsed = recorder.elapsed_millis();
    let mut record = recorder.lock();
    record.completed_millis.get_or_insert(elapsed);
    count_missed(&mut record);
}

/// Closes every session of a cancelled run (L3), so its locks go now rather than at TTL.
async fn close_sessions(env: &Env, recorder: &Recorder) {
    let sessions = recorder.lock().sessions.clone();
    let closes = sessions.iter().filter(|s| !s.id.is_empty()).map(|s| {
        let session = SessionRef {
            id: &s.id,
            holder_id: &s.holder_id,
        };
        env.transport.close_session(session, REQUEST_TIMEOUT)
    });
    futures::future::join_all(closes).await;
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
