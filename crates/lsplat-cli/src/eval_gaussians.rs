//! `lsplat-engine eval gaussians`: per-Gaussian semantic labels against a labelled
//! point cloud (docs/evaluation.md), as OpenGaussian scores ScanNet scenes
//! (`lsplat_query::pointseg`). Each Gaussian is labelled by the arg-max cosine of its
//! decoded feature over the class list (with several level runs, each class at the
//! level where its relevancy peaks highest over the Gaussians); no rendering.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use lsplat_data::io::write_bytes_atomic;
use lsplat_data::ply::read_labelled_points;
use lsplat_query::knn::KdTree;
use lsplat_query::pointseg::{ground_truth, score};
use serde_json::json;

use crate::eval::{level_lifts, load_level_runs};
use crate::eval_ovs::label_view;
use crate::text::TextSource;
use lsplat_query::lift::{row_similarities, text_rows};

/// OpenGaussian's opacity below which a Gaussian is not scored.
pub const MIN_OPACITY: f32 = 0.1;

/// Options of `eval gaussians`.
#[derive(clap::Args, Debug)]
pub struct GaussiansArgs {
    /// Level runs, in level order; repeat the option.
    #[arg(long = "run", required = true)]
    pub runs: Vec<PathBuf>,
    /// The labelled point cloud (PLY: vertex x, y, z and an integer label property,
    /// e.g. ScanNet's `<scene>_vh_clean_2.labels.ply`).
    #[arg(long)]
    pub points: PathBuf,
    /// The vertex property holding the labels.
    #[arg(long, default_value = "label")]
    pub label_property: String,
    /// The classes scored: one `<label> <name>` per line (e.g. `5 chair`), `#`
    /// comments; points of other labels are not scored.
    #[arg(long)]
    pub classes: PathBuf,
    /// A Gaussian takes the label of the nearest point within this distance (scene
    /// units); farther Gaussians are not scored.
    #[arg(long)]
    pub radius: f64,
    /// Gaussians less opaque than this are not scored [default: 0.1, OpenGaussian's].
    #[arg(long, default_value_t = MIN_OPACITY)]
    pub min_opacity: f32,
    /// Text embeddings with every class name and the canonical phrases.
    /// Without it, the names are encoded with the CLIP model (`--clip`).
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    #[command(flatten)]
    pub clip: crate::clip::ClipArgs,
    /// Autoencoder for LangSplat V1 runs.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// LangSplat's `get_semantic_map` rule: a Gaussian more similar to a canonical
    /// phrase than to every class gets no label (and is wrong).
    #[arg(long)]
    pub negatives: bool,
    /// Output folder: `gaussians.json`.
    #[arg(long)]
    pub out: PathBuf,
}

/// A class list: `(label, name)` per non-blank, non-comment line.
pub fn read_class_list(path: &Path) -> Result<Vec<(u32, String)>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out: Vec<(u32, String)> = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad =
            |what: &str| anyhow::anyhow!("{}: line {}: {what}: `{line}`", path.display(), no + 1);
        let (id, name) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("expected `<label> <name>`"))?;
        let id: u32 = id
            .parse()
            .map_err(|_| bad("the label is not a non-negative integer"))?;
        let name = name.trim().to_string();
        if out.iter().any(|c| c.0 == id) {
            return Err(bad("label listed twice"));
        }
        if out.iter().any(|c| c.1 == name) {
            return Err(bad("name listed twice"));
        }
        out.push((id, name));
    }
    if out.is_empty() {
        bail!("{}: no classes", path.display());
    }
    Ok(out)
}

/// Runs `eval gaussians`.
pub fn run(a: GaussiansArgs) -> Result<()> {
    if !(a.radius.is_finite() && a.radius > 0.0) {
        bail!("--radius {}: must be a positive distance", a.radius);
    }
    if !(0.0..1.0).contains(&a.min_opacity) {
        bail!("--min-opacity {}: must be in [0, 1)", a.min_opacity);
    }
    let t0 = std::time::Instant::now();
    let classes = read_class_list(&a.classes)?;
    let points = read_labelled_points(&a.points, &a.label_property)?;
    let names: Vec<String> = classes.iter().map(|c| c.1.clone()).collect();
    let ids: Vec<u32> = classes.iter().map(|c| c.0).collect();
    let listed = points.labels.iter().filter(|l| ids.contains(l)).count();
    if listed == 0 {
        bail!(
            "{}: no point has a label of {} (labels {:?})",
            a.points.display(),
            a.classes.display(),
            ids
        );
    }
    let runs = load_level_runs(&a.runs)?;
    let text = TextSource::from_args(a.text.as_deref(), &a.clip, &runs[0].config, &a.runs[0])?
        .embed(&names)?;
    let lifts = level_lifts(&runs, &a.runs, a.model.as_deref(), &text)?;
    let (pos, neg) = text_rows(&text, &names)?;
    let mut rows = pos;
    rows.extend(neg);
    let sims: Vec<Vec<f32>> = runs
        .iter()
        .zip(&lifts)
        .map(|(r, l)| row_similarities(&r.features, r.channels, l, &rows))
        .collect::<Result<_, _>>()?;
    let k = names.len();
    let (predicted, level) = label_view(&sims, k, a.negatives);
    let g = &runs[0].gaussians;
    let tree = KdTree::new(&points.positions);
    let mut truth = ground_truth(&tree, &points.labels, &ids, &g.means, a.radius);
    let mut faint = 0usize;
    for (t, &o) in truth.iter_mut().zip(&g.opacity_logits) {
        if 1.0 / (1.0 + (-o).exp()) < a.min_opacity {
            faint += usize::from(*t >= 0);
            *t = -1;
        }
    }
    let s = score(&truth, &predicted, k);
    if s.scored == 0 {
        bail!(
            "no Gaussian has a labelled point of {} within --radius {} (and opacity ≥ {}): nothing to score",
            a.classes.display(),
            a.radius,
            a.min_opacity
        );
    }
    let per_class: Vec<serde_json::Value> = classes
        .iter()
        .zip(&s.classes)
        .zip(&level)
        .map(|(((id, name), c), &l)| {
            json!({
                "label": id, "class": name, "iou": c.iou(), "accuracy": c.accuracy(),
                "true": c.truth, "predicted": c.predicted, "both": c.both,
                "level": runs[l].config.scene.level,
            })
        })
        .collect();
    let report = json!({
        "protocol": "per-Gaussian segmentation (OpenGaussian's scripts/eval_scannet.py): mIoU and mAcc over the classes present",
        "points": a.points.display().to_string(),
        "runs": a.runs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "radius": a.radius,
        "min_opacity": a.min_opacity,
        "negatives": a.negatives,
        "gaussians": g.len(),
        "scored": s.scored,
        "left_out_faint": faint,
        "miou": s.miou,
        "macc": s.macc,
        "accuracy": s.accuracy,
        "per_class": per_class,
    });
    std::fs::create_dir_all(&a.out)?;
    let out = a.out.join("gaussians.json");
    write_bytes_atomic(&out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    println!(
        "Gaussians: {} of {} scored against {} labelled points ({} of them of the {k} classes) in {:.2} s",
        s.scored,
        g.len(),
        points.labels.len(),
        listed,
        t0.elapsed().as_secs_f64()
    );
    println!(
        "mIoU {:.4}, mAcc {:.4}, accuracy {:.4}",
        s.miou, s.macc, s.accuracy
    );
    for ((_, name), c) in classes.iter().zip(&s.classes) {
        if let Some(iou) = c.iou().filter(|_| c.truth > 0) {
            println!(
                "  {name:<24} IoU {iou:.4}  acc {:.4}",
                c.accuracy().unwrap_or(0.0)
            );
        }
    }
    println!("wrote {}", out.display());
    Ok(())
}
