//! `bench`: runs the benchmarks side by side in one invocation, prints each table,
//! and rewrites the owned sections of `docs/BENCHMARKS.md` plus SVG charts in `docs/bench/`.
//! Run through `scripts/bench.sh` (release build, Redis install); `bench --help` for knobs.
//!
//! The command only picks what runs and where it is written: the sections measure
//! themselves (`bench::sections`), the doc is written by `bench::output`.

use std::path::PathBuf;

use bench::output::Output;
use bench::sections::{self, dashboard_sweep, quick, sweep, sweep_log, Context, Section, Settings};
use bench::soak::SoakSettings;
use bench::summary::{self, SummaryRow};
use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    All,
    Sim,
    Server,
    Sweep,
    /// Re-render the live section from a saved `bench sweep` output (`--log`).
    SweepLog,
    /// A lock-server replica on the etcd backend vs raw etcd-client cycles (target ≥ 0.8×).
    Etcd,
    /// The wait queue vs full jitter on one hot key, SQLite and etcd.
    Queue,
    /// Shared holds: readers on one key, a writer under reads, a semaphore; SQLite and etcd.
    Shared,
    /// lock-server over TLS (HTTP/2 and HTTP/1.1) vs plain HTTP/1.1.
    Tls,
    /// The dashboard's sweep in the browser (`--log`, from `tests/browser/sweep.mjs --out`;
    /// `--control` for its HTTP/1.1 run) beside the native sweep at the same N, run now.
    DashboardSweep,
    /// Write `--body-file` as the section `--title` (for scripts/bench-client.sh).
    Record,
    /// lock-server vs the trivial handler only, at `--clients`, printed, never written: the
    /// quick before/after check while profiling.
    Quick,
    /// L2's answer with `--heartbeat-locks` locks on SQLite: full list, unchanged, delta
    /// (bytes and time), written as its own section.
    Heartbeat,
    /// The server memory soak: the release lock-server as a child process, `--soak-cycles`
    /// acquire+release cycles after a `--soak-baseline` run on a fresh one, RSS sampled;
    /// printed (table and JSON), never written to the doc.
    Soak,
}

/// The benchmark suite (results in docs/BENCHMARKS.md).
#[derive(Debug, Parser)]
struct Args {
    /// Which part to run.
    #[arg(value_enum, default_value_t = Part::All)]
    part: Part,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    settings: Settings,
    #[command(flatten)]
    soak: SoakSettings,
    /// For `quick`: client counts.
    #[arg(long, value_delimiter = ',', default_value = "1,50")]
    clients: Vec<usize>,
    /// For `record`: the section title.
    #[arg(long)]
    title: Option<String>,
    /// For `record`: the Markdown body.
    #[arg(long)]
    body_file: Option<PathBuf>,
    /// For `sweep-log`: the saved output to re-render; for `dashboard-sweep`: the
    /// dashboard's sweep over HTTP/2.
    #[arg(long)]
    log: Option<PathBuf>,
    /// For `dashboard-sweep`: the dashboard's sweep over HTTP/1.1 (the control), if run.
    #[arg(long)]
    control: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    // Log as the server binary does (JSON, info) into a sink, so formatting cost is counted.
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::sink)
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .init();
    let machine = bench::machine::describe();
    println!("machine: {machine}");
    let ctx = Context {
        settings: args.settings.clone(),
        output: args.output.clone(),
        machine,
    };
    match args.part {
        Part::All => full_run(&ctx),
        Part::Sim => alone(&ctx, args.part, sections::sim::SECTION),
        Part::Server => alone(&ctx, args.part, sections::server::SECTION),
        Part::Sweep => alone(&ctx, args.part, sweep::SECTION),
        Part::Etcd => alone(&ctx, args.part, sections::etcd::SECTION),
        Part::Queue => alone(&ctx, args.part, sections::queue::SECTION),
        Part::Shared => alone(&ctx, args.part, sections::shared::SECTION),
        Part::Tls => alone(&ctx, args.part, sections::tls::SECTION),
        Part::Heartbeat => {
            let measured = (sections::heartbeat::SECTION.measure)(&ctx);
            let title = sections::heartbeat::SECTION.title;
            ctx.output.write_section(title, &measured.body);
        }
        Part::SweepLog => {
            let log = args.log.as_deref().expect("--log FILE");
            ctx.output
                .write_section(sweep::TITLE, &sweep_log::render(&ctx, log));
        }
        Part::DashboardSweep => {
            let h2 = args
                .log
                .as_deref()
                .expect("--log FILE (tests/browser/sweep.mjs --out)");
            let measured = dashboard_sweep::measure(&ctx, h2, args.control.as_deref());
            ctx.output
                .write_section(dashboard_sweep::TITLE, &measured.body);
            // Never part of the full run: its rows are its own, added on its first run.
            ctx.output.upsert_summary(&measured.rows);
        }
        Part::Record => {
            let title = args.title.as_deref().expect("--title");
            let path = args.body_file.as_deref().expect("--body-file");
            let body = std::fs::read_to_string(path).expect("read --body-file");
            ctx.output.write_section(title, &body);
        }
        Part::Quick => quick::run(&ctx.settings, &args.clients),
        Part::Soak => {
            bench::soak::run(&args.soak, &ctx.machine);
        }
    }
}

/// Every section of the full run, then the summary of all their rows.
fn full_run(ctx: &Context) {
    let mut rows = Vec::new();
    for section in sections::FULL_RUN {
        let measured = (section.measure)(ctx);
        ctx.output.write_section(section.title, &measured.body);
        rows.extend(measured.rows);
    }
    let body = summary::section(&rows, &ctx.machine);
    println!("\n## Summary\n{body}");
    ctx.output.write_section(summary::TITLE, &body);
}

/// One section alone: it re-measures its own rows of the summary and says so.
fn alone(ctx: &Context, part: Part, section: Section) {
    let measured = (section.measure)(ctx);
    ctx.output.write_section(section.title, &measured.body);
    let name = part.to_possible_value().expect("every part has a name");
    let rows: Vec<SummaryRow> = measured
        .rows
        .into_iter()
        .map(|row| row.measured_alone(name.get_name()))
        .collect();
    if !rows.is_empty() {
        ctx.output.upsert_summary(&rows);
    }
}
