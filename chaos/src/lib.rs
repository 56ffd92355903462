//! Fault, abuse and load testing of the lock service: the safety claims checked
//! the way Jepsen and deterministic-simulation projects check them. Figures and commands are
//! in `docs/RELIABILITY.md`.
//!
//! Layout:
//! - [`history`]: the events every process records (grants, releases, ledger writes, L7
//!   samples, acquire start/end with budget, faults), as JSON lines with time windows.
//! - [`checker`]: verifies a merged history (no two live holders, no stale token accepted,
//!   tokens strictly increasing per key, every acquire within budget, a fenced-out holder's
//!   handle already lost).
//! - [`run`]: one chaos run (server, contenders, sampler, seeded fault schedule, checker).
//! - [`load`]: many heartbeating sessions against one server (spurious expiries, RSS).
//! - [`server`]: the run's lock-server (the shared launcher, port kept across kill -9).
//! - [`netns`]: a private network of Linux network namespaces on one bridge, with links cut
//!   and healed silently (poisoned neighbour entries; `ip` only).
//! - [`partition`]: the partition run: three etcd members and two replicas, each in its own
//!   namespace, the chaos workload through both replicas, a nemesis of link cuts and
//!   SIGSTOPs ([`partition::cluster`] starts the processes).
//! - binaries: `contender` (one OS process: acquire → ledger write → hold → release),
//!   `chaos` (server + N contenders + seeded faults + checker), `sim-faults` (10,000-seed
//!   run of the SDK's seeded simulation with injected faults, `lock_wasm::sim`),
//!   `session-load` (10,000 heartbeating sessions, RSS), `partition` (the partition run).

pub mod checker;
pub mod history;
pub mod load;
pub mod netns;
pub mod partition;
pub mod run;
pub mod server;
