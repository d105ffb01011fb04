//! `lsplat-engine render`: a run's feature images, per camera `[H, W, C]` npy and PNG.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lsplat_data::io::{write_atomic, write_bytes_atomic};
use lsplat_data::run::RunDir;
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::picture::{Colouring, png_rgb};
use lsplat_render::BackendVisitor;
use tracing::warn;

use crate::progress::{Cadence, Progress};
use crate::views::{Views, open_run, pick_cameras};

/// How `render` lays out its files.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `<out>/<camera>.npy` and `<camera>.png`.
    Ours,
    /// What LangSplat's `render.py` writes and its `eval/evaluate_iou_loc.py` reads:
    /// `<out>/<scene>_<level>/train/ours_None/renders_npy/<index:05>.npy` (and
    /// `renders/<index:05>.png`), index = the camera's place among the run's cameras
    /// sorted by name.
    Langsplat,
}

/// Options of `render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Run directory (written by `train`, or any tool writing the same files).
    #[arg(long, required_unless_present = "model")]
    pub run: Option<PathBuf>,
    /// LangSplat's model folder: renders the run `MODEL_<feature_level>` that
    /// `train -m MODEL --feature_level L` wrote.
    #[arg(
        short = 'm',
        long = "model_path",
        alias = "model-path",
        value_name = "MODEL",
        conflicts_with = "run",
        requires = "feature_level"
    )]
    pub model: Option<PathBuf>,
    /// The level of the run with -m (1, 2 or 3).
    #[arg(long = "feature_level", alias = "feature-level", value_name = "LEVEL",
          value_parser = clap::value_parser!(u8).range(1..=3))]
    pub feature_level: Option<u8>,
    /// File layout: ours, or LangSplat's (so its eval scripts read the renders).
    #[arg(long, value_enum, default_value = "ours")]
    pub layout: Layout,
    /// The scene's name with `--layout langsplat` (`<scene>_<level>`; default: the
    /// run folder's name without its `_<level>`, i.e. MODEL's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Cameras to render (comma-separated names; default: all).
    #[arg(long, value_delimiter = ',')]
    pub cameras: Vec<String>,
    /// Output folder (default `<run>_render` beside the run directory, which belongs
    /// to its run; with `--layout langsplat`, the folder holding the run, so that
    /// `<scene>_<level>/train/ours_None/renders_npy` is where LangSplat's eval looks).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Backend to render on (default: the run's `device.backend`).
    #[arg(long)]
    pub backend: Option<String>,
    /// Write only the PNGs (no `[H, W, C]` arrays).
    #[arg(long)]
    pub png_only: bool,
    /// Overwrite a finished (or interrupted, unfinished) render output in --out.
    #[arg(long)]
    pub force: bool,
    /// Render these cameras instead of the run's: a JSON file holding one camera pose
    /// (what the viewer's "copy camera" gives) or a list of them (docs/viewer.md).
    #[arg(long, conflicts_with = "cameras")]
    pub pose: Option<PathBuf>,
    /// Also write `<camera>_rgb.png`: the splats' own colours (their SH, degree 0-3,
    /// evaluated for the camera), as the viewer's RGB mode shows them.
    #[arg(long)]
    pub colours: bool,
}

/// Runs `render`.
pub fn run(args: RenderArgs) -> Result<()> {
    if args.name.is_some() && args.layout != Layout::Langsplat {
        bail!("--name names the scene in LangSplat's layout: add --layout langsplat");
    }
    let run_dir = match (&args.run, &args.model, args.feature_level) {
        (Some(r), _, _) => r.clone(),
        (None, Some(m), Some(l)) => crate::folders::run_dir(m, &[l]),
        _ => bail!("give --run RUN_DIR, or -m MODEL --feature_level L"),
    };
    let (run, dev) = open_run(&run_dir, args.backend.as_deref())?;
    let dir = run_dir.canonicalize().unwrap_or_else(|_| run_dir.clone());
    let run_name = dir
        .file_name()
        .map_or_else(|| "run".to_string(), |n| n.to_string_lossy().into_owned());
    let files = match args.layout {
        Layout::Ours => {
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| dir.with_file_name(format!("{run_name}_render")));
            Files::Ours(out)
        }
        Layout::Langsplat => {
            let level = run.config.scene.level;
            let scene = match &args.name {
                Some(n) => n.clone(),
                None => run_name
                    .strip_suffix(&format!("_{level}"))
                    .unwrap_or(&run_name)
                    .to_string(),
            };
            let parent = args
                .out
                .clone()
                .unwrap_or_else(|| dir.parent().map_or_else(PathBuf::new, Path::to_path_buf));
            let base = parent
                .join(format!("{scene}_{level}"))
                .join("train/ours_None");
            if run.channels != 3 {
                warn!(
                    channels = run.channels,
                    "LangSplat's eval/evaluate_iou_loc.py decodes 3-D autoencoder codes; this run renders {}-channel features",
                    run.channels
                );
            }
            let mut sorted: Vec<&str> = run.cameras.iter().map(|c| c.name.as_str()).collect();
            sorted.sort_unstable();
            let index = sorted
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), i))
                .collect();
            Files::Langsplat { base, index }
        }
    };
    dev.visit(RenderJob { run, args, files })
}

/// Where each camera's files go.
enum Files {
    /// `<out>/<camera>.npy`, `.png`.
    Ours(PathBuf),
    /// `<base>/renders_npy/<index>.npy`, `<base>/renders/<index>.png`.
    Langsplat {
        base: PathBuf,
        index: std::collections::HashMap<String, usize>,
    },
}

impl Files {
    /// The npy and PNG paths of `camera`.
    fn paths(&self, camera: &str) -> (PathBuf, PathBuf) {
        match self {
            Files::Ours(out) => (
                out.join(format!("{camera}.npy")),
                out.join(format!("{camera}.png")),
            ),
            Files::Langsplat { base, index } => {
                let i = index.get(camera).copied().unwrap_or(0);
                (
                    base.join("renders_npy").join(format!("{i:05}.npy")),
                    base.join("renders").join(format!("{i:05}.png")),
                )
            }
        }
    }

    /// The folders to create.
    fn dirs(&self) -> Vec<PathBuf> {
        match self {
            Files::Ours(out) => vec![out.clone()],
            Files::Langsplat { base, .. } => vec![base.join("renders_npy"), base.join("renders")],
        }
    }

    /// The folder named in the last line.
    fn shown(&self) -> &Path {
        match self {
            Files::Ours(out) => out,
            Files::Langsplat { base, .. } => base,
        }
    }
}

struct RenderJob {
    run: RunInputs,
    args: RenderArgs,
    files: Files,
}

impl BackendVisitor for RenderJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let RenderJob { run, args, files } = self;
        let posed = match &args.pose {
            Some(p) => lsplat_view::protocol::read_poses(p)?,
            None => Vec::new(),
        };
        let cams = if args.pose.is_some() {
            posed.iter().collect()
        } else {
            pick_cameras(&run.cameras, &args.cameras)?
        };
        let colours = if args.colours {
            Some(lsplat_view::scene::read_colours(&run)?)
        } else {
            None
        };
        crate::views::check_image_memory(&cams, 0)?;
        // The folder follows the run rule; summary.json, written last, marks it finished.
        let layout = match &files {
            Files::Ours(_) => &lsplat_data::run::layout::RENDER,
            Files::Langsplat { .. } => &lsplat_data::run::layout::RENDER_LANGSPLAT,
        };
        let out_dir = RunDir::create_as(files.shown(), args.force, layout)?;
        for d in files.dirs() {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        let c = run.channels;
        // One colouring for every camera: codes as RGB, or a PCA fitted on the
        // per-Gaussian features (decoded through the run's codebook, if it has one).
        let colouring = lsplat_query::lift::colouring(&run);
        let views = Views::new(&dev, &run.gaussians, &run.features, c, &run.config)?;
        let mut bar = Progress::new(
            "render",
            cams.len() as u64,
            "cameras",
            run.config.log.progress,
            Cadence::of(&run.config.log),
        );
        let t0 = std::time::Instant::now();
        let mut pixels = 0u64;
        for cam in &cams {
            let (w, h) = (cam.width as usize, cam.height as usize);
            let mut rgb = Vec::with_capacity(w * h * 3);
            let mut sink = |band: crate::views::Band<'_>, file: Option<&mut dyn Write>| {
                rgb.extend(colouring.rgb(band.features, band.alpha));
                if let Some(f) = file {
                    for v in band.features {
                        f.write_all(&v.to_le_bytes())?;
                    }
                }
                Ok::<_, std::io::Error>(())
            };
            if args.png_only {
                views.render(cam, |b| Ok::<_, anyhow::Error>(sink(b, None)?))?;
            } else {
                let npy = files.paths(&cam.name).0;
                let mut err = None;
                let r = write_atomic(&npy, |f| {
                    f.write_all(&lsplat_data::npy::npy_header("<f4", &[h, w, c]))?;
                    views
                        .render(cam, |b| Ok::<_, anyhow::Error>(sink(b, Some(&mut *f))?))
                        .map_err(|e| {
                            let msg = format!("{e:#}");
                            err = Some(e);
                            std::io::Error::other(msg)
                        })
                });
                if let Some(e) = err {
                    return Err(e);
                }
                r?;
            }
            let png = png_rgb(cam.width, cam.height, &rgb)?;
            let png_path = files.paths(&cam.name).1;
            write_bytes_atomic(&png_path, &png)?;
            if let Some(col) = &colours {
                let rgb = colour_picture(&dev, &run, col, cam)?;
                let png = png_rgb(cam.width, cam.height, &rgb)?;
                let stem = png_path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                write_bytes_atomic(&png_path.with_file_name(format!("{stem}_rgb.png")), &png)?;
            }
            pixels += (w * h) as u64;
            bar.inc(1);
        }
        bar.finish();
        let s = t0.elapsed().as_secs_f64();
        let summary = serde_json::json!({
            "command": "render",
            "run": run.dir.display().to_string(),
            "cameras": cams.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "channels": c,
            "png_only": args.png_only,
            "seconds": s,
        });
        out_dir.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
        println!(
            "rendered {} cameras ({:.2} Mpixel, C = {c}) in {s:.2} s ({:.2} Mpixel/s) on {}",
            cams.len(),
            pixels as f64 / 1e6,
            pixels as f64 / 1e6 / s.max(1e-9),
            dev.describe()
        );
        println!(
            "pictures: {}",
            match (colouring, &run.decoder) {
                (Colouring::Codes { .. }, _) => "codes as RGB (0.5·f/α + 0.5, times α)",
                (Colouring::Pca { .. }, None) =>
                    "three principal axes of the per-Gaussian features (one projection for every camera)",
                (Colouring::Pca { .. }, Some(_)) =>
                    "three principal axes of the per-Gaussian features decoded through the run's codebook (one projection for every camera)",
            }
        );
        println!("wrote {}", files.shown().display());
        Ok(())
    }
}

/// The splats' colours seen from `cam` (`[r, g, b]` composited over black, RGB8).
pub fn colour_picture<B: Backend>(
    dev: &B,
    run: &RunInputs,
    colours: &lsplat_view::scene::Colours,
    cam: &lsplat_core::Camera,
) -> Result<Vec<u8>> {
    let n = run.gaussians.len();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let mut rows = vec![0f32; n * 4];
    let c = cam.centre();
    colours.rows_into(&run.gaussians.means, [c.x, c.y, c.z], threads, &mut rows);
    let rgb3: Vec<f32> = rows
        .chunks_exact(4)
        .flat_map(|r| [r[0], r[1], r[2]])
        .collect();
    let views = Views::new(dev, &run.gaussians, &rgb3, 3, &run.config)?;
    let mut out = Vec::with_capacity(cam.pixel_count() * 3);
    views.render::<anyhow::Error>(cam, |b| {
        out.extend(
            b.features
                .iter()
                .map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8),
        );
        Ok(())
    })?;
    Ok(out)
}
