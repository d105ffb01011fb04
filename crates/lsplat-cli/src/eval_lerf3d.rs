//! `eval lerf --protocol 3d`: LERF-OVS scored as OpenGaussian and Dr. Splat score it
//! (docs/evaluation.md). Each category selects Gaussians by their own relevancy (each
//! Gaussian's feature decoded as the run's model decodes it: through the autoencoder
//! for LangSplat V1, the codebook for LangSplatV2, as stored for 512-D runs), the
//! selected Gaussians are rendered alone at every frame labelling the category, and
//! their accumulated opacity, binarised, is the mask scored against the polygons.

use anyhow::{Result, bail};
use lsplat_core::{Camera, Gaussians};
use lsplat_data::io::write_bytes_atomic;
use lsplat_device::Backend;
use lsplat_query::labels::Query;
use lsplat_query::picture::png_rgb;
use lsplat_query::select::{self, ALPHA_THRESHOLD, SELECT_THRESHOLD, Selection};
use lsplat_query::{CANONICAL, lerf};
use serde_json::json;

use crate::eval::LerfInputs;
use crate::eval_report::{Outcome, Pair, overlay_path};
use crate::progress::{Cadence, Progress};
use crate::views::Views;
use lsplat_query::lift::{relevancy_of, row_similarities, text_rows};

/// Options of the 3D protocol (`--protocol 3d` or `all`).
#[derive(clap::Args, Debug, Default)]
pub struct Lerf3dArgs {
    /// 3D protocol: select the Gaussians whose clip(2n − 1, 0, 1) is above this, n
    /// being their relevancy normalised to [0, 1] over all Gaussians [default: 0.4,
    /// LangSplat's mask threshold].
    #[arg(long, value_name = "T")]
    pub select_threshold: Option<f32>,
    /// 3D protocol: a pixel is in the mask when the selected Gaussians' rendered
    /// opacity is above this [default: 0.7, OpenGaussian's].
    #[arg(long, value_name = "A")]
    pub alpha_threshold: Option<f32>,
    /// 3D protocol: blend each Gaussian's relevancy with the mean over its K nearest
    /// centres before selecting (Dr. Splat-style evaluations use 10) [default: 0, none].
    #[arg(long, value_name = "K")]
    pub knn: Option<usize>,
}

/// The 3D protocol's settings, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Select3d {
    /// Threshold on the normalised relevancy's `clip(2n − 1, 0, 1)`.
    pub threshold: f32,
    /// Threshold on the rendered opacity.
    pub alpha: f32,
    /// Neighbours of the relevancy smoothing (0: none).
    pub knn: usize,
}

/// Most neighbours `--knn` takes.
const MAX_KNN: usize = 256;

impl Lerf3dArgs {
    /// The settings when the 3D protocol runs; the options without it are an error.
    pub fn validate(&self, three_d: bool) -> Result<Option<Select3d>> {
        let given =
            self.select_threshold.is_some() || self.alpha_threshold.is_some() || self.knn.is_some();
        if !three_d {
            if given {
                bail!(
                    "--select-threshold, --alpha-threshold and --knn apply to the 3D protocol: add --protocol 3d (or all)"
                );
            }
            return Ok(None);
        }
        let unit = |v: f32, name: &str| -> Result<f32> {
            if !(0.0..1.0).contains(&v) {
                bail!("{name} {v}: must be in [0, 1) (at 1 nothing could be selected)");
            }
            Ok(v)
        };
        let knn = self.knn.unwrap_or(0);
        if knn > MAX_KNN {
            bail!("--knn {knn}: at most {MAX_KNN} neighbours");
        }
        Ok(Some(Select3d {
            threshold: unit(
                self.select_threshold.unwrap_or(SELECT_THRESHOLD),
                "--select-threshold",
            )?,
            alpha: unit(
                self.alpha_threshold.unwrap_or(ALPHA_THRESHOLD),
                "--alpha-threshold",
            )?,
            knn,
        }))
    }
}

/// The Gaussians at `idx`.
fn subset(g: &Gaussians, idx: &[u32]) -> Gaussians {
    let pick = |i: &u32| *i as usize;
    Gaussians {
        means: idx.iter().map(|i| g.means[pick(i)]).collect(),
        log_scales: idx.iter().map(|i| g.log_scales[pick(i)]).collect(),
        rotations: idx.iter().map(|i| g.rotations[pick(i)]).collect(),
        opacity_logits: idx.iter().map(|i| g.opacity_logits[pick(i)]).collect(),
    }
}

/// The accumulated opacity of a render.
fn render_alpha<B: Backend>(views: &Views<'_, B>, cam: &Camera) -> Result<Vec<f32>> {
    let mut alpha = Vec::with_capacity(cam.pixel_count());
    views.render(cam, |band| {
        alpha.extend_from_slice(band.alpha);
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(alpha)
}

/// Every category's selection: per-Gaussian relevancy of each level run, smoothing,
/// level and threshold.
pub fn selections(i: &LerfInputs, cats: &[String], s: &Select3d) -> Result<Vec<Selection>> {
    let (pos, neg) = text_rows(&i.text, cats)?;
    let (q, j) = (cats.len(), CANONICAL.len());
    let mut rows = pos;
    rows.extend(neg);
    let rel: Vec<Vec<f32>> = i
        .runs
        .iter()
        .zip(&i.lifts)
        .map(|(r, l)| {
            Ok(relevancy_of(
                &row_similarities(&r.features, r.channels, l, &rows)?,
                q,
                j,
            ))
        })
        .collect::<Result<_>>()?;
    let means = &i.runs[0].gaussians.means;
    let k = s.knn.min(means.len());
    let nb = if k > 0 {
        select::neighbours(means, k)
    } else {
        Vec::new()
    };
    Ok((0..q)
        .map(|c| {
            let levels: Vec<Vec<f32>> = rel
                .iter()
                .map(|r| r.iter().skip(c).step_by(q).copied().collect())
                .collect();
            select::select(&levels, &nb, k, s.threshold)
        })
        .collect())
}

/// The 3D protocol.
pub fn lerf_3d<B: Backend>(i: &LerfInputs, dev: &B, s: &Select3d) -> Result<Outcome> {
    let queries: Vec<Vec<Query>> = i.frames.iter().map(|f| f.queries()).collect();
    let mut cats: Vec<String> = Vec::new();
    for q in queries.iter().flatten() {
        if !cats.contains(&q.category) {
            cats.push(q.category.clone());
        }
    }
    let sels = selections(i, &cats, s)?;
    let levels: Vec<u8> = i.runs.iter().map(|r| r.config.scene.level).collect();
    let g = &i.runs[0].gaussians;
    let dir = i.args.out.join("3d");
    let log = &i.runs[0].config.log;
    let mut bar = Progress::new(
        "eval 3d",
        cats.len() as u64,
        "queries",
        log.progress,
        Cadence::of(log),
    );
    let mut found: Vec<((usize, usize), Pair)> = Vec::new();
    for (cat, sel) in cats.iter().zip(&sels) {
        let ones = vec![1.0f32; sel.gaussians.len()];
        let views = if sel.gaussians.is_empty() {
            None
        } else {
            let cfg = &i.runs[sel.level].config;
            Some(Views::new(dev, &subset(g, &sel.gaussians), &ones, 1, cfg)?)
        };
        for (fi, (frame, cam)) in i.frames.iter().zip(&i.cams).enumerate() {
            let Some((k, q)) = queries[fi]
                .iter()
                .enumerate()
                .find(|(_, q)| &q.category == cat)
            else {
                continue;
            };
            let alpha = match &views {
                Some(v) => render_alpha(v, cam)?,
                None => vec![0.0; cam.pixel_count()],
            };
            let mask = select::binarize(&alpha, s.alpha);
            let png = overlay(&alpha, &mask, q);
            let path = overlay_path(&dir, frame.stem(), cat);
            std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
            write_bytes_atomic(&path, &png_rgb(frame.width, frame.height, &png)?)?;
            let extra = json!({
                "level": levels[sel.level],
                "selected": sel.gaussians.len(),
                "level_scores": sel.scores,
                "mask_pixels": mask.iter().filter(|m| **m != 0).count(),
            });
            found.push((
                (fi, k),
                Pair {
                    frame: frame.stem().to_string(),
                    query: cat.clone(),
                    iou: lerf::iou(&mask, &q.mask),
                    extra: extra.as_object().cloned().unwrap_or_default(),
                },
            ));
        }
        bar.inc(1);
    }
    bar.finish();
    found.sort_by_key(|f| f.0);
    let protocol = format!(
        "3D LERF-OVS (OpenGaussian / Dr. Splat): Gaussians with clip(2n − 1, 0, 1) > {} of their normalised relevancy{}, rendered alone, opacity > {}",
        s.threshold,
        if s.knn > 0 {
            format!(" (blended over {} nearest)", s.knn)
        } else {
            String::new()
        },
        s.alpha
    );
    let mut o = Outcome::new(
        "3D",
        protocol,
        "lerf_3d.json",
        found.into_iter().map(|f| f.1).collect(),
    )?;
    o.fields = vec![
        ("select_threshold".into(), json!(s.threshold), String::new()),
        ("alpha_threshold".into(), json!(s.alpha), String::new()),
        ("knn".into(), json!(s.knn), String::new()),
    ];
    Ok(o)
}

/// The selected Gaussians' opacity in grey; predicted and true pixels green,
/// predicted only red, true only blue.
fn overlay(alpha: &[f32], mask: &[u8], q: &Query) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(alpha.len() * 3);
    for ((a, m), t) in alpha.iter().zip(mask).zip(&q.mask) {
        let g = (40.0 + 160.0 * a.clamp(0.0, 1.0)) as u8;
        rgb.extend(match (*m != 0, *t != 0) {
            (true, true) => [40, 200, 60],
            (true, false) => [220, 50, 40],
            (false, true) => [50, 90, 230],
            (false, false) => [g, g, g],
        });
    }
    rgb
}
