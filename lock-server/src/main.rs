//! `lock-server` binary: parse the configuration, set up JSON logs, run.

use clap::Parser;
use lock_server::config::Config;

#[tokio::main]
async fn main() {
    let config = Config::parse();
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
