//! vswitchd: the switch daemon. See `vswitchd --help`.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;
use vswitch::config::{Args, Config};
use vswitch::daemon::{keep_freed_memory, runtime, Daemon};

fn main() -> ExitCode {
    keep_freed_memory();
    init_logging();
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

/// Logs to the journal with its native fields (PRIORITY, TARGET, CODE_FILE, each event
/// field as F_NAME: `journalctl -u vswitchd -p warning`, `-o verbose`) when stderr is
/// the journal's stream, as under systemd; else as text on stderr. `RUST_LOG` filters
/// either (default `info`).
fn init_logging() {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(journal) => {
                tracing_subscriber::registry()
                    .with(filter())
                    .with(journal)
                    .init();
                return;
            }
            Err(e) => eprintln!("vswitchd: cannot log to the journal ({e}); logging to stderr"),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .init();
}

/// Whether stderr is the journal's stream: systemd sets `JOURNAL_STREAM` to its
/// `DEVICE:INODE` (systemd.exec(5)); a child that inherited the variable but not the
/// stream logs to its own stderr.
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(var) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = var.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let meta = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata());
    match meta {
        Ok(m) => dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()),
        Err(_) => false,
    }
}
