//! `lsplat-engine query`: relevancy maps of text queries for a run's cameras.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_data::io::{write_bytes_atomic, write_npy_f32};
use lsplat_data::run::RunDir;
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::CANONICAL;
use lsplat_query::picture::{png_rgb, turbo};
use lsplat_render::BackendVisitor;

use crate::progress::{Cadence, Progress};
use crate::views::{Views, file_stem, open_run, pick_cameras};
use lsplat_query::lift::{Lift, image_relevancy, text_rows};

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
    /// Output folder: `<camera>/<query>.npy` (the raw relevancy) and `.png` (the heat
    /// map, background not lit), `<camera>/alpha.npy` and `features.png`.
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
    /// Opacity below which a pixel is background and not lit in the heat maps, in
    /// [0, 1] (default: the run's `query.min_alpha`, 0.5 unless set).
    #[arg(long)]
    pub min_alpha: Option<f32>,
    /// Overwrite a finished (or interrupted, unfinished) query output in --out.
    #[arg(long)]
    pub force: bool,
    /// Cameras from a JSON file of poses instead of the run's (as `render --pose`).
    #[arg(long, conflicts_with = "cameras")]
    pub pose: Option<PathBuf>,
}

/// Files every camera's folder holds besides the queries' (a query may not take
/// their names).
const RESERVED: [&str; 2] = ["alpha", "features"];

/// Runs `query`.
pub fn run(args: QueryArgs) -> Result<()> {
    if let Some(a) = args.min_alpha
        && !(0.0..=1.0).contains(&a)
    {
        bail!("--min-alpha {a}: expected a value in [0, 1]");
    }
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
    if let Some(q) = queries
        .iter()
        .find(|q| RESERVED.contains(&file_stem(q).as_str()))
    {
        bail!(
            "query {q:?} would be written as {}.npy, which every camera folder already uses (the opacity map and the feature picture: {})",
            file_stem(q),
            RESERVED.join(", ")
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
/// canonical phrase) on the subject (opacity `alpha ≥ min_alpha`), turbo of
/// `(r − 0.5)/(max − 0.5)` (max over those pixels); elsewhere the feature picture at
/// 30%. Empty background, whose composited feature is near zero and scores at
/// random, is never lit.
pub fn heat_over(map: &[f32], alpha: &[f32], min_alpha: f32, rgb: &[u8]) -> Vec<u8> {
    let lit = |r: f32, a: f32| r > 0.5 && a >= min_alpha;
    let top = map
        .iter()
        .zip(alpha)
        .filter(|(r, a)| lit(**r, **a))
        .fold(0.5f32, |m, (r, _)| m.max(*r));
    let mut out = Vec::with_capacity(rgb.len());
    for ((r, a), px) in map.iter().zip(alpha).zip(rgb.chunks_exact(3)) {
        if lit(*r, *a) {
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
        let posed = match &args.pose {
            Some(p) => lsplat_view::protocol::read_poses(p)?,
            None => Vec::new(),
        };
        let cams = if args.pose.is_some() {
            posed.iter().collect()
        } else {
            pick_cameras(&run.cameras, &args.cameras)?
        };
        let min_alpha = args.min_alpha.unwrap_or(run.config.query.min_alpha);
        crate::views::check_image_memory(&cams, queries.len() + 1)?;
        let (pos, neg) = text_rows(&text, &queries)?;
        // The folder follows the run rule; summary.json, written last, marks it finished.
        let out_dir = RunDir::create_as(&args.out, args.force, &lsplat_data::run::layout::QUERY)?;
        let (pos, neg) = (lift.text(&pos), lift.text(&neg));
        let c = run.channels;
        let colouring = lsplat_query::lift::colouring(&run);
        let views = Views::new(&dev, &run.gaussians, &run.features, c, &run.config)?;
        let mut bar = Progress::new(
            "query",
            cams.len() as u64,
            "cameras",
            run.config.log.progress,
            Cadence::of(&run.config.log),
        );
        let t0 = std::time::Instant::now();
        let mut pixels = 0u64;
        for cam in &cams {
            let r = image_relevancy(&views, cam, &lift, (&pos, &neg), Some(&colouring))?;
            let dir = args.out.join(&cam.name);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let (w, h) = (cam.width, cam.height);
            for (q, map) in queries.iter().zip(&r.maps) {
                let stem = file_stem(q);
                write_npy_f32(
                    &dir.join(format!("{stem}.npy")),
                    &[h as usize, w as usize],
                    map,
                )?;
                let png = png_rgb(w, h, &heat_over(map, &r.alpha, min_alpha, &r.rgb))?;
                write_bytes_atomic(&dir.join(format!("{stem}.png")), &png)?;
            }
            write_npy_f32(&dir.join("alpha.npy"), &[h as usize, w as usize], &r.alpha)?;
            write_bytes_atomic(&dir.join("features.png"), &png_rgb(w, h, &r.rgb)?)?;
            pixels += (w * h) as u64;
            bar.inc(1);
        }
        bar.finish();
        let s = t0.elapsed().as_secs_f64();
        let summary = serde_json::json!({
            "command": "query",
            "run": run.dir.display().to_string(),
            "queries": queries,
            "cameras": cams.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "seconds": s,
        });
        out_dir.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
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
        println!(
            "heat maps: relevancy above 0.5 lit where the opacity is at least {min_alpha} (query.min_alpha); the .npy maps are raw, alpha.npy holds the opacity"
        );
        println!("wrote {}", args.out.display());
        Ok(())
    }
}
