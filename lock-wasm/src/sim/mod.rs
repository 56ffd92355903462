//! The seeded deterministic simulation: many clients with the real SDK
//! core, a modelled lock-server ([`service::SimService`]) behind a lossy network with seeded
//! delays, client process pauses (SIGSTOP-like), all on one [`ManualClock`](crate::clock::ManualClock) driven by
//! [`executor::SimExecutor`]. One seed fixes everything, so a failing seed replays exactly.
//!
//! Invariants checked after every task poll:
//! 1. never an exclusive holder beside any other holder, never more shared holders than their
//!    limit: across all clients, a key's valid (not lost) handles are one exclusive handle
//!    alone or shared ones within their limit, and every valid handle is one of the server's
//!    live holds with the same token and mode;
//! 2. every acquire terminates within its budget (plus the time its client was paused);
//! 3. no call names a session after its client declared it lost.
//!
//! And over the whole run (see `invariants`):
//! 4. a lock whose session's heartbeats are all answered (each within the renewal reserve,
//!    [`crate::renewal::RENEWAL_RESERVE`]) and whose client was never paused is neither lost
//!    at its deadline nor expires at the server while the client holds it;
//! 5. every handle whose deadline passes is reported lost — its `lost()` future completes
//!    and a `lock_lost` event carries the same reason — at the deadline, to the tick of the
//!    simulated clock (or, if its client is paused then, at the first instant it runs again);
//!    a handle reported lost for another reason was reported no later than that;
//! 6. no side effect starts after its handle was reported lost, and none outlasts the report
//!    (each worker races its side effects against `lost()`);
//! 7. the server's wait queue hands each key to its oldest live ticket (half the seeds'
//!    clients acquire with `waitMillis` > 0, drawn from a stream of their own);
//! 8. the server's own history of grants keeps invariant 1's rule at every grant, and every
//!    grant of a key, shared or exclusive, takes a token above all earlier ones of the key;
//! 9. no writer waits past the holds granted before it queued: while an exclusive request's
//!    ticket waits, no shared hold is granted to a reader that queued after it or did not
//!    queue at all (so a stream of readers never starves a writer).
//!
//! Half the seeds (a stream of their own again) add a read-write key, readers shared without
//! a limit and writers exclusive, and a semaphore key of 1–3 permits to the exclusive keys.
//!
//! Run any number of seeds: `cargo run -p lock-wasm --example simulate -- --seeds 10000`;
//! replay one with its calls traced: `SIM_TRACE=1 cargo run -p lock-wasm --example simulate
//! -- --seeds 1 --start SEED`.
//!
//! [`Injection::Chaos`] runs the same harness with injected infrastructure faults (503
//! bursts, dropped answers, delay spikes, frequent pauses; see [`injection`]): the
//! `sim-faults` command of lock-chaos.
//!
//! [`lab`] is the dashboard's fault lab on the same pieces: two contenders on one key, a
//! fault injected into the first through the SDK's [`crate::fault`] wrappers, and their
//! writes to the modelled server's fenced and unfenced ledgers ([`lab::run_lab`]).
//!
//! Layout: [`executor`] (the deterministic executor), [`service`] (the modelled server: its
//! hold rules and the history of every ticket and hold), [`network`] (its lossy network and
//! the lost-session check), [`injection`] (the fault-injecting transport),
//! [`watch`] (each L2 as its client saw it); then, each using only those before it:
//! `world` (the shared record of one run), `recorder` (each client's event sink, writing
//! into the world), `scenario` (the shape of a run drawn from its seed), `invariants` (the
//! checks over the world), `worker` (one simulated client process and its pause) and
//! `runner` (one seed wired up and run, and the seed loop).

pub mod executor;
pub mod injection;
pub mod lab;
pub mod network;
pub mod service;
pub mod watch;

mod invariants;
mod recorder;
mod runner;
mod scenario;
mod worker;
mod world;

pub use executor::{run, run_with, SimExecutor};
pub use injection::{FaultCounts, FaultInjector, FaultPlan, Injection};
pub use network::{LostSessions, Network, SimTransport};
pub use runner::{run_seed, run_seed_with, run_seeds, SimReport, SimTotals};
pub use service::{Event, Faults, History, Lapse, LiveHold, SimService, Step};
pub use watch::HeartbeatWatch;
