//! Brooker's sweep against the live server ([`crate::live_sweep`]): L4 calls per grant and
//! completion time per strategy and N, and the SDK's own loop at N = 50 under other
//! settings.

use std::fmt::Write;
use std::time::Instant;

use lock_lab::chart::Titles;
use lock_lab::strategy::Strategy;
use tokio::runtime::Runtime;

use super::strategies::{self, Medians, Samples};
use super::{Context, Measured, Section};
use crate::figures::STRATEGIES;
use crate::live_sweep;
use crate::stats::Spread;
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section's title in the doc.
pub const TITLE: &str = "Backoff strategies (live server)";

/// The section, as the full run measures it.
pub const SECTION: Section = Section {
    title: TITLE,
    measure,
};

fn measure(ctx: &Context) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = systems::runtime("lock-server");
    let client_rt = systems::runtime("client");
    let addr = systems::start_lock_server(&server_rt, dir.path());
    let base = format!("http://{addr}");
    let settings = &ctx.settings;
    println!(
        "\n# Live sweep against lock-server, {} rounds",
        settings.sweep_rounds
    );
    let started = Instant::now();
    let (calls, time) = sample(
        &client_rt,
        &base,
        &settings.sweep_n,
        settings.sweep_rounds,
        "sweep",
    );
    let took = started.elapsed().as_secs_f64();
    let sdk = sdk_settings(ctx, &client_rt, &base);
    drop(server_rt);
    let swept = render(ctx, &ctx.machine, Some(took), &calls, &time);
    Measured {
        body: swept.body + &sdk.body,
        rows: [sdk.rows, swept.rows].concat(),
    }
}

/// Every strategy at every N of `ns`, `rounds` times, interleaved per N, each point on a
/// fresh key named after `prefix`: the L4 calls per grant and completion times, ms.
pub fn sample(
    client_rt: &Runtime,
    base_url: &str,
    ns: &[usize],
    rounds: usize,
    prefix: &str,
) -> (Samples, Samples) {
    let (mut calls, mut time) = (Samples::new(), Samples::new());
    let points = ns
        .iter()
        .flat_map(|n| (0..rounds).flat_map(move |r| STRATEGIES.map(|s| (*n, r, s))));
    for (key, (n, round, s)) in points.enumerate() {
        let key = format!("{prefix}-{key}");
        let p = client_rt.block_on(live_sweep::run_point(base_url, n, s, &key));
        println!(
            "N={n:<3} round {round} {:<24} {:>6.2} calls/grant  {:>8.0} ms",
            s.label(),
            p.calls_per_grant,
            p.completion_ms
        );
        calls.entry((s, n)).or_default().push(p.calls_per_grant);
        time.entry((s, n)).or_default().push(p.completion_ms);
    }
    (calls, time)
}

/// The SDK's own loop at N = 50 with Brooker's base, with its shipped default base, and with
/// server-side waiting: what a user tuning for a hot key would try.
fn sdk_settings(ctx: &Context, client_rt: &Runtime, base_url: &str) -> Measured {
    const N: usize = 50;
    let rounds = ctx.settings.sweep_rounds;
    let sdk_default = lock_wasm::PolicySettings::default();
    let configs = [
        ("base 5 ms (Brooker), waitMillis 0", live_sweep::BROOKER_SDK),
        (
            "base 50 ms (SDK default), waitMillis 0 (SDK default)",
            live_sweep::SdkSettings {
                base: sdk_default.base_backoff,
                wait_millis: sdk_default.wait_millis,
            },
        ),
        (
            "base 50 ms, waitMillis 1000 (server-side waiting)",
            live_sweep::SdkSettings {
                base: sdk_default.base_backoff,
                wait_millis: 1_000,
            },
        ),
    ];
    let mut table = String::new();
    let mut rows = Vec::new();
    for (i, (name, sdk)) in configs.iter().enumerate() {
        let (mut calls, mut time) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let key = format!("settings-{i}-{round}");
            let p = client_rt.block_on(live_sweep::run_point_with(
                base_url,
                N,
                Strategy::FullJitter,
                &key,
                *sdk,
            ));
            println!(
                "SDK N={N} round {round} {name:<52} {:>6.2} calls/grant  {:>8.0} ms",
                p.calls_per_grant, p.completion_ms
            );
            calls.push(p.calls_per_grant);
            time.push(p.completion_ms);
        }
        let (c, t) = (Spread::of(&calls), Spread::of(&time));
        let _ = writeln!(table, "| {name} | {} | {} |", c.show(2), t.show(0));
        if i > 0 {
            rows.push(SummaryRow::new(
                format!("live, N = 50: ≤ 3 L4 calls per grant, SDK {name}"),
                format!("{:.2}", c.median),
                yes(c.median <= 3.0),
            ));
        }
    }
    let body = format!(
        "\nThe SDK's own loop at N = {N} under other settings (same server, same run, {rounds} rounds; \
         median (min–max)). `waitMillis` > 0 makes each L4 wait server-side, up to that long, \
         for the key to be released instead of answering 409 at once (64 waiters per key, \
         then 429):\n\n| SDK settings | L4 calls per grant | completion ms |\n|---|---|---|\n{table}"
    );
    Measured { body, rows }
}

/// The section from the sweep's samples, measured on `machine` in `took` seconds (`None`:
/// re-rendered from a saved run).
pub fn render(
    ctx: &Context,
    machine: &str,
    took: Option<f64>,
    calls: &Samples,
    time: &Samples,
) -> Measured {
    let (calls, time) = (strategies::spreads(calls), strategies::spreads(time));
    // The Ns actually measured (a re-render may use a different `--sweep-n` than the run).
    let mut ns: Vec<usize> = calls.keys().map(|(_, n)| *n).collect();
    ns.sort_unstable();
    ns.dedup();
    let mut out = intro(ctx, machine, took);
    out.push_str("L4 calls per grant:\n\n");
    strategies::table(&mut out, "contenders", &ns, &calls, 2);
    out.push_str("\nCompletion time, ms (until the last contender released):\n\n");
    strategies::table(&mut out, "contenders", &ns, &time, 0);
    out.push('\n');
    let (c, t) = (strategies::medians(&calls), strategies::medians(&time));
    out.push_str(&charts(ctx, &c, &t, &ns));
    out.push('\n');
    let rows = match targets_met(&c, &t) {
        Some((text, rows)) => {
            out.push_str(&text);
            rows
        }
        None => Vec::new(),
    };
    println!("{out}");
    Measured { body: out, rows }
}

fn intro(ctx: &Context, machine: &str, took: Option<f64>) -> String {
    let took_text = match took {
        Some(took) => format!("{took:.0} s in total"),
        None => "Re-rendered from the run's printed rounds (`bench sweep-log`)".to_owned(),
    };
    format!(
        "Command: `scripts/bench.sh` (or `bench sweep`, release build). Machine: {machine}; other \
         builds may have been loading the machine. {took_text}. N contenders start together \
         (a barrier after each opened its session), each acquires the same key once and \
         releases it at once (ASSUMPTION: hold ≈ one round trip, the lock analogue of \
         Brooker's single-row write), against lock-server (release build, SQLite store, \
         in-process on its own 2-worker runtime, `waitMillis` 0). Base 5 ms, cap 2 s, budget \
         120 s per acquire (ASSUMPTION: generous so every strategy finishes; the SDK default \
         is 10 s). Full jitter = the SDK itself (`LockClientSession::acquire`, the production \
         loop, `LockClient` over the SDK's `HttpTransport`); the other strategies = the \
         comparison loop of the experiments library (`lab/src/comparison.rs`: the SDK's loop \
         shape, another delay rule) over the same `HttpTransport`, retry n using window \
         `base·2^(n−1)` like the SDK. L4 calls counted at the transport. \
         Strategies ran interleaved per N; each cell is the median of {} rounds with \
         (min–max). Note: base 5 ms is Brooker's parameter, not the SDK default (50 ms).\n\n",
        ctx.settings.sweep_rounds
    )
}

/// The calls and completion-time figures, each linked on its own line.
fn charts(ctx: &Context, calls: &Medians, time: &Medians, ns: &[usize]) -> String {
    let calls = strategies::chart(
        &ctx.output,
        "live-calls.svg",
        "live L4 calls per grant vs N",
        Titles::new(
            "Live server: L4 calls per grant vs contenders",
            "contenders (N)",
            "calls per grant",
        ),
        calls,
        ns,
    );
    let time = strategies::chart(
        &ctx.output,
        "live-time.svg",
        "live completion time vs N",
        Titles::new(
            "Live server: completion time vs contenders",
            "contenders (N)",
            "ms",
        ),
        time,
        ns,
    );
    format!("{calls}\n{time}")
}

/// The targets at N = 50 as text, and their summary rows; `None` if N = 50 was not swept.
fn targets_met(c: &Medians, t: &Medians) -> Option<(String, Vec<SummaryRow>)> {
    let n = 50;
    let (fc, nc) = (
        c.get(&(Strategy::FullJitter, n))?,
        c.get(&(Strategy::NoJitter, n))?,
    );
    let (ft, nt) = (
        t.get(&(Strategy::FullJitter, n))?,
        t.get(&(Strategy::NoJitter, n))?,
    );
    let r = fc / nc;
    let text = format!(
        "\nTargets at N = 50: full jitter ÷ no-jitter calls = {r:.2} (target ≤ 0.5: {}); \
         completion {ft:.0} ms vs {nt:.0} ms (target: no worse: {}); {fc:.2} calls per grant \
         (target ≤ 3: {}).\n",
        yes(r <= 0.5),
        yes(ft <= nt),
        yes(*fc <= 3.0)
    );
    let rows = vec![
        SummaryRow::new(
            "live, N = 50: full jitter ≤ 0.5× no-jitter L4 calls",
            format!("{r:.2}× ({fc:.2} vs {nc:.2} per grant)"),
            yes(r <= 0.5),
        ),
        SummaryRow::new(
            "live, N = 50: full jitter completion no worse than no jitter",
            format!("{ft:.0} ms vs {nt:.0} ms"),
            yes(ft <= nt),
        ),
        SummaryRow::new(
            "live, N = 50: ≤ 3 L4 calls per grant (full jitter)",
            format!("{fc:.2}"),
            yes(*fc <= 3.0),
        ),
    ];
    Some((text, rows))
}
