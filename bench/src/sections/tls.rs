//! lock-server over TLS, HTTP/2 and HTTP/1.1, against the same server over plain HTTP/1.1,
//! at 1, 10 and 50 clients (target: TLS HTTP/2 ≥ 0.8× plain throughput at 50 clients).

use super::interleaved::{self, Figure, Results};
use super::{Context, Measured, Section};
use crate::cycles::Target;
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: "TLS and HTTP/2 vs plain HTTP/1.1",
    measure,
};

/// The transports of the section, in table order; plain HTTP/1.1 first (the ratio base).
const TRANSPORTS: [(&str, bool, reqwest::Version); 3] = [
    ("plain HTTP/1.1", false, reqwest::Version::HTTP_11),
    ("TLS, HTTP/1.1", true, reqwest::Version::HTTP_11),
    ("TLS, HTTP/2", true, reqwest::Version::HTTP_2),
];
/// Index into `TRANSPORTS` of the one with a target.
const HTTP2: usize = 2;

fn measure(ctx: &Context) -> Measured {
    let (plain_dir, tls_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let plain_rt = systems::runtime("plain");
    let tls_rt = systems::runtime("tls");
    let client_rt = systems::runtime("client");
    let plain = systems::start_lock_server(&plain_rt, plain_dir.path());
    let (tls, ca) = systems::start_lock_server_tls(&tls_rt, tls_dir.path());
    let targets: Vec<Target> = TRANSPORTS
        .iter()
        .map(|(_, over_tls, version)| match over_tls {
            false => Target::http(plain),
            true => Target::https(tls, &ca, *version),
        })
        .collect();
    for (target, (name, _, version)) in targets.iter().zip(TRANSPORTS) {
        let got = client_rt.block_on(target.http_version());
        assert_eq!(got, Some(version), "{name}: negotiated {got:?}");
    }
    let settings = &ctx.settings;
    println!(
        "\n# TLS and HTTP/2 vs plain HTTP/1.1: {} s windows, {} interleaved rounds",
        settings.seconds, settings.rounds
    );
    let results = interleaved::measure(settings, &client_rt, &targets, &names());
    let table = table(&results);
    println!("{table}");
    drop((plain_rt, tls_rt));
    Measured {
        body: body(ctx, &table),
        rows: vec![row(&results)],
    }
}

/// A row per client count and transport, with its ratios to plain HTTP/1.1.
fn table(results: &Results) -> String {
    interleaved::table(
        "| clients | transport | cycles/s | acquire p50 ms | acquire p99 ms | cycles/s ÷ plain | p99 ÷ plain |\n|---|---|---|---|---|---|---|\n",
        &names(),
        results,
        &[Figure::Throughput, Figure::P99],
    )
}

fn names() -> [&'static str; 3] {
    TRANSPORTS.map(|(name, ..)| name)
}

/// The target: TLS HTTP/2 at 50 clients against plain HTTP/1.1.
fn row(results: &Results) -> SummaryRow {
    let c = 50;
    let (h2, base) = (&results[&(c, HTTP2)], &results[&(c, 0)]);
    let ratio = h2.median(Figure::Throughput) / base.median(Figure::Throughput);
    SummaryRow::new(
        format!("TLS HTTP/2 ≥ 0.8× plain HTTP/1.1 cycles/s, {c} clients"),
        format!(
            "{ratio:.2}× (acquire p99 {})",
            h2.ratio_to(base, Figure::P99)
        ),
        yes(ratio >= 0.8),
    )
}

fn body(ctx: &Context, table: &str) -> String {
    format!(
        "Command: `scripts/bench.sh` (or `bench tls`, release build). Machine: {}. Two \
         lock-servers, each in process on its own 2-worker runtime with its own SQLite store \
         in a temp dir, the same build and configuration, one serving plain HTTP and one TLS \
         (rustls, ring; the self-signed certificate of `--tls-self-signed`, ECDSA P-256; ALPN \
         `h2` and `http/1.1` on one port). Clients on a third 2-worker runtime, reqwest with \
         rustls: over HTTP/1.1 a pool of one connection per concurrent client, over HTTP/2 \
         one connection every client multiplexes over (as a browser does, or one SDK client \
         shared by many tasks); each bench run checks the negotiated version. One cycle = L4 \
         + L6 of the client's own key after one L1 (no contention), closed loop; latency = \
         the L4 step. Connections are set up before a window starts (handshakes are not in \
         the figures). Interleaved {} s windows, {} rounds per client count; each cell is the \
         median of the rounds with (min–max).\n\n{table}",
        ctx.machine, ctx.settings.seconds, ctx.settings.rounds
    )
}
