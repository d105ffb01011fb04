//! `lsplat-engine preprocess`: images → LangSplat's `language_features/` (SAM masks at
//! three levels, mask NMS, CLIP features), and optionally an engine dataset.

use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use lsplat_core::Config;
use lsplat_prep::image::Resolution;
use lsplat_prep::onnx::OnnxModels;
use lsplat_prep::run::{FEATURES_DIR, Progress, list_images, preprocess};

/// Options of `preprocess`.
#[derive(clap::Args, Debug)]
pub struct PreprocessArgs {
    /// Folder of input images (PNG, JPEG), processed in file-name order.
    #[arg(long)]
    pub images: Option<PathBuf>,
    /// A scene's source folder (LangSplat's `dataset_path`): its `images/` are read and,
    /// without --out, `language_features/` is written into it.
    #[arg(short = 's', long = "source")]
    pub source: Option<PathBuf>,
    /// SAM model folder: `encoder.onnx`, `decoder.onnx` and, for EfficientSAM, `sam.json`
    /// (docs/formats.md; `scripts/export_sam.py` makes one).
    #[arg(long)]
    pub sam: PathBuf,
    /// CLIP model folder (its `image.onnx`, or the file `preprocess.clip_image_file`
    /// names); default `models.clip` of the configuration.
    #[arg(long)]
    pub clip: Option<PathBuf>,
    /// Output folder: `language_features/` is written inside it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Image size: -1 = LangSplat's rule (taller than 1080 → height 1080), 1, 2, 4, 8 =
    /// downscale factor, any other N = width N.
    #[arg(short = 'r', long, default_value_t = -1, allow_hyphen_values = true)]
    pub resolution: i64,
    /// Also write an engine dataset (features.parquet + masks.parquet) here.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Configuration file (TOML) with a `[preprocess]` section (and `[onnx]`, `[device]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override a configuration value, e.g. `--set preprocess.nms_max_dim=0`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

fn config(args: &PreprocessArgs) -> Result<Config> {
    let mut cfg = match &args.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    for s in &args.set {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
    }
    cfg.resolve_paths(std::path::Path::new("."));
    cfg.validate()?;
    Ok(cfg)
}

fn eta(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Runs `preprocess`.
pub fn run(args: PreprocessArgs) -> Result<()> {
    let cfg = config(&args)?;
    let res = Resolution::from_arg(args.resolution)?;
    let (images_dir, out) = match (&args.images, &args.source) {
        (Some(_), Some(_)) => bail!("give --images or -s/--source, not both"),
        (Some(i), None) => (
            i.clone(),
            args.out
                .clone()
                .context("--out is required with --images")?,
        ),
        (None, Some(s)) => (
            s.join("images"),
            args.out.clone().unwrap_or_else(|| s.clone()),
        ),
        (None, None) => bail!("give the images with --images DIR or a scene folder with -s DIR"),
    };
    let images = list_images(&images_dir)?;
    lsplat_prep::run::check_images(&images)?;
    let clip_dir = args
        .clip
        .clone()
        .or_else(|| cfg.models.clip.clone())
        .context("no CLIP model: give --clip DIR or set models.clip")?;
    let mut loaded = OnnxModels::load(&args.sam, &clip_dir, &cfg)?;
    let tty = std::io::stderr().is_terminal();
    let mut report = |p: &Progress| {
        let rate = if p.seconds > 0.0 {
            p.processed as f64 / p.seconds
        } else {
            0.0
        };
        let left = p.total - p.done;
        let eta = if rate > 0.0 {
            eta(left as f64 / rate)
        } else {
            "?".into()
        };
        let line = format!(
            "preprocess: {}/{} images  {rate:.3} images/s  ETA {eta}{}",
            p.done,
            p.total,
            p.last
                .as_deref()
                .map(|l| format!("  ({l})"))
                .unwrap_or_default()
        );
        if tty {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
        ControlFlow::Continue(())
    };
    let s = preprocess(
        &images,
        &out,
        res,
        &cfg.preprocess,
        &mut loaded.models(),
        &mut report,
    )?;
    if tty {
        eprintln!();
    }
    let t = s.timings;
    println!(
        "preprocessed {} images ({} this run) into {}: masks per level (default, s, m, l) {:?}",
        s.images,
        s.processed,
        out.join(FEATURES_DIR).display(),
        s.masks
    );
    if s.processed > 0 {
        let n = s.processed as f64;
        println!(
            "seconds per image: encoder {:.3}, decoder {:.3}, masks {:.3}, NMS {:.3}, clean-up {:.3}, CLIP {:.3}, total {:.3}",
            t.encoder / n,
            t.decoder / n,
            t.masks / n,
            t.nms / n,
            t.cleanup / n,
            t.clip / n,
            t.total() / n
        );
        let each = |secs: f64, count: u64| {
            if count > 0 {
                secs / count as f64 * 1e3
            } else {
                0.0
            }
        };
        println!(
            "work per image: {:.1} encoder runs ({:.1} ms each), {:.1} prompts ({:.2} ms each), {:.1} CLIP crops ({:.2} ms each; {:.1} more masks equal to one of another level, not encoded again)",
            t.encoder_runs as f64 / n,
            each(t.encoder, t.encoder_runs),
            t.prompts as f64 / n,
            each(t.decoder, t.prompts),
            t.clip_crops as f64 / n,
            each(t.clip, t.clip_crops),
            t.clip_reused as f64 / n
        );
    }
    if let Some(ds) = &args.dataset {
        let sum = lsplat_data::dataset::import_langsplat(&out.join(FEATURES_DIR), ds)?;
        println!("dataset {}: {sum:?}", ds.display());
    }
    Ok(())
}
