//! `lsplat-engine config`: the configuration reference (every key with its type,
//! default, range and doc), generated from the configuration types.

use anyhow::Result;

/// Options of `config`.
#[derive(clap::Args, Debug)]
pub struct ConfigArgs {
    /// Print a complete scene file instead: every key at its default, its doc as
    /// comments.
    #[arg(long, conflicts_with = "markdown")]
    pub toml: bool,
    /// Print the reference as Markdown (docs/config.md).
    #[arg(long)]
    pub markdown: bool,
}

/// Runs `config`.
pub fn run(args: ConfigArgs) -> Result<()> {
    use lsplat_core::config_doc::{markdown, text, toml};
    let out = if args.toml {
        toml()
    } else if args.markdown {
        markdown()
    } else {
        text()
    };
    print!("{out}");
    Ok(())
}
