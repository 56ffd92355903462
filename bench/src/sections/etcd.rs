//! An etcd-backend replica against raw etcd at 1, 4 and 16 clients: what the lock-server
//! layer costs over the engine it stores in (target: ≥ 0.8×), split into transaction shape
//! and HTTP hop.

use std::fmt::Write;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::{Context, Measured, Section};
use crate::cycles::{drive, warm_up, EtcdShape, Target};
use crate::stats::{quantile, Spread};
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: "etcd backend",
    measure,
};

/// The client counts measured.
const CLIENTS: [usize; 3] = [1, 4, 16];
/// The targets, in the order of [`Throughputs`].
const NAMES: [&str; 4] = [
    "raw etcd",
    "raw, replica's txns",
    "thin proxy",
    "via replica",
];

/// Each target's cycles/s over the rounds: raw etcd, raw with the replica's transactions,
/// the thin HTTP proxy, via the replica.
type Throughputs = [Spread; 4];

fn measure(ctx: &Context) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = systems::runtime("lock-server");
    let proxy_rt = systems::runtime("proxy");
    let client_rt = systems::runtime("client");
    let etcd = systems::start_etcd();
    let replica = systems::start_lock_server_on_etcd(&server_rt, dir.path(), etcd.addr);
    let targets = [
        client_rt.block_on(Target::etcd(etcd.addr, EtcdShape::Minimal)),
        client_rt.block_on(Target::etcd(etcd.addr, EtcdShape::Replica)),
        Target::http(systems::start_etcd_proxy(&proxy_rt, etcd.addr)),
        Target::http(replica),
    ];
    let settings = &ctx.settings;
    println!(
        "\n# etcd backend: replica vs raw etcd, {} s windows, {} interleaved rounds",
        settings.seconds, settings.rounds
    );
    client_rt.block_on(warm_up(&targets, 4));
    let (mut rows, mut summary) = (String::new(), Vec::new());
    for c in CLIENTS {
        let throughputs = rounds(ctx, &client_rt, &targets, c);
        rows.push_str(&table_row(c, &throughputs));
        summary.push(summary_row(c, &throughputs));
    }
    let table = format!(
        "| clients | raw etcd cycles/s | raw, replica's txns | thin HTTP proxy | via lock-server | via ÷ raw | replica's txns ÷ raw | proxy ÷ raw | via ÷ proxy |\n|---|---|---|---|---|---|---|---|---|\n{rows}"
    );
    println!("{table}");
    Measured {
        body: body(ctx, &table),
        rows: summary,
    }
}

/// Every target driven by `clients` clients for `--rounds` interleaved windows.
fn rounds(ctx: &Context, client_rt: &Runtime, targets: &[Target], clients: usize) -> Throughputs {
    let window = Duration::from_secs(ctx.settings.seconds);
    let mut cycles: [Vec<f64>; 4] = Default::default();
    for round in 0..ctx.settings.rounds {
        let mut line = format!("c={clients:<3} round {round}");
        for (i, t) in targets.iter().enumerate() {
            let run = client_rt.block_on(drive(t, clients, window));
            let p50 = quantile(&run.latencies_ms, 0.5).unwrap_or(0.0);
            let _ = write!(
                line,
                "  {}: {:.0}/s (acquire p50 {p50:.2} ms)",
                NAMES[i],
                run.throughput()
            );
            cycles[i].push(run.throughput());
        }
        println!("{line}");
    }
    cycles.map(|c| Spread::of(&c))
}

/// Via the replica against raw etcd.
fn via_over_raw([raw, _, _, via]: &Throughputs) -> f64 {
    via.median / raw.median
}

fn table_row(c: usize, throughputs: &Throughputs) -> String {
    let [raw, shaped, proxy, via] = throughputs;
    format!(
        "| {c} | {} | {} | {} | {} | **{:.2}×** | {:.2}× | {:.2}× | {:.2}× |\n",
        raw.show(0),
        shaped.show(0),
        proxy.show(0),
        via.show(0),
        via_over_raw(throughputs),
        shaped.median / raw.median,
        proxy.median / raw.median,
        via.median / proxy.median,
    )
}

fn summary_row(c: usize, throughputs: &Throughputs) -> SummaryRow {
    let [raw, _, proxy, _] = throughputs;
    let ratio = via_over_raw(throughputs);
    SummaryRow::new(
        format!("etcd backend ≥ 0.8× raw etcd txn cycles, {c} clients"),
        format!(
            "{ratio:.2}× (thin HTTP proxy over etcd: {:.2}×)",
            proxy.median / raw.median
        ),
        yes(ratio >= 0.8),
    )
}

fn body(ctx: &Context, table: &str) -> String {
    format!(
        "Command: `scripts/bench.sh` (or `bench etcd`, release build). Machine: {}. \
         One lock-server replica on the etcd backend, in process on its own 2-worker runtime, \
         against a single-node etcd 3.4 (Debian) with its data dir on the real disk (the system \
         temp dir), started for the bench only. One cycle: through the replica, L4 + L6 over \
         HTTP/1.1 (each client its own session and key); raw etcd, the least a lock needs (a \
         txn putting the key with a lease if absent, a txn deleting it if its create revision \
         is still ours) through etcd-client 0.21, from the bench process; raw with the \
         replica's txns, the very transactions a replica sends for an uncontended L4 and L6 \
         (session compare, lock and index puts, compare-and-delete of both), one by one; thin \
         HTTP proxy, an axum handler on the same accept loop and its own 2-worker runtime that \
         turns L4 and L6 into the raw etcd transactions and does nothing else: the ceiling for \
         any HTTP service in front of etcd on this machine. Interleaved {} s windows, {} \
         rounds; each cell median (min–max).\n\n{table}",
        ctx.machine, ctx.settings.seconds, ctx.settings.rounds
    )
}
