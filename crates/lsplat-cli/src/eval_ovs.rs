//! `lsplat-engine eval 3dovs`: the 3D-OVS benchmark (docs/evaluation.md). Every
//! pixel of each annotated view is labelled by the arg-max over the scene's
//! categories and scored per category as 3D-OVS scores it (`lsplat_query::ovs`).
//!
//! Relevancy is a monotone function of a pixel's cosine with the category (the
//! negatives are the same for every category), so the arg-max relevancy is the
//! arg-max cosine; it is taken on the cosines, which float32's saturated sigmoid
//! cannot tie. With several level runs, each category uses the level where its
//! relevancy peaks highest in the view (as LERF's 2D protocol chooses a query's level).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use lsplat_core::Camera;
use lsplat_data::io::write_bytes_atomic;
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::CANONICAL;
use lsplat_query::lerf::first_max;
use lsplat_query::ovs::score::{ViewScore, label_pixels, score_view};
use lsplat_query::ovs::{OvsFrame, OvsScene, read_scene};
use lsplat_query::picture::png_rgb;
use lsplat_render::BackendVisitor;
use serde_json::{Value, json};

use crate::eval::{FrameMatch, level_lifts, load_level_runs, open_device};
use crate::progress::{Cadence, Progress};
use crate::text::TextSource;
use crate::views::Views;
use lsplat_query::lift::{Lift, image_similarities, relevancy_of, text_rows};

/// Options of `eval 3dovs`.
#[derive(clap::Args, Debug)]
pub struct OvsArgs {
    /// Level runs, in level order; repeat the option.
    #[arg(long = "run", required = true)]
    pub runs: Vec<PathBuf>,
    /// The 3D-OVS scene folder (with `segmentations/`), or its `segmentations` folder.
    #[arg(long)]
    pub labels: PathBuf,
    /// Text embeddings with every class of `classes.txt` and the canonical phrases.
    /// Without it, the names are encoded with the CLIP model (`--clip`).
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    #[command(flatten)]
    pub clip: crate::clip::ClipArgs,
    /// Autoencoder for LangSplat V1 runs.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Output folder: `3dovs.json` and a label picture per view.
    #[arg(long)]
    pub out: PathBuf,
    /// How view folders are matched to cameras: `index` (3D-OVS's rule: view k is
    /// camera k of the name-sorted cameras, from 0) or `name` (the camera named like
    /// the folder).
    #[arg(long = "match", value_enum, default_value = "index")]
    pub matching: FrameMatch,
    /// LangSplat's `get_semantic_map` rule: a pixel more similar to a canonical phrase
    /// than to every category gets no label.
    #[arg(long)]
    pub negatives: bool,
    /// Leave out (view, category) pairs where the category is neither true nor
    /// predicted (3D-OVS scores them 0).
    #[arg(long)]
    pub skip_absent: bool,
    /// Backend to render on (default: the first run's).
    #[arg(long)]
    pub backend: Option<String>,
}

/// The camera of a view, at its masks' size.
fn view_camera(f: &OvsFrame, cams: &[Camera], how: FrameMatch) -> Result<Camera> {
    let name = f
        .dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let cam = match how {
        FrameMatch::Index => cams.get(f.number),
        FrameMatch::Name => cams.iter().find(|c| c.name == name),
    };
    let Some(cam) = cam else {
        bail!(
            "{}: view {} has no camera ({}; the run has {} cameras: {}{})",
            f.dir.display(),
            f.number,
            match how {
                FrameMatch::Index => "3D-OVS's rule: view k is camera k of the name-sorted cameras",
                FrameMatch::Name => "no camera is named like the folder",
            },
            cams.len(),
            cams.iter()
                .take(8)
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if cams.len() > 8 { ", …" } else { "" }
        );
    };
    lsplat_data::scene::fit_camera(cam, &name, (f.width, f.height))
        .with_context(|| format!("{}", f.dir.display()))
}

/// Runs `eval 3dovs`.
pub fn run(a: OvsArgs) -> Result<()> {
    let scene = read_scene(&a.labels)?;
    let runs = load_level_runs(&a.runs)?;
    let text = TextSource::from_args(a.text.as_deref(), &a.clip, &runs[0].config, &a.runs[0])?
        .embed(&scene.classes)?;
    let lifts = level_lifts(&runs, &a.runs, a.model.as_deref(), &text)?;
    let cams: Vec<Camera> = scene
        .frames
        .iter()
        .map(|f| view_camera(f, &runs[0].cameras, a.matching))
        .collect::<Result<_>>()?;
    let (pos, neg) = text_rows(&text, &scene.classes)?;
    let mut rows = pos;
    rows.extend(neg);
    let dev = open_device(&runs[0], a.backend.as_deref())?;
    dev.visit(OvsJob {
        args: a,
        scene,
        cams,
        runs,
        lifts,
        rows,
    })
}

struct OvsJob {
    args: OvsArgs,
    scene: OvsScene,
    cams: Vec<Camera>,
    runs: Vec<RunInputs>,
    lifts: Vec<Lift>,
    /// Class rows, then the canonical phrases'.
    rows: Vec<f32>,
}

/// Per-pixel labels of one view from each level's `[P, K + J]` similarities.
pub fn label_view(sims: &[Vec<f32>], k: usize, negatives: bool) -> (Vec<i32>, Vec<usize>) {
    let j = CANONICAL.len();
    let level: Vec<usize> = (0..k)
        .map(|c| {
            let peaks: Vec<f32> = sims
                .iter()
                .map(|s| {
                    relevancy_of(s, k, j)
                        .iter()
                        .skip(c)
                        .step_by(k)
                        .copied()
                        .fold(f32::NEG_INFINITY, f32::max)
                })
                .collect();
            first_max(&peaks)
        })
        .collect();
    let p = sims[0].len() / (k + j);
    let at = |l: usize, px: usize, col: usize| sims[l][px * (k + j) + col];
    let mut class_sims = Vec::with_capacity(p * k);
    for px in 0..p {
        class_sims.extend((0..k).map(|c| at(level[c], px, c)));
    }
    let mut labels = label_pixels(&class_sims, k, None);
    if negatives {
        let mut neg = Vec::with_capacity(p * j);
        for (px, &l) in labels.iter().enumerate() {
            let lv = level[l.max(0) as usize];
            neg.extend((k..k + j).map(|col| at(lv, px, col)));
        }
        labels = label_pixels(&class_sims, k, Some((&neg, j)));
    }
    (labels, level)
}

impl BackendVisitor for OvsJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let OvsJob {
            args,
            scene,
            cams,
            runs,
            lifts,
            rows,
        } = self;
        let t0 = std::time::Instant::now();
        let k = scene.classes.len();
        let c = runs[0].channels;
        let views: Vec<Views<'_, B>> = runs
            .iter()
            .map(|r| Ok(Views::new(&dev, &r.gaussians, &r.features, c, &r.config)?))
            .collect::<Result<_>>()?;
        let log = &runs[0].config.log;
        let mut bar = Progress::new(
            "eval 3dovs",
            scene.frames.len() as u64,
            "views",
            log.progress,
            Cadence::of(log),
        );
        let mut scores: Vec<ViewScore> = Vec::new();
        let mut pictures = Vec::new();
        let mut levels_used = Vec::new();
        for (f, cam) in scene.frames.iter().zip(&cams) {
            let masks = f.masks(&scene.classes)?;
            let sims: Vec<Vec<f32>> = views
                .iter()
                .zip(&lifts)
                .map(|(v, l)| image_similarities(v, cam, l, &rows))
                .collect::<Result<_, _>>()?;
            let (labels, level) = label_view(&sims, k, args.negatives);
            scores.push(score_view(&labels, &masks));
            pictures.push(picture(&labels, &masks));
            levels_used.push(level);
            bar.inc(1);
        }
        bar.finish();
        let mut pairs: Vec<(usize, f64)> = Vec::new();
        for s in &scores {
            for (ci, &iou) in s.ious.iter().enumerate() {
                if !(args.skip_absent && !s.present[ci] && s.predicted[ci] == 0) {
                    pairs.push((ci, iou));
                }
            }
        }
        if pairs.is_empty() {
            bail!(
                "{}: nothing to score: every category is absent from every view (--skip-absent)",
                scene.dir.display()
            );
        }
        let miou = pairs.iter().map(|p| p.1).sum::<f64>() / pairs.len() as f64;
        let accuracy = scores.iter().map(|s| s.accuracy).sum::<f64>() / scores.len() as f64;
        let per_class: Vec<Value> = scene
            .classes
            .iter()
            .enumerate()
            .map(|(ci, name)| {
                let v: Vec<f64> = pairs.iter().filter(|p| p.0 == ci).map(|p| p.1).collect();
                let mean = (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
                json!({"class": name, "iou": mean, "views": v.len()})
            })
            .collect();
        let level_of = |l: usize| runs[l].config.scene.level;
        let per_view: Vec<Value> = scene
            .frames
            .iter()
            .zip(&cams)
            .zip(&scores)
            .zip(&levels_used)
            .map(|(((f, cam), s), lv)| {
                json!({
                    "view": f.number,
                    "camera": cam.name,
                    "accuracy": s.accuracy,
                    "miou": s.ious.iter().sum::<f64>() / k as f64,
                    "ious": scene.classes.iter().zip(&s.ious).map(|(c, v)| (c.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
                    "absent": scene.classes.iter().zip(&s.present).filter(|p| !*p.1).map(|p| p.0.clone()).collect::<Vec<_>>(),
                    "levels": lv.iter().map(|&l| level_of(l)).collect::<Vec<_>>(),
                    "unlisted_masks": f.unlisted,
                })
            })
            .collect();
        std::fs::create_dir_all(&args.out)?;
        for (f, png) in scene.frames.iter().zip(pictures) {
            let path = args.out.join(format!("{:02}.png", f.number));
            write_bytes_atomic(&path, &png_rgb(f.width, f.height, &png)?)?;
        }
        let report = json!({
            "protocol": "3D-OVS (Liu et al. 2023, renderer.py evaluation_segmentation_test): arg-max over the classes, scikit-learn's per-class Jaccard and subset accuracy",
            "labels": scene.dir.display().to_string(),
            "runs": args.runs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "levels": runs.iter().map(|r| r.config.scene.level).collect::<Vec<_>>(),
            "classes": scene.classes,
            "negatives": args.negatives,
            "skip_absent": args.skip_absent,
            "views": scene.frames.len(),
            "pairs": pairs.len(),
            "miou": miou,
            "accuracy": accuracy,
            "per_class": per_class,
            "per_view": per_view,
        });
        let out = args.out.join("3dovs.json");
        write_bytes_atomic(&out, serde_json::to_string_pretty(&report)?.as_bytes())?;
        println!(
            "3D-OVS: {} views, {k} classes, {} (view, class) pairs, {} level run(s) in {:.2} s",
            scene.frames.len(),
            pairs.len(),
            runs.len(),
            t0.elapsed().as_secs_f64()
        );
        println!("mIoU {miou:.4}, accuracy {accuracy:.4}");
        for (name, v) in scene.classes.iter().zip(&per_class) {
            if let Some(iou) = v["iou"].as_f64() {
                println!("  {name:<24} {iou:.4}");
            }
        }
        let unlisted: usize = scene.frames.iter().map(|f| f.unlisted.len()).sum();
        if unlisted > 0 {
            println!(
                "note: {unlisted} mask file(s) name no class of classes.txt and were not scored"
            );
        }
        println!("wrote {}", out.display());
        Ok(())
    }
}

/// A view's labels in colour (one hue per class, black for none), with the pixels
/// whose label is wrong darkened.
fn picture(labels: &[i32], masks: &[Vec<u8>]) -> Vec<u8> {
    let hue = |c: i32| -> [u8; 3] {
        if c < 0 {
            return [0, 0, 0];
        }
        let h = (c as f32 * 0.618_034).fract();
        lsplat_query::picture::turbo(0.1 + 0.8 * h)
    };
    let mut rgb = Vec::with_capacity(labels.len() * 3);
    for (p, &l) in labels.iter().enumerate() {
        let right = l >= 0 && masks[l as usize][p] != 0;
        let [r, g, b] = hue(l);
        let s = |v: u8| if right || l < 0 { v } else { v / 3 };
        rgb.extend([s(r), s(g), s(b)]);
    }
    rgb
}
