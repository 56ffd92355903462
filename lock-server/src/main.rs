//! `lock-server` binary: parse the configuration, set up JSON logs, run (or run a
//! subcommand).

use std::io::Read;

use clap::Parser;
use lock_server::auth::bearer;
use lock_server::config::{Command, Config};

#[tokio::main]
async fn main() {
    let config = Config::parse();
    if let Some(Command::HashToken) = config.command {
        hash_token();
    }
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .map_event_format(lock_server::trace_context::WithTraceId)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stdout)
        .init();
    if let Err(e) = lock_server::server::run(config).await {
        tracing::error!(event = "fatal", error = %e);
        eprintln!("lock-server: {e}");
        std::process::exit(1);
    }
}

/// `lock-server hash-token`: the token on stdin (one line; the line end is not part of it)
/// → its SHA-256 in hex on stdout.
fn hash_token() -> ! {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("lock-server hash-token: cannot read stdin: {e}");
        std::process::exit(1);
    }
    let token = input.strip_suffix('\n').unwrap_or(&input);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if let Err(rule) = lock_api::limits::validate_token(token) {
        eprintln!("lock-server hash-token: the token (one line on stdin) {rule}");
        std::process::exit(1);
    }
    println!("{}", bearer::to_hex(&bearer::hash(token)));
    std::process::exit(0);
}
