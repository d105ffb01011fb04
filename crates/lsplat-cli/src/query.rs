//! `lsplat-engine query`: relevancy maps of text queries for a run's cameras.

use std::path::PathBuf;

use anyhow::{Result, bail};
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_data::io::{write_bytes_atomic, write_npy_f32};
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::CANONICAL;
use lsplat_query::picture::{Colouring, png_rgb, turbo};
use lsplat_render::BackendVisitor;

use crate::semantic::{Lift, image_relevancy, text_rows};
use crate::views::{Views, file_stem, open_run, pick_cameras, progress};

/// Options of `query`.
#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// Run directory.
    #[arg(long)]
    pub run: PathBuf,
    /// Text embeddings: `.parquet` (name, embedding) or `.npy` with a `.txt` of names;
    /// must hold "object", "things", "stuff" and "texture" (docs/formats.md). Without
    /// it, the `--query` phrases are encoded with the CLIP model (`--clip`).
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    #[command(flatten)]
    pub clip: crate::clip::ClipArgs,
    /// Output folder: `<camera>/<query>.npy` and `.png`.
    #[arg(long)]
    pub out: PathBuf,
    /// Autoencoder to decode a LangSplat V1 run's codes with.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Queries (comma-separated; default: every phrase of the file but the canonical ones).
    #[arg(long, value_delimiter = ',')]
    pub query: Vec<String>,
    /// Cameras (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub cameras: Vec<String>,
    /// Backend to render on (default: the run's).
    #[arg(long)]
    pub backend: Option<String>,
}

/// Runs `query`.
pub fn run(args: QueryArgs) -> Result<()> {
    let (run, dev) = open_run(&args.run, args.backend.as_deref())?;
    let text = crate::clip::text_embeddings(
        args.text.as_deref(),
        &args.clip,
        &run.config,
        &args.query,
        &args.run,
    )?;
    let lift = Lift::new(
        &args.run,
        run.channels,
        run.decoder.as_ref(),
        args.model.as_deref(),
        &text,
    )?;
    let queries: Vec<String> = if args.query.is_empty() {
        text.names
            .iter()
            .filter(|n| !CANONICAL.contains(&n.as_str()))
            .cloned()
            .collect()
    } else {
        args.query.clone()
    };
    if queries.is_empty() {
        bail!(
            "{}: no query phrases besides the canonical ones",
            text.path.display()
        );
    }
    dev.visit(QueryJob {
        run,
        text,
        lift,
        queries,
        args,
    })
}

struct QueryJob {
    run: RunInputs,
    text: TextEmbeddings,
    lift: Lift,
    queries: Vec<String>,
    args: QueryArgs,
}

/// LangSplat's picture of a relevancy map: where `r > 0.5` (more relevant than a
/// canonical phrase), turbo of `(r − 0.5)/(max − 0.5)`; elsewhere the feature picture
/// at 30%.
pub fn heat_over(map: &[f32], rgb: &[u8]) -> Vec<u8> {
    let top = map.iter().copied().fold(0.5f32, f32::max);
    let mut out = Vec::with_capacity(rgb.len());
    for (r, px) in map.iter().zip(rgb.chunks_exact(3)) {
        if *r > 0.5 {
            out.extend(turbo((r - 0.5) / (top - 0.5).max(1e-6)));
        } else {
            out.extend(px.iter().map(|v| (*v as f32 * 0.3).round() as u8));
        }
    }
    out
}

impl BackendVisitor for QueryJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let QueryJob {
            run,
            text,
            lift,
            queries,
            args,
        } = self;
        let cams = pick_cameras(&run.cameras, &args.cameras)?;
        let (pos, neg) = text_rows(&text, &queries)?;
        let (pos, neg) = (lift.text(&pos), lift.text(&neg));
        let c = run.channels;
        let colouring = Colouring::fit(&run.features, c);
        let views = Views::new(&dev, &run.gaussians, &run.features, c, &run.config)?;
        let bar = progress(cams.len() as u64, "cameras", run.config.log.progress);
        let t0 = std::time::Instant::now();
        let mut pixels = 0u64;
        for cam in &cams {
            bar.set_message(cam.name.clone());
            let r = image_relevancy(&views, cam, &lift, (&pos, &neg), Some(&colouring))?;
            let dir = args.out.join(&cam.name);
            std::fs::create_dir_all(&dir)?;
            let (w, h) = (cam.width, cam.height);
            for (q, map) in queries.iter().zip(&r.maps) {
                let stem = file_stem(q);
                write_npy_f32(
                    &dir.join(format!("{stem}.npy")),
                    &[h as usize, w as usize],
                    map,
                )?;
                let png = png_rgb(w, h, &heat_over(map, &r.rgb))?;
                write_bytes_atomic(&dir.join(format!("{stem}.png")), &png)?;
            }
            write_bytes_atomic(&dir.join("features.png"), &png_rgb(w, h, &r.rgb)?)?;
            pixels += (w * h) as u64;
            bar.inc(1);
        }
        bar.finish_and_clear();
        let s = t0.elapsed().as_secs_f64();
        println!(
            "{} queries on {} cameras ({:.2} Mpixel, {}) in {s:.2} s ({:.3} Mpixel/s) on {}",
            queries.len(),
            cams.len(),
            pixels as f64 / 1e6,
            match &lift {
                Lift::Decode { path, .. } => format!("decoded through {}", path.display()),
                Lift::Direct => format!("{c}-D features"),
                Lift::Codebook { path, dim, .. } => {
                    format!(
                        "{c} code weights decoded to {dim}-D through {}",
                        path.display()
                    )
                }
            },
            pixels as f64 / 1e6 / s.max(1e-9),
            dev.describe()
        );
        println!("wrote {}", args.out.display());
        Ok(())
    }
}
