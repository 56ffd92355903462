//! The dashboard's sweep in the browser (saved by `tests/browser/sweep.mjs --out`) beside
//! the native sweep at the same N, run now against a lock-server of this build. Never part
//! of the full run: its rows join the summary when it runs.

use std::fmt::Write;
use std::path::Path;

use lock_lab::strategy::Strategy;

use super::strategies::Samples;
use super::{sweep, Context, Measured};
use crate::dashboard::{self, DashboardSweep};
use crate::figures::STRATEGIES;
use crate::stats::{ratio, Spread};
use crate::summary::{yes, SummaryRow};
use crate::systems;

/// The section's title in the doc.
pub const TITLE: &str = "Backoff strategies: the dashboard over HTTP/2 vs native";

/// The native sweep's figures.
struct Native {
    calls: Samples,
    time: Samples,
}

/// Measures the native sweep at the N of the dashboard's run saved at `h2` (over HTTP/2),
/// and sets both beside the control run over HTTP/1.1 saved at `control`, if given.
pub fn measure(ctx: &Context, h2: &Path, control: Option<&Path>) -> Measured {
    let read = |path: &Path| dashboard::read(path).unwrap_or_else(|e| panic!("{e}"));
    let h2 = read(h2);
    let h1 = control.map(read);
    let ns = h2.contenders();
    let native = sample_native(ctx, &ns);
    let table = table(&ns, &h2, h1.as_ref(), &native);
    let orders = Orders::of(&ns, &h2.calls_per_grant, &native.calls);
    let offs = full_jitter_offsets(&ns, &h2.calls_per_grant, &native.calls);
    let worst = offs.iter().map(|(_, off)| off.abs()).fold(0.0, f64::max);
    let offs: Vec<String> = offs
        .iter()
        .map(|(n, off)| format!("N = {n}: {:+.0} %", off * 100.0))
        .collect();
    let rows = vec![
        SummaryRow::new(
            "dashboard over HTTP/2: the native sweep's ordering of strategies by L4 calls, every N",
            if orders.held() {
                "same at every N"
            } else {
                "differs (see section)"
            },
            yes(orders.held()),
        ),
        SummaryRow::new(
            "dashboard over HTTP/2: full jitter's L4 calls within 25 % of native, every N",
            offs.join(", "),
            yes(worst <= 0.25),
        ),
    ];
    let body = body(
        ctx,
        &h2,
        h1.as_ref(),
        &table,
        &orders.text(),
        &offs.join(", "),
    );
    Measured { body, rows }
}

/// The native sweep at `ns`, `--sweep-rounds` times, against a lock-server started for it.
fn sample_native(ctx: &Context, ns: &[usize]) -> Native {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = systems::runtime("lock-server");
    let client_rt = systems::runtime("client");
    let base = format!(
        "http://{}",
        systems::start_lock_server(&server_rt, dir.path())
    );
    let rounds = ctx.settings.sweep_rounds;
    println!("\n# Native sweep at the dashboard's N ({ns:?}), {rounds} rounds");
    let (calls, time) = sweep::sample(&client_rt, &base, ns, rounds, "dash");
    drop(server_rt);
    Native { calls, time }
}

/// The median of `samples` at `k`, if measured.
fn median(samples: &Samples, k: &(Strategy, usize)) -> Option<f64> {
    samples.get(k).map(|v| Spread::of(v).median)
}

/// `median (min–max)` of `samples` at `k` with `decimals` places, `–` if not measured.
fn cell(samples: &Samples, k: &(Strategy, usize), decimals: usize) -> String {
    samples
        .get(k)
        .map_or("–".to_owned(), |v| Spread::of(v).show(decimals))
}

/// A row per N and strategy: calls per grant and completion, dashboard beside native.
fn table(
    ns: &[usize],
    h2: &DashboardSweep,
    h1: Option<&DashboardSweep>,
    native: &Native,
) -> String {
    let mut table = String::from(
        "| N | strategy | calls/grant, dashboard HTTP/2 | native | dashboard ÷ native | dashboard HTTP/1.1 (control) | completion ms, dashboard HTTP/2 | native | dashboard HTTP/1.1 |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let control = |k: &(Strategy, usize), figure: fn(&DashboardSweep) -> &Samples, decimals| {
        h1.map_or("–".into(), |c| cell(figure(c), k, decimals))
    };
    for n in ns {
        for s in STRATEGIES {
            let k = (s, *n);
            let dashboard_vs_native =
                match (median(&h2.calls_per_grant, &k), median(&native.calls, &k)) {
                    (Some(d), Some(native)) => ratio(d, native),
                    _ => "–".into(),
                };
            let _ = writeln!(
                table,
                "| {n} | {} | {} | {} | {dashboard_vs_native} | {} | {} | {} | {} |",
                s.label(),
                cell(&h2.calls_per_grant, &k, 2),
                cell(&native.calls, &k, 2),
                control(&k, |c| &c.calls_per_grant, 2),
                cell(&h2.completion_ms, &k, 0),
                cell(&native.time, &k, 0),
                control(&k, |c| &c.completion_ms, 0),
            );
        }
    }
    table
}

/// The strategies ranked by calls per grant at every N, dashboard and native.
struct Orders(Vec<(usize, String, String)>);

impl Orders {
    fn of(ns: &[usize], dashboard: &Samples, native: &Samples) -> Orders {
        Orders(
            ns.iter()
                .map(|n| (*n, ranking(dashboard, *n), ranking(native, *n)))
                .collect(),
        )
    }

    /// Whether the dashboard ranks the strategies as native does at every N.
    fn held(&self) -> bool {
        self.0.iter().all(|(_, dash, native)| dash == native)
    }

    /// A line per N with both rankings.
    fn text(&self) -> String {
        self.0
            .iter()
            .map(|(n, dash, native)| {
                format!(
                    "- N = {n}: dashboard {dash}; native {native}{}\n",
                    if dash == native { "" } else { " (**differs**)" }
                )
            })
            .collect()
    }
}

/// The strategies at `n`, fewest median calls first, as `a < b < c < d`.
fn ranking(calls: &Samples, n: usize) -> String {
    let mut ranked: Vec<(f64, Strategy)> = STRATEGIES
        .iter()
        .filter_map(|s| calls.get(&(*s, n)).map(|v| (Spread::of(v).median, *s)))
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    ranked
        .iter()
        .map(|(_, s)| s.label())
        .collect::<Vec<_>>()
        .join(" < ")
}

/// Full jitter's calls per grant, dashboard ÷ native − 1, at every N both measured.
fn full_jitter_offsets(ns: &[usize], dashboard: &Samples, native: &Samples) -> Vec<(usize, f64)> {
    ns.iter()
        .filter_map(|n| {
            let k = (Strategy::FullJitter, *n);
            Some((*n, median(dashboard, &k)? / median(native, &k)? - 1.0))
        })
        .collect()
}

fn body(
    ctx: &Context,
    h2: &DashboardSweep,
    h1: Option<&DashboardSweep>,
    table: &str,
    orders: &str,
    offs: &str,
) -> String {
    let control_text = match h1 {
        Some(c) => format!("The control ran the same sweep with the dashboard served over plain HTTP ({}), where the browser keeps at most 6 connections to the server.", c.protocol),
        None => "No HTTP/1.1 control run was given.".to_owned(),
    };
    format!(
        "Command: `scripts/bench-dashboard.sh` (`tests/browser/sweep.mjs` in headless \
         Chromium, then `bench dashboard-sweep` in the same invocation). Machine: {}. \
         The dashboard's Brooker sweep (its sweep form: N contenders, one key, one acquisition \
         each, hold 0 ms then the fenced ledger write, base 5 ms, cap 2 s, budget 120 s) \
         against a release lock-server with `--tls-self-signed` serving the release-built \
         dashboard, the page and its requests over {} (checked); each cell the median (min–max) \
         over the browser runs (seeds). Native: `live_sweep` (the SDK's loop for full jitter, \
         `lock_lab`'s comparison loop for the others, over the SDK's reqwest transport, plain \
         HTTP/1.1 with no connection limit) at the same N with the same policy, {} rounds, \
         against a release lock-server in process. L4 calls per grant = all L4 calls of a \
         point ÷ its grants. {control_text}\n\n{table}\nStrategies by L4 calls per grant, \
         fewest first (medians):\n\n{orders}\nFull jitter's calls per grant, dashboard vs \
         native: {offs}.\n",
        ctx.machine, h2.protocol, ctx.settings.sweep_rounds,
    )
}
