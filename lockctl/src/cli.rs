//! The command line: every flag, each also an environment variable (flags win), as the
//! server's are. Parsing failures exit with [`crate::exit::USAGE`], not clap's 2, so a
//! script can tell a typo from a command that exited 2.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use lock_api::limits::DEFAULT_LOCK_TTL_MILLIS;

use crate::exit;

/// Default of `--kill-after-ms`.
pub const DEFAULT_KILL_AFTER_MS: u64 = 5_000;

/// lockctl: the lock service from a shell.
#[derive(Debug, Parser)]
#[command(
    name = "lockctl",
    version,
    about = "Run a command under a lock of the lock service; read or revoke a lock"
)]
pub struct Cli {
    /// The lock server's base URL (https with a private CA: --ca-cert).
    #[arg(
        long,
        env = "LOCK_URL",
        global = true,
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,

    /// Bearer token: an auth-file client's for exec and status; the admin token (or an
    /// admin client's) for revoke.
    #[arg(long, env = "LOCK_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,

    /// PEM file of a CA to trust for https, beside the system's roots (e.g. a
    /// --tls-self-signed server's self-signed-cert.pem).
    #[arg(long, env = "LOCK_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire KEY (waiting in the server's queue by default), run COMMAND while it is
    /// held, release it when COMMAND ends, and exit with COMMAND's status. COMMAND sees
    /// LOCK_KEY, LOCK_FENCING_TOKEN and LOCK_HOLDER_ID. If the lock is lost, COMMAND's
    /// process group gets SIGTERM, then SIGKILL after --kill-after-ms. SIGINT, SIGTERM and
    /// SIGHUP to lockctl are passed to COMMAND; the lock is released after it ends.
    Exec(ExecArgs),
    /// Show who holds KEY (advisory: true at the instant of the read).
    Status(StatusArgs),
    /// Force-revoke KEY's holds (admin: LOCK_TOKEN is the admin bearer).
    Revoke(RevokeArgs),
    /// Print KEY's holder changes as they happen (grants, releases, expiries, revokes),
    /// one line each, following the server across reconnects and restarts.
    Watch(WatchArgs),
}

/// `lockctl exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The lock's key.
    pub key: String,

    /// Lock TTL: how long the lock outlives lockctl if lockctl dies (kill -9); heartbeats
    /// renew it while the command runs.
    #[arg(long, env = "LOCK_TTL_MS", default_value_t = DEFAULT_LOCK_TTL_MILLIS)]
    pub ttl_ms: u64,

    /// Give up when not granted within this many milliseconds. Default: wait until granted.
    #[arg(long, env = "LOCK_WAIT_MS", conflicts_with = "no_wait")]
    pub wait_ms: Option<u64>,

    /// Do not wait: not granted at once when someone else holds KEY.
    #[arg(long, env = "LOCK_NO_WAIT")]
    pub no_wait: bool,

    /// Hold KEY shared, beside other shared holders (a read-write lock's reader).
    #[arg(long, env = "LOCK_SHARED")]
    pub shared: bool,

    /// With --shared: at most N shared holders at once (a counting semaphore of N permits).
    #[arg(long, env = "LOCK_LIMIT", requires = "shared")]
    pub limit: Option<u32>,

    /// After the lock is lost, how long COMMAND has between SIGTERM and SIGKILL.
    #[arg(long, env = "LOCK_KILL_AFTER_MS", default_value_t = DEFAULT_KILL_AFTER_MS)]
    pub kill_after_ms: u64,

    /// Session TTL asked for (the server's default when absent).
    #[arg(long, env = "LOCK_SESSION_TTL_MS")]
    pub session_ttl_ms: Option<u64>,

    /// The owner label others see in `lockctl status` (default: lockctl@HOST:PID).
    #[arg(long, env = "LOCK_OWNER")]
    pub owner: Option<String>,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `lockctl status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's key.
    pub key: String,

    /// Print the server's answer (L7) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `lockctl revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The lock's key.
    pub key: String,

    /// Why: logged by the server and returned in its answer.
    #[arg(long)]
    pub reason: String,

    /// Revoke only the hold with this fencing token (one shared holder); default: every hold.
    #[arg(long)]
    pub fencing_token: Option<u64>,
}

/// `lockctl watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The lock's key.
    pub key: String,

    /// Print each event as the server's JSON, one per line.
    #[arg(long)]
    pub json: bool,

    /// Resume after this event id (a previous `--json` line's `id`) instead of starting
    /// with a snapshot of the key now.
    #[arg(long)]
    pub after: Option<String>,

    /// Stop after this many events (the first, snapshot or reset, included).
    #[arg(long)]
    pub count: Option<u64>,
}

/// Parses `args`, the exit statuses' table added to the help.
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let command = Cli::command().after_help(exit::table());
    command
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches))
}

/// The status to exit with when parsing stopped: 0 after `--help` or `--version`,
/// [`exit::USAGE`] after a usage error.
pub fn early_status(error: &clap::Error) -> u8 {
    if error.use_stderr() {
        exit::USAGE
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(args: &[&str]) -> ExecArgs {
        let mut all = vec!["lockctl", "exec"];
        all.extend(args);
        match parse(all).expect("parses").command {
            Command::Exec(exec) => exec,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_follows_the_double_dash() {
        let args = exec(&["k", "--ttl-ms", "3000", "--", "sh", "-c", "echo --no-wait"]);
        assert_eq!(args.key, "k");
        assert_eq!(args.ttl_ms, 3000);
        assert!(!args.no_wait);
        assert_eq!(args.command, ["sh", "-c", "echo --no-wait"]);
    }

    #[test]
    fn usage_errors_have_lockctls_status() {
        let status = |args: &[&str]| parse(args.iter().copied()).err().map(|e| early_status(&e));
        assert_eq!(
            status(&["lockctl", "exec", "k"]),
            Some(exit::USAGE),
            "no command"
        );
        assert_eq!(
            status(&[
                "lockctl",
                "exec",
                "k",
                "--no-wait",
                "--wait-ms",
                "5",
                "--",
                "true"
            ]),
            Some(exit::USAGE)
        );
        assert_eq!(
            status(&["lockctl", "exec", "k", "--limit", "3", "--", "true"]),
            Some(exit::USAGE),
            "--limit without --shared"
        );
        assert_eq!(
            status(&["lockctl", "revoke", "k"]),
            Some(exit::USAGE),
            "no reason"
        );
        assert_eq!(status(&["lockctl", "--help"]), Some(0));
    }

    #[test]
    fn the_help_lists_the_exit_statuses() {
        let help = Cli::command()
            .after_help(exit::table())
            .render_help()
            .to_string();
        assert!(help.contains("Exit status:"), "{help}");
        assert!(help.contains(&exit::NOT_GRANTED.to_string()), "{help}");
    }
}
