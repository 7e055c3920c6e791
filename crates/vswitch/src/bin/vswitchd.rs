//! vswitchd: the switch daemon. See `vswitchd --help`.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use vswitch::config::{Args, Config};
use vswitch::daemon::{runtime, Daemon};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = match Config::try_from(args.clone()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vswitchd: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match runtime(config.pmd_cpus.as_deref()) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vswitchd: cannot start the control plane's runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        match Daemon::start(config, args).await {
            Ok(d) => {
                d.run().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vswitchd: {e}");
                ExitCode::from(2)
            }
        }
    })
}
