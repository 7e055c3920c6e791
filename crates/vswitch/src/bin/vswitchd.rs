//! vswitchd: the switch daemon. See `vswitchd --help`.

use std::process::ExitCode;

use clap::Parser;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing_subscriber::EnvFilter;
use vswitch::config::{Args, Config};
use vswitch::daemon::Daemon;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vswitchd: {e}");
            return ExitCode::from(2);
        }
    };
    // Block the signals before any thread starts, so that only this iterator sees them.
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vswitchd: cannot install signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let daemon = match Daemon::start(config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("vswitchd: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(sig) = signals.forever().next() {
        tracing::info!(signal = sig, "shutting down");
    }
    daemon.stop();
    ExitCode::SUCCESS
}
