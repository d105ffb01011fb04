//! `lsplat-engine eval lerf`: LangSplat's LERF-OVS evaluation (mIoU and localization
//! accuracy) of one to three level runs against LERF's per-frame label files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lsplat_core::Camera;
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_data::io::write_bytes_atomic;
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::labels::{Frame, Query, read_frame};
use lsplat_query::lerf;
use lsplat_query::picture::png_rgb;
use lsplat_render::{BackendVisitor, Device};

use crate::semantic::{Lift, image_relevancy, text_rows};
use crate::views::{Views, file_stem, progress};

/// `eval` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum EvalCommand {
    /// The LERF-OVS protocol (LangSplat's, or LangSplatV2's): per query IoU and localization hit.
    Lerf(LerfArgs),
}

/// How label frames find their cameras.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameMatch {
    /// The camera named like the frame's image (`frame_00041.jpg` → `frame_00041`).
    Name,
    /// LangSplat's rule: frame k is camera k − 1 of the name-sorted cameras.
    Index,
}

/// Whose LERF protocol `eval lerf` follows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolArg {
    /// LangSplat's eval/evaluate_iou_loc.py: 30×30 box smoothing, 7×7 majority vote.
    Langsplat,
    /// LangSplatV2's eval_lerf.py: 29×29 in-image mean, 7×7 in-image mean above ½.
    LangsplatV2,
}

/// Options of `eval lerf`.
#[derive(clap::Args, Debug)]
pub struct LerfArgs {
    /// Level runs, in level order (LangSplat: levels 1, 2, 3); repeat the option.
    /// The level of each query is chosen by the largest smoothed relevancy.
    #[arg(long = "run", required = true)]
    pub runs: Vec<PathBuf>,
    /// Folder of LERF label files (`frame_*.json`, or every `.json` in it).
    #[arg(long)]
    pub labels: PathBuf,
    /// Text embeddings with every category of the labels and the canonical phrases.
    /// Without it, the categories are encoded with the CLIP model (`--clip`).
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    #[command(flatten)]
    pub clip: crate::clip::ClipArgs,
    /// Autoencoder for LangSplat V1 runs (one per scene, shared by the levels).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Output folder: `lerf.json` and an overlay PNG per query.
    #[arg(long)]
    pub out: PathBuf,
    /// How label frames are matched to cameras.
    #[arg(long = "match", value_enum, default_value = "name")]
    pub matching: FrameMatch,
    /// Whose smoothing and clean-up to apply (default: LangSplatV2's for LangSplatV2
    /// runs, LangSplat's for the others).
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolArg>,
    /// Backend to render on (default: the first run's).
    #[arg(long)]
    pub backend: Option<String>,
}

/// Runs an `eval` subcommand.
pub fn run(cmd: EvalCommand) -> Result<()> {
    match cmd {
        EvalCommand::Lerf(a) => lerf_eval(a),
    }
}

/// The label files of a folder, sorted by name.
fn label_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{}: no label files (*.json)", dir.display());
    }
    Ok(files)
}

/// The camera of a frame, at the label's image size.
fn frame_camera(frame: &Frame, cams: &[Camera], how: FrameMatch) -> Result<Camera> {
    let cam = match how {
        FrameMatch::Name => cams.iter().find(|c| c.name == frame.stem()),
        FrameMatch::Index => frame
            .number()
            .and_then(|k| k.checked_sub(1))
            .and_then(|i| cams.get(i as usize)),
    };
    let Some(cam) = cam else {
        let what = match how {
            FrameMatch::Name => format!("no camera is named `{}`", frame.stem()),
            FrameMatch::Index => format!(
                "frame number {:?} has no camera (LangSplat's rule: frame k is camera k−1 of {} name-sorted cameras)",
                frame.number(),
                cams.len()
            ),
        };
        bail!(
            "{}: {what} (image `{}`; cameras: {}{})",
            frame.path.display(),
            frame.image,
            cams.iter()
                .take(8)
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if cams.len() > 8 { ", …" } else { "" }
        );
    };
    lsplat_data::scene::fit_camera(cam, &frame.image, (frame.width, frame.height))
        .with_context(|| format!("{}", frame.path.display()))
}

fn lerf_eval(a: LerfArgs) -> Result<()> {
    let frames: Vec<Frame> = label_files(&a.labels)?
        .iter()
        .map(|p| read_frame(p))
        .collect::<Result<_, _>>()?;
    let runs: Vec<RunInputs> = a
        .runs
        .iter()
        .map(|d| crate::plugins::load_run(d))
        .collect::<Result<_, _>>()?;
    let first = &runs[0];
    let names: Vec<String> = frames
        .iter()
        .flat_map(|f| f.objects.iter().map(|o| o.category.clone()))
        .fold(Vec::new(), |mut v, c| {
            if !v.contains(&c) {
                v.push(c);
            }
            v
        });
    let text = crate::clip::text_embeddings(
        a.text.as_deref(),
        &a.clip,
        &first.config,
        &names,
        &a.runs[0],
    )?;
    for (r, d) in runs.iter().zip(&a.runs).skip(1) {
        let names = |x: &RunInputs| x.cameras.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if r.gaussians.len() != first.gaussians.len()
            || names(r) != names(first)
            || r.channels != first.channels
        {
            bail!(
                "run {} does not match run {} (Gaussians, cameras or channels differ): level runs must share one scene",
                d.display(),
                a.runs[0].display()
            );
        }
    }
    let models: Vec<&str> = runs.iter().map(|r| r.config.train.model.as_str()).collect();
    if let Some(i) = models.iter().position(|m| *m != models[0]) {
        bail!(
            "run {} was trained as {} but run {} as {}: the level runs of one evaluation must share a model",
            a.runs[i].display(),
            models[i],
            a.runs[0].display(),
            models[0]
        );
    }
    let protocol = match a.protocol {
        Some(ProtocolArg::Langsplat) => lerf::Protocol::LangSplat,
        Some(ProtocolArg::LangsplatV2) => lerf::Protocol::LangSplatV2,
        None if models[0] == langsplat_v2::model::NAME => lerf::Protocol::LangSplatV2,
        None => lerf::Protocol::LangSplat,
    };
    let lifts: Vec<Lift> = runs
        .iter()
        .zip(&a.runs)
        .map(|(r, d)| Lift::new(d, r.channels, r.decoder.as_ref(), a.model.as_deref(), &text))
        .collect::<Result<_>>()?;
    // Every category must have an embedding before anything is rendered.
    let mut cats: Vec<String> = Vec::new();
    for f in &frames {
        for o in &f.objects {
            if !cats.contains(&o.category) {
                cats.push(o.category.clone());
            }
        }
    }
    text_rows(&text, &cats)?;
    let cams: Vec<Camera> = frames
        .iter()
        .map(|f| frame_camera(f, &first.cameras, a.matching))
        .collect::<Result<_>>()?;
    let mut cfg = first.config.clone();
    if let Some(b) = &a.backend {
        cfg.device.backend = crate::views::backend_kind(b)?;
    }
    let dev = Device::open(&cfg.device, &cfg.simt)?;
    dev.visit(LerfJob {
        args: a,
        frames,
        cams,
        runs,
        text,
        lifts,
        protocol,
    })
}

struct LerfJob {
    args: LerfArgs,
    frames: Vec<Frame>,
    cams: Vec<Camera>,
    runs: Vec<RunInputs>,
    text: TextEmbeddings,
    lifts: Vec<Lift>,
    protocol: lerf::Protocol,
}

/// The result of one (frame, query) pair.
struct PairResult {
    frame: String,
    query: String,
    iou: f64,
    hit: bool,
    seg_level: usize,
    loc_level: usize,
    candidates: usize,
}

impl BackendVisitor for LerfJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let LerfJob {
            args,
            frames,
            cams,
            runs,
            text,
            lifts,
            protocol,
        } = self;
        std::fs::create_dir_all(&args.out)?;
        let c = runs[0].channels;
        let views: Vec<Views<'_, B>> = runs
            .iter()
            .map(|r| Views::new(&dev, &r.gaussians, &r.features, c, &r.config))
            .collect::<Result<_>>()?;
        let levels: Vec<u8> = runs.iter().map(|r| r.config.scene.level).collect();
        let bar = progress(frames.len() as u64, "frames", runs[0].config.log.progress);
        let t0 = std::time::Instant::now();
        let mut results = Vec::new();
        for (frame, cam) in frames.iter().zip(&cams) {
            bar.set_message(frame.stem().to_string());
            let queries = frame.queries();
            let names: Vec<String> = queries.iter().map(|q| q.category.clone()).collect();
            let (pos, neg) = text_rows(&text, &names)?;
            let per_level: Vec<_> = views
                .iter()
                .zip(&lifts)
                .map(|(v, l)| image_relevancy(v, cam, l, (&l.text(&pos), &l.text(&neg)), None))
                .collect::<Result<_>>()?;
            let (w, h) = (frame.width as usize, frame.height as usize);
            let dir = args.out.join(frame.stem());
            std::fs::create_dir_all(&dir)?;
            for (k, q) in queries.iter().enumerate() {
                let maps: Vec<Vec<f32>> = per_level.iter().map(|l| l.maps[k].clone()).collect();
                let filtered = lerf::smooth_levels(protocol, &maps, w, h)?;
                let seg = lerf::segment_filtered(protocol, &maps, &filtered, w, h);
                let loc = lerf::localize_filtered(&filtered, w);
                let hit = lerf::hit(&loc.candidates, &q.boxes);
                let iou = lerf::iou(&seg.mask, &q.mask);
                let png = overlay(&seg, &loc.candidates, q, w, h);
                write_bytes_atomic(
                    &dir.join(format!("{}.png", file_stem(&q.category))),
                    &png_rgb(frame.width, frame.height, &png)?,
                )?;
                results.push(PairResult {
                    frame: frame.stem().to_string(),
                    query: q.category.clone(),
                    iou,
                    hit,
                    seg_level: seg.level,
                    loc_level: loc.level,
                    candidates: loc.candidates.len(),
                });
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        let n = results.len().max(1) as f64;
        let miou = results.iter().map(|r| r.iou).sum::<f64>() / n;
        let hits = results.iter().filter(|r| r.hit).count();
        let json = serde_json::json!({
            "protocol": protocol.name(),
            "labels": args.labels.display().to_string(),
            "runs": args.runs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "levels": levels,
            "frames": frames.len(),
            "pairs": results.len(),
            "miou": miou,
            "localization_accuracy": hits as f64 / n,
            "localization_hits": hits,
            "per_query": results.iter().map(|r| serde_json::json!({
                "frame": r.frame,
                "query": r.query,
                "iou": r.iou,
                "hit": r.hit,
                "segmentation_level": levels[r.seg_level],
                "localization_level": levels[r.loc_level],
                "candidates": r.candidates,
            })).collect::<Vec<_>>(),
        });
        let out = args.out.join("lerf.json");
        write_bytes_atomic(&out, serde_json::to_string_pretty(&json)?.as_bytes())?;
        println!(
            "LERF: {} frames, {} (frame, query) pairs, {} level run(s) in {:.2} s",
            frames.len(),
            results.len(),
            runs.len(),
            t0.elapsed().as_secs_f64()
        );
        println!(
            "mIoU {:.4}, localization accuracy {:.4} ({hits}/{})",
            miou,
            hits as f64 / n,
            results.len()
        );
        println!("wrote {}", out.display());
        Ok(())
    }
}

/// The overlay of one query: the chosen level's blended relevancy in grey; predicted
/// and true pixels green, predicted only red, true only blue; the boxes yellow; the
/// localization candidates magenta.
fn overlay(
    seg: &lerf::Segmentation,
    candidates: &[(u32, u32)],
    q: &Query,
    w: usize,
    h: usize,
) -> Vec<u8> {
    let (lo, hi) = seg
        .blended
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let mut rgb = Vec::with_capacity(w * h * 3);
    for (i, v) in seg.blended.iter().enumerate() {
        let g = (60.0 + 120.0 * (v - lo) / (hi - lo).max(1e-9)) as u8;
        let px = match (seg.mask[i] != 0, q.mask[i] != 0) {
            (true, true) => [40, 200, 60],
            (true, false) => [220, 50, 40],
            (false, true) => [50, 90, 230],
            (false, false) => [g, g, g],
        };
        rgb.extend(px);
    }
    let mut put = |x: i64, y: i64, c: [u8; 3]| {
        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
            let i = (y as usize * w + x as usize) * 3;
            rgb[i..i + 3].copy_from_slice(&c);
        }
    };
    for b in &q.boxes {
        let (x0, x1) = (b[0].min(b[2]) as i64, b[0].max(b[2]) as i64);
        let (y0, y1) = (b[1].min(b[3]) as i64, b[1].max(b[3]) as i64);
        for x in x0..=x1 {
            put(x, y0, [250, 220, 30]);
            put(x, y1, [250, 220, 30]);
        }
        for y in y0..=y1 {
            put(x0, y, [250, 220, 30]);
            put(x1, y, [250, 220, 30]);
        }
    }
    for &(x, y) in candidates.iter().take(4096) {
        for d in -3i64..=3 {
            put(x as i64 + d, y as i64, [240, 40, 240]);
            put(x as i64, y as i64 + d, [240, 40, 240]);
        }
    }
    rgb
}
