//! `lsplat-engine render`: a run's feature images, per camera `[H, W, C]` npy and PNG.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use lsplat_data::io::{write_atomic, write_bytes_atomic};
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::picture::{Colouring, png_rgb};
use lsplat_render::BackendVisitor;

use crate::views::{Views, open_run, pick_cameras, progress};

/// Options of `render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Run directory (written by `train`, or any tool writing the same files).
    #[arg(long)]
    pub run: PathBuf,
    /// Cameras to render (comma-separated names; default: all).
    #[arg(long, value_delimiter = ',')]
    pub cameras: Vec<String>,
    /// Output folder (default `<run>_render` beside the run directory, which belongs
    /// to its run).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Backend to render on (default: the run's `device.backend`).
    #[arg(long)]
    pub backend: Option<String>,
    /// Write only the PNGs (no `[H, W, C]` arrays).
    #[arg(long)]
    pub png_only: bool,
}

/// Runs `render`.
pub fn run(args: RenderArgs) -> Result<()> {
    let (run, dev) = open_run(&args.run, args.backend.as_deref())?;
    let out = args.out.clone().unwrap_or_else(|| {
        let dir = args.run.canonicalize().unwrap_or_else(|_| args.run.clone());
        let name = dir
            .file_name()
            .map_or_else(|| "run".to_string(), |n| n.to_string_lossy().into_owned());
        dir.with_file_name(format!("{name}_render"))
    });
    dev.visit(RenderJob { run, args, out })
}

struct RenderJob {
    run: RunInputs,
    args: RenderArgs,
    out: PathBuf,
}

impl BackendVisitor for RenderJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let RenderJob { run, args, out } = self;
        let cams = pick_cameras(&run.cameras, &args.cameras)?;
        std::fs::create_dir_all(&out)?;
        let c = run.channels;
        // One colouring for every camera: codes as RGB, or a PCA fitted on the
        // per-Gaussian features.
        let colouring = Colouring::fit(&run.features, c);
        let views = Views::new(&dev, &run.gaussians, &run.features, c, &run.config)?;
        let bar = progress(cams.len() as u64, "cameras", run.config.log.progress);
        let t0 = std::time::Instant::now();
        let mut pixels = 0u64;
        for cam in &cams {
            bar.set_message(cam.name.clone());
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
                let npy = out.join(format!("{}.npy", cam.name));
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
            write_bytes_atomic(&out.join(format!("{}.png", cam.name)), &png)?;
            pixels += (w * h) as u64;
            bar.inc(1);
        }
        bar.finish_and_clear();
        let s = t0.elapsed().as_secs_f64();
        println!(
            "rendered {} cameras ({:.2} Mpixel, C = {c}) in {s:.2} s ({:.2} Mpixel/s) on {}",
            cams.len(),
            pixels as f64 / 1e6,
            pixels as f64 / 1e6 / s.max(1e-9),
            dev.describe()
        );
        println!(
            "pictures: {}",
            match colouring {
                Colouring::Codes { .. } => "codes as RGB (0.5·f/α + 0.5, times α)",
                Colouring::Pca { .. } =>
                    "three principal axes of the per-Gaussian features (one projection for every camera)",
            }
        );
        println!("wrote {}", out.display());
        Ok(())
    }
}
