//! `lsplat-engine`: train language features on frozen Gaussian splats.

mod autoencoder;
mod bench;
mod eval;
mod info;
mod query;
mod render;
mod run;
mod scene;
mod semantic;
mod synth;
mod train;
mod views;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Train LangSplat language features on frozen 3D Gaussian splats (CPU or GPU).
#[derive(Parser, Debug)]
#[command(name = "lsplat-engine", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train per-Gaussian features (the embedded demo when no --scene is given).
    Train(TrainArgs),
    /// Time training steps after a warm-up and report iterations/s and ms per phase.
    Bench(BenchArgs),
    /// List the backends compiled in and the devices found.
    Info,
    /// Convert datasets users already have into the engine's Parquet datasets.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Make a LangSplat-layout dataset for any splat (clustered objects, rendered masks).
    Synth(synth::SynthArgs),
    /// Render a run's feature images: `[H, W, C]` npy and a PNG per camera.
    Render(render::RenderArgs),
    /// LangSplat's 512 → 3 autoencoder: train on a dataset, or encode one.
    #[command(subcommand)]
    Autoencoder(autoencoder::AeCommand),
    /// Relevancy maps of text queries (npy + PNG heat map per camera and query).
    Query(query::QueryArgs),
    /// Benchmarks on labelled data (LangSplat's LERF-OVS protocol).
    #[command(subcommand)]
    Eval(eval::EvalCommand),
}

#[derive(Subcommand, Debug)]
enum ImportCommand {
    /// LangSplat's `<stem>_f.npy` / `<stem>_s.npy` folder → features.parquet + masks.parquet.
    Langsplat {
        /// Folder with the `_f.npy` / `_s.npy` files (e.g. `language_features_dim3`).
        #[arg(long)]
        source: PathBuf,
        /// Dataset folder to write.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Options shared by every command that builds a scene.
#[derive(Args, Debug, Clone)]
pub struct SceneArgs {
    /// Scene file (TOML). Without it, the embedded demo scene is used.
    #[arg(long)]
    pub scene: Option<PathBuf>,
    /// Override any configuration value, e.g. `--set train.iterations=500`
    /// (repeatable; applied after the scene file).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// `train` options.
#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Run directory (default `runs/<UTC timestamp>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `bench` options.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Timed steps.
    #[arg(long, default_value_t = 200)]
    pub iters: u64,
    /// Untimed warm-up steps (every camera's cache is warmed on top of these).
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn import_langsplat(source: &std::path::Path, out: &std::path::Path) -> anyhow::Result<()> {
    let s = lsplat_data::dataset::import_langsplat(source, out)?;
    println!(
        "imported {} images (D = {}, {} feature rows, {} unused); masks per level (default, s, m, l): {:?}",
        s.images, s.dim, s.feature_rows, s.unused_rows, s.masks_per_level
    );
    println!(
        "wrote {} and {}",
        s.features_path.display(),
        s.masks_path.display()
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Train(a) => train::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Info => info::run(),
        Command::Import(ImportCommand::Langsplat { source, out }) => {
            import_langsplat(&source, &out)
        }
        Command::Synth(a) => synth::run(a),
        Command::Render(a) => render::run(a),
        Command::Autoencoder(c) => autoencoder::run(c),
        Command::Query(a) => query::run(a),
        Command::Eval(c) => eval::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
