//! The quick before/after check while profiling: lock-server against the trivial handler
//! only, at the given client counts, printed and never written.

use std::time::Duration;

use super::interleaved::print_window;
use super::server::SYSTEMS;
use super::Settings;
use crate::cycles::{drive, warm_up, Run, Target};
use crate::systems;

/// Runs lock-server and the trivial handler at each of `clients`, `--rounds` times, and
/// prints every window and the throughput ratios.
pub fn run(settings: &Settings, clients: &[usize]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = systems::runtime("lock-server");
    let trivial_rt = systems::runtime("trivial");
    let client_rt = systems::runtime("client");
    let targets = [
        Target::http(systems::start_lock_server(&server_rt, dir.path())),
        Target::http(systems::start_trivial(&trivial_rt)),
    ];
    client_rt.block_on(warm_up(&targets, 10));
    let window = Duration::from_secs(settings.seconds);
    for &c in clients {
        let mut ratios = Vec::new();
        for round in 0..settings.rounds {
            let runs: Vec<Run> = targets
                .iter()
                .map(|t| client_rt.block_on(drive(t, c, window)))
                .collect();
            for (name, run) in SYSTEMS.iter().zip(&runs) {
                print_window(c, round, name, run);
            }
            ratios.push(runs[0].throughput() / runs[1].throughput());
        }
        ratios.sort_by(f64::total_cmp);
        println!("c={c:<3} lock-server / trivial: {ratios:.2?}");
    }
}
