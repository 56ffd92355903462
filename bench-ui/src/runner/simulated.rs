//! The sweep in the SDK's seeded simulation, in the experiment engine: the very experiments
//! the live sweep runs (`run_experiment`: contenders, the SDK's acquire, the comparison loop,
//! the L7 sampler) against the SDK's modelled lock-server (`lock_wasm::sim`, its wait queue
//! included) behind a modelled network, on simulated time. No server and no browser
//! connection limit: what the strategies do in theory, beside what the live server did.
//!
//! Each point gets a fresh world (clock, server, network) seeded from the point, and is run
//! to the end by a local executor that jumps the clock to the next timer whenever every task
//! waits: a point costs CPU, not its simulated duration.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use lock_wasm::sim::{Faults, Network, SimService, SimTransport};
use lock_wasm::spawn::{BoxFuture, Spawner};
use lock_wasm::ManualClock;

use crate::model::config::ExperimentConfig;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepPoint, SweepResult};

use super::ledger::MemoryLedger;
use super::{run_experiment, start_recorder, CancelFlag, Env};

/// The modelled network: a 0–1 ms hop each way, nothing lost (ASSUMPTION: loopback, as the
/// live sweep's server on the same machine).
pub const NETWORK: Network = Network {
    delay_millis: (0, 1),
    loss: 0.0,
};

/// Simulated time after which a point is abandoned (far beyond any sweep's budget).
const GIVE_UP_AFTER: Duration = Duration::from_secs(3_600);

/// Collects the SDK's background tasks (heartbeats) for the point's executor, which takes
/// them in before it runs again (the SDK's seam must be `Send` natively; the pool is not).
#[derive(Default)]
pub(crate) struct Spawned(Mutex<Vec<BoxFuture<'static, ()>>>);

impl Spawner for Spawned {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(task);
    }
}

impl Spawned {
    /// Moves the tasks spawned since the last call into `pool`; whether there were any.
    fn hand_to(&self, pool: &LocalPool) -> bool {
        let tasks = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        let any = !tasks.is_empty();
        for task in tasks {
            // Spawning fails only on a pool being dropped: the point is over then.
            let _ = pool.spawner().spawn_local(task);
        }
        any
    }
}

/// A fresh simulated world seeded with `seed`: the seams of a run against the SDK's
/// modelled lock-server, its clock, and the SDK's background tasks waiting to be run.
pub(crate) fn world(seed: u64) -> (Env, ManualClock, Arc<Spawned>) {
    let clock = ManualClock::new();
    let service = SimService::new(clock.clone(), Faults::default());
    // The SDK's seams are `Arc`s; on wasm32 nothing is `Send` and needs not be (one thread).
    #[allow(clippy::arc_with_non_send_sync)]
    let spawned = Arc::new(Spawned::default());
    let env = Env {
        transport: Arc::new(SimTransport::new(service, NETWORK, seed)),
        clock: Arc::new(clock.clone()),
        spawner: spawned.clone(),
        ledger: Rc::new(MemoryLedger::default()),
    };
    (env, clock, spawned)
}

/// Runs `work` in the world to its end, jumping the clock to the next timer whenever every
/// task waits; `false` if it stalled (nothing to run, no timer) or ran past
/// [`GIVE_UP_AFTER`].
pub(crate) fn drive(
    clock: &ManualClock,
    spawned: &Spawned,
    work: impl std::future::Future<Output = ()> + 'static,
) -> bool {
    let mut pool = LocalPool::new();
    let done = Rc::new(Cell::new(false));
    {
        let done = done.clone();
        // A fresh pool always accepts a task.
        let _ = pool.spawner().spawn_local(async move {
            work.await;
            done.set(true);
        });
    }
    loop {
        pool.run_until_stalled();
        if done.get() {
            return true;
        }
        if spawned.hand_to(&pool) {
            continue;
        }
        if lock_wasm::Clock::now(clock) > GIVE_UP_AFTER || !clock.advance_to_next_timer() {
            return false;
        }
    }
}

/// Runs one experiment in a fresh simulated world seeded with `seed`; the record as the live
/// runner would have filled it, its times in simulated milliseconds.
pub fn simulate(config: &ExperimentConfig, run_id: &str, seed: u64) -> RunRecord {
    let (env, clock, spawned) = world(seed);
    let recorder = start_recorder(&env, run_id, config);
    let run = {
        let recorder = recorder.clone();
        async move { run_experiment(&env, &recorder, &CancelFlag::default()).await }
    };
    if !drive(&clock, &spawned, run) {
        recorder.note_error("the simulation stalled");
    }
    recorder.snapshot()
}

/// Runs every point of `config` in the simulation, appending to `result` as it goes;
/// `between` runs after each point (the page yields to the browser there, so the page stays
/// responsive and the chart fills in).
pub async fn simulate_sweep<F, Fut>(
    config: &SweepConfig,
    run_id: &str,
    result: &RefCell<SweepResult>,
    mut between: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    *result.borrow_mut() = SweepResult {
        config: Some(config.clone()),
        ..Default::default()
    };
    for (i, (n, strategy)) in config.runs().into_iter().enumerate() {
        let experiment = config.experiment(n, strategy, i);
        let record = simulate(&experiment, &format!("{run_id}-sim-{i}"), experiment.seed);
        result
            .borrow_mut()
            .points
            .push(SweepPoint::of(strategy, n, &record));
        between().await;
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use lock_lab::strategy::Strategy;

    fn point(strategy: Strategy, sessions: u32) -> RunRecord {
        let config = ExperimentConfig {
            sessions,
            rounds: 2,
            hold_millis: 5,
            strategy,
            ..ExperimentConfig::default()
        };
        simulate(&config, "t", 7)
    }

    #[test]
    fn the_queue_serves_everyone_with_one_call_each_in_the_simulation() {
        let record = point(Strategy::ServerQueue, 20);
        let c = record.counters;
        assert_eq!((c.grants, c.l4_calls, c.errors), (40, 40, 0), "{record:?}");
        assert_eq!(c.fenced_out, 0);
        let fairness = crate::model::fairness::Fairness::build(&record);
        assert_eq!(fairness.overtakes, 0);
    }

    #[test]
    fn full_jitter_needs_more_calls_and_a_seed_replays() {
        let record = point(Strategy::FullJitter, 20);
        assert_eq!(record.counters.grants, 40, "{record:?}");
        assert!(record.counters.l4_calls > 40);
        assert_eq!(point(Strategy::FullJitter, 20), record);
    }

    #[test]
    fn a_simulated_sweep_has_a_point_per_run() {
        let config = SweepConfig {
            from: 5,
            to: 10,
            step: 5,
            ..SweepConfig::default()
        };
        let result = RefCell::new(SweepResult::default());
        // Not `block_on`: the point's own executor may not run inside another one. With
        // nothing to wait for between points, the sweep completes in one poll.
        let sweep = simulate_sweep(&config, "t", &result, || async {});
        assert!(futures::FutureExt::now_or_never(sweep).is_some());
        let result = result.into_inner();
        assert_eq!(result.points.len(), config.runs().len());
        assert!(result
            .points
            .iter()
            .all(|p| p.counters.grants == p.contenders));
    }
}
