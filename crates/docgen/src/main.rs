//! `vswitch-docgen OUT`: writes the man pages to OUT/man and the shell completions to
//! OUT/completions (see the library's documentation).

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Generates vswitch's man pages and shell completions from its CLI definitions.
#[derive(Parser)]
#[command(name = "vswitch-docgen")]
struct Cli {
    /// Output directory; man/ and completions/ are created in it.
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let files = vswitch_docgen::generate(&cli.out)
        .with_context(|| format!("writing under {}", cli.out.display()))?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
