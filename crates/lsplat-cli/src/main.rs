//! `lsplat-engine`: train language features on frozen Gaussian splats.

mod autoencoder;
mod bench;
mod clip;
mod eval;
mod eval_gaussians;
mod eval_lerf3d;
mod eval_ovs;
mod eval_report;
mod folders;
mod info;
mod plugins;
mod preprocess;
mod progress;
mod query;
mod ranks;
mod reference;
mod render;
mod run;
mod scene;
mod signals;
mod synth;
mod text;
mod train;
mod train_model;
mod view;
mod views;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Train LangSplat language features on frozen 3D Gaussian splats (CPU or GPU).
#[derive(Parser, Debug)]
#[command(
    name = "lsplat-engine",
    version,
    about = "Train LangSplat language features on frozen 3D Gaussian splats (CPU or GPU).",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train per-Gaussian features (the embedded demo when no --scene is given).
    Train(TrainArgs),
    /// Solve per-Gaussian features without training: the weighted average of the valid
    /// pixels' features (`average`) or least squares (`lsq`), several levels at once.
    Solve(SolveArgs),
    /// Time training steps after a warm-up and report iterations/s and ms per phase.
    Bench(BenchArgs),
    /// List the backends compiled in, the devices found and the ONNX Runtime.
    Info,
    /// Every configuration key with its type, default, range and doc (`--toml`: a
    /// complete commented scene file).
    Config(reference::ConfigArgs),
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
    /// Encode phrases with a CLIP model (ONNX) into a text embeddings file.
    Embed(clip::EmbedArgs),
    /// Benchmarks on labelled data: LERF-OVS (2D and 3D protocols), 3D-OVS, and
    /// per-Gaussian segmentation against a labelled point cloud.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// From images to LangSplat language features: SAM masks at three levels, mask NMS,
    /// CLIP features (`language_features/`), optionally an engine dataset.
    Preprocess(preprocess::PreprocessArgs),
    /// Serve an interactive web viewer of a run (free camera; colours, language
    /// features, relevancy and segmentation of queries) and print its URL.
    View(view::ViewArgs),
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
    /// LangSplat's folders instead of a scene file.
    #[command(flatten)]
    pub folders: folders::FolderArgs,
}

/// `train` options.
#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Run directory (default `runs/<UTC timestamp>`, with `-2`, `-3`, … when taken;
    /// `MODEL_<level>` with -m). A directory in use by another run is refused; so is
    /// one holding a finished or unfinished run, unless --force.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite the finished (or abandoned unfinished) run in --out (or MODEL_<level>).
    #[arg(long)]
    pub force: bool,
    /// Continue the run in RUN_DIR from its newest checkpoint, with the configuration
    /// stored there; `--set` may change only train.iterations, log.*, dist.*, device.threads
    /// and device.ordinal. The result is bit for bit that of an uninterrupted run.
    #[arg(long, value_name = "RUN_DIR",
          conflicts_with_all = ["scene", "out", "force", "source", "model", "feature_level"])]
    pub resume: Option<PathBuf>,
}

/// How `solve` fits the features.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Method {
    /// Each Gaussian's α·T-weighted mean of the valid pixels' features (one pass).
    Average,
    /// Least squares by conjugate gradient, warm-started from `average`.
    Lsq,
}

/// `solve` options.
#[derive(Args, Debug)]
pub struct SolveArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// The solver (sets `train.solver`).
    #[arg(long, value_enum, default_value = "lsq")]
    pub method: Method,
    /// Levels to solve together, e.g. `1,2,3` (sets `solve.levels`; default
    /// `scene.level`). Several levels write `level_<l>/` folders.
    #[arg(long, value_delimiter = ',')]
    pub levels: Option<Vec<u8>>,
    /// Run directory (default `runs/<UTC timestamp>`, with `-2`, `-3`, … when taken;
    /// `MODEL_<level>` with -m).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite the finished (or abandoned unfinished) run in --out (or MODEL_<level>).
    #[arg(long)]
    pub force: bool,
}

/// `bench` options.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Timed steps (at least 1).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Untimed warm-up steps (every camera's cache is warmed on top of these).
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Spill the operators that do not fit `render.cache_budget` to this folder (up
    /// to `render.disk_budget`; files are unlinked once mapped). Without it they are
    /// evicted and rebuilt.
    #[arg(long)]
    pub cache_dir: Option<std::path::PathBuf>,
}

fn import_langsplat(source: &std::path::Path, out: &std::path::Path) -> anyhow::Result<()> {
    let mut bar = progress::Progress::new("import", 0, "images", true, Default::default());
    let mut seen = 0u64;
    let s =
        lsplat_data::dataset::import_langsplat_with_progress(source, out, &mut |done, total| {
            if seen == 0 {
                bar.set_length(total as u64);
            }
            bar.inc(done as u64 - seen);
            seen = done as u64;
        });
    bar.finish();
    let s = s?;
    println!(
        "imported {} images (D = {}, {} feature rows, {} unused); masks per level (default, s, m, l): {:?}",
        s.images, s.dim, s.feature_rows, s.unused_rows, s.masks_per_level
    );
    for p in [&s.features_path, &s.masks_path] {
        let bytes = std::fs::metadata(p).map_or(0, |m| m.len());
        println!("wrote {} ({:.1} MB)", p.display(), bytes as f64 / 1e6);
    }
    Ok(())
}

fn solve(args: SolveArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let resolved = scene::resolve(&args.scene)?;
    let scene_file = resolved.scene_file();
    let found = resolved.found;
    let mut cfg = resolved.cfg;
    let method = match args.method {
        Method::Average => "average",
        Method::Lsq => "lsq",
    };
    cfg.set(&format!("train.solver={method}"))
        .context("--method")?;
    if let Some(levels) = &args.levels {
        let list: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
        cfg.set(&format!("solve.levels=[{}]", list.join(",")))
            .context("--levels")?;
    }
    let default_out = found
        .as_ref()
        .map(|f| folders::run_dir(&f.model, &cfg.solve.levels_or(cfg.scene.level)));
    let out = args.out.or(default_out);
    if args.force && out.is_none() {
        anyhow::bail!("--force overwrites the run in --out: give --out DIR (or -m MODEL)");
    }
    train::run_fresh(cfg, out, args.force, scene_file)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Train(a) => signals::Signals::install().and_then(|s| train::run(a, s)),
        Command::Solve(a) => solve(a),
        Command::Bench(a) => bench::run(a),
        Command::Info => info::run(),
        Command::Config(a) => reference::run(a),
        Command::Import(ImportCommand::Langsplat { source, out }) => {
            import_langsplat(&source, &out)
        }
        Command::Synth(a) => synth::run(a),
        Command::Render(a) => render::run(a),
        Command::Autoencoder(c) => autoencoder::run(c),
        Command::Query(a) => query::run(a),
        Command::Embed(a) => clip::embed(a),
        Command::Eval(c) => eval::run(c),
        Command::Preprocess(a) => preprocess::run(a),
        Command::View(a) => view::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.is::<signals::Interrupted>() => {
            let i = e.downcast_ref::<signals::Interrupted>().expect("checked");
            eprintln!("{i}");
            std::process::ExitCode::from(i.exit_code())
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
