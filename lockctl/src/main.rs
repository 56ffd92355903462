//! `lockctl`: the lock service from a shell, a thin client over the SDK (`lock-wasm`'s
//! native client), so it keeps the SDK's heartbeats, deadlines, acquire loop, queue and TLS.
//!
//! Layout:
//! - `cli` — every flag, each also an environment variable; usage errors' status.
//! - `exit` — the exit statuses (stable, listed in `--help` and the README) and `Failure`.
//! - `endpoint` — the server's URL, bearer token and CA, checked once.
//! - `wait` — how long `exec` waits, as the SDK's acquire policy (the server's queue).
//! - `hold` — exclusive or shared, from `--shared` and `--limit`.
//! - `signals` — SIGINT, SIGTERM, SIGHUP caught, to be passed to the command.
//! - `job` — the command in a process group of its own: start, signal, stop, its status.
//! - `exec` — `lockctl exec`: session, lock, command, release.
//! - `status` — `lockctl status` (L7), and the holder named when `exec` is not granted.
//! - `revoke` — `lockctl revoke` (R1).
//! - `sse` — reading an event stream's records.
//! - `watch` — `lockctl watch` (L8).

mod cli;
mod endpoint;
mod exec;
mod exit;
mod hold;
mod job;
mod revoke;
mod signals;
mod sse;
mod status;
mod wait;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use cli::{Cli, Command, ExecArgs};
use endpoint::Endpoint;
use exit::Failure;
use lock_wasm::ClientConfig;

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(cli::early_status(&error));
        }
    };
    // One thread: lockctl waits on one server and one command; the SDK's heartbeats are
    // tasks on the same runtime.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            eprintln!("lockctl: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

/// The subcommand; the status to exit with.
async fn run(cli: Cli) -> Result<u8, Failure> {
    let endpoint = Endpoint::new(&cli.url, cli.token.as_deref(), cli.ca_cert.as_deref())?;
    match cli.command {
        Command::Exec(args) => {
            let (exec, config) = exec_plan(args)?;
            exec::run(&endpoint, config, &exec).await
        }
        Command::Status(args) => status::run(&endpoint, &args.key, args.json)
            .await
            .map(|()| 0),
        Command::Watch(args) => {
            lock_api::limits::validate_key(&args.key)
                .map_err(|e| Failure::usage(format!("KEY {e}")))?;
            let watch = watch::Watch {
                key: args.key,
                json: args.json,
                after: args.after,
                count: args.count,
            };
            watch::run(&endpoint, &watch).await
        }
        Command::Revoke(args) => {
            revoke::run(&endpoint, &args.key, &args.reason, args.fencing_token)
                .await
                .map(|()| 0)
        }
    }
}

/// Checks `exec`'s values before anything is sent: each bad one is a usage error.
fn exec_plan(args: ExecArgs) -> Result<(exec::Exec, ClientConfig), Failure> {
    lock_api::limits::validate_key(&args.key).map_err(|e| Failure::usage(format!("KEY {e}")))?;
    if let Some(ttl) = args.session_ttl_ms {
        lock_api::limits::validate_ttl(ttl)
            .map_err(|e| Failure::usage(format!("--session-ttl-ms {e}")))?;
    }
    let owner = args.owner.unwrap_or_else(default_owner);
    if owner.len() > lock_api::limits::OWNER_MAX_BYTES {
        return Err(Failure::usage(format!(
            "--owner is at most {} bytes",
            lock_api::limits::OWNER_MAX_BYTES
        )));
    }
    let config = ClientConfig {
        session_ttl: args.session_ttl_ms.map(Duration::from_millis),
        owner: Some(owner),
        ..ClientConfig::default()
    };
    let ttl = Duration::from_millis(args.ttl_ms);
    config
        .check_lock_ttl(ttl, "--ttl-ms")
        .map_err(|e| Failure::usage(e.to_string()))?;
    let exec = exec::Exec {
        key: args.key,
        hold: hold::from_flags(args.shared, args.limit)?,
        ttl,
        wait: wait::Wait::from_flags(args.no_wait, args.wait_ms),
        kill_after: Duration::from_millis(args.kill_after_ms),
        command: args.command,
    };
    Ok((exec, config))
}

/// `lockctl@HOST:PID`: enough for whoever reads `lockctl status` to find the job.
fn default_owner() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
    let host = if ok {
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        "unknown-host".to_owned()
    };
    let host: String = host.chars().take(64).collect();
    format!("lockctl@{host}:{}", std::process::id())
}
