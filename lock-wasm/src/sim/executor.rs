//! A deterministic single-threaded executor over a [`ManualClock`]: runs every runnable task
//! in wake order, and when nothing is runnable jumps the clock to the next timer. Tasks
//! belong to groups (one per simulated client process) that can be paused, like SIGSTOP:
//! a paused group's tasks are not polled until the pause ends, while time goes on.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::spawn::{BoxFuture, MaybeSend, Spawner};

/// The executor. Cheap to clone; clones share the task set.
#[derive(Clone)]
pub struct SimExecutor {
    clock: ManualClock,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    queue: Arc<Mutex<VecDeque<usize>>>,
    tasks: Mutex<Vec<Option<Slot>>>,
    /// group → paused until (exclusive).
    pauses: Mutex<BTreeMap<usize, Duration>>,
    /// Woken tasks of paused groups, run when the pause ends.
    deferred: Mutex<Vec<usize>>,
}

struct Slot {
    fut: Option<BoxFuture<'static, ()>>,
    group: usize,
}

struct TaskWaker {
    id: usize,
    queue: Arc<Mutex<VecDeque<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.queue.lock().unwrap().push_back(self.id);
    }
}

impl SimExecutor {
    /// An executor driving `clock`.
    pub fn new(clock: ManualClock) -> Self {
        SimExecutor {
            clock,
            shared: Arc::default(),
        }
    }

    /// The simulated clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Adds a task to `group` (group 0 is never paused by convention: the harness).
    pub fn spawn_in(&self, group: usize, fut: impl Future<Output = ()> + MaybeSend + 'static) {
        self.spawn_boxed(group, Box::pin(fut));
    }

    fn spawn_boxed(&self, group: usize, fut: BoxFuture<'static, ()>) {
        let id = {
            let mut tasks = self.shared.tasks.lock().unwrap();
            tasks.push(Some(Slot {
                fut: Some(fut),
                group,
            }));
            tasks.len() - 1
        };
        self.shared.queue.lock().unwrap().push_back(id);
    }

    /// A [`Spawner`] putting tasks in `group`.
    pub fn spawner(&self, group: usize) -> Arc<dyn Spawner> {
        Arc::new(GroupSpawner {
            exec: self.clone(),
            group,
        })
    }

    /// Stops polling `group` until `until` on the clock.
    pub fn pause(&self, group: usize, until: Duration) {
        let mut pauses = self.shared.pauses.lock().unwrap();
        let end = pauses.entry(group).or_default();
        *end = (*end).max(until);
    }

    fn paused(&self, group: usize) -> bool {
        let now = self.clock.now();
        self.shared
            .pauses
            .lock()
            .unwrap()
            .get(&group)
            .is_some_and(|until| *until > now)
    }

    /// Runs until `done()` holds, calling `step()` after every poll. Fails if nothing can run
    /// and no timer is pending (a deadlock) or the clock passes `limit`.
    pub fn run_until(
        &self,
        limit: Duration,
        mut done: impl FnMut() -> bool,
        mut step: impl FnMut(),
    ) -> Result<(), String> {
        loop {
            while let Some(id) = self.next_task() {
                self.poll_task(id);
                step();
                if done() {
                    return Ok(());
                }
            }
            if done() {
                return Ok(());
            }
            let Some(next) = self.next_event() else {
                return Err("deadlock: no runnable task and no pending timer".into());
            };
            if next > limit {
                return Err(format!("simulation passed its time limit {limit:?}"));
            }
            self.clock.advance_to(next);
            self.resume_deferred();
        }
    }

    fn next_task(&self) -> Option<usize> {
        loop {
            let id = self.shared.queue.lock().unwrap().pop_front()?;
            let group = match &self.shared.tasks.lock().unwrap()[id] {
                Some(slot) => slot.group,
                None => continue, // finished; a stale wake
            };
            if self.paused(group) {
                self.shared.deferred.lock().unwrap().push(id);
                continue;
            }
            return Some(id);
        }
    }

    fn poll_task(&self, id: usize) {
        // Take the future out so the task may spawn others while it is polled.
        let Some(mut fut) = self.shared.tasks.lock().unwrap()[id]
            .as_mut()
            .and_then(|slot| slot.fut.take())
        else {
            return; // being polled already (re-entrant wake) or finished
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            queue: self.shared.queue.clone(),
        }));
        let done = fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
        let mut tasks = self.shared.tasks.lock().unwrap();
        if done {
            tasks[id] = None;
        } else if let Some(slot) = tasks[id].as_mut() {
            slot.fut = Some(fut);
        }
    }

    /// The next instant something can happen: a timer or the end of a pause.
    fn next_event(&self) -> Option<Duration> {
        let now = self.clock.now();
        let pause_end = self
            .shared
            .pauses
            .lock()
            .unwrap()
            .values()
            .copied()
            .filter(|until| *until > now)
            .min();
        match (self.clock.next_timer(), pause_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn resume_deferred(&self) {
        let deferred = std::mem::take(&mut *self.shared.deferred.lock().unwrap());
        let mut queue = self.shared.queue.lock().unwrap();
        queue.extend(deferred); // still-paused ones are deferred again by next_task
    }
}

struct GroupSpawner {
    exec: SimExecutor,
    group: usize,
}

impl Spawner for GroupSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.exec.spawn_boxed(self.group, task);
    }
}

/// Runs one future to completion on a fresh executor over `clock` (for unit tests): time
/// jumps whenever everything waits. Panics on deadlock or after an hour of simulated time.
pub fn run<T: MaybeSend + 'static>(
    clock: &ManualClock,
    fut: impl Future<Output = T> + MaybeSend + 'static,
) -> T {
    run_with(&SimExecutor::new(clock.clone()), fut)
}

/// [`run`] on a given executor (use its [`SimExecutor::spawner`] for the client).
pub fn run_with<T: MaybeSend + 'static>(
    exec: &SimExecutor,
    fut: impl Future<Output = T> + MaybeSend + 'static,
) -> T {
    let out = Arc::new(Mutex::new(None));
    let slot = out.clone();
    exec.spawn_in(0, async move {
        let value = fut.await;
        *slot.lock().unwrap() = Some(value);
    });
    exec.run_until(
        Duration::from_secs(3_600),
        || out.lock().unwrap().is_some(),
        || {},
    )
    .unwrap();
    let value = out.lock().unwrap().take().unwrap();
    value
}
