//! `lsplat-engine eval`: LERF-OVS (LangSplat's and LangSplatV2's 2D protocols, and
//! the 3D protocol of `eval_lerf3d.rs`), 3D-OVS (`eval_ovs.rs`) and per-Gaussian
//! segmentation against a labelled point cloud (`eval_gaussians.rs`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use lsplat_core::Camera;
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_data::io::write_bytes_atomic;
use lsplat_data::run_dir::RunInputs;
use lsplat_device::Backend;
use lsplat_query::labels::{Frame, Query, read_frames};
use lsplat_query::lerf;
use lsplat_query::picture::png_rgb;
use lsplat_render::{BackendVisitor, Device};
use serde_json::json;

use crate::eval_lerf3d::{Lerf3dArgs, Select3d};
use crate::eval_report::{Common, Outcome, Pair, overlay_path};
use crate::progress::{Cadence, Progress};
use crate::text::TextSource;
use crate::views::Views;
use lsplat_query::lift::{Lift, image_relevancy, text_rows};

/// `eval` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum EvalCommand {
    /// LERF-OVS: LangSplat's or LangSplatV2's 2D protocol (per query IoU and
    /// localization hit), the 3D protocol (Gaussians selected by their own relevancy),
    /// or both side by side.
    Lerf(LerfArgs),
    /// The 3D-OVS benchmark: every pixel labelled by the arg-max over the scene's
    /// categories, mIoU over them.
    #[command(name = "3dovs")]
    Ovs(crate::eval_ovs::OvsArgs),
    /// Per-Gaussian semantic labels against a labelled point cloud (ScanNet-style mIoU
    /// and mAcc over a class list).
    Gaussians(crate::eval_gaussians::GaussiansArgs),
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
    /// The 3D protocol (OpenGaussian, Dr. Splat): Gaussians selected by their own
    /// normalised relevancy, their rendered opacity as the mask.
    #[value(name = "3d")]
    ThreeD,
    /// The run's 2D protocol and the 3D protocol, side by side.
    All,
}

/// Options of `eval lerf`.
#[derive(clap::Args, Debug)]
pub struct LerfArgs {
    /// Level runs, in level order (LangSplat: levels 1, 2, 3); repeat the option.
    /// The level of each query is chosen by the largest smoothed relevancy.
    #[arg(long = "run", required_unless_present = "model_path")]
    pub runs: Vec<PathBuf>,
    /// LangSplat's model folder instead of --run: its level runs `MODEL_1`,
    /// `MODEL_2`, `MODEL_3` (those that exist), as `train -m MODEL --feature_level L`
    /// writes them.
    #[arg(
        short = 'm',
        long = "model_path",
        alias = "model-path",
        value_name = "MODEL",
        conflicts_with = "runs"
    )]
    pub model_path: Option<PathBuf>,
    /// Folder of LERF label files (`frame_*.json`, or every `.json` in it).
    #[arg(long)]
    pub labels: PathBuf,
    /// Text embeddings with every category of the labels and the canonical phrases.
    /// Without it, the names are encoded with the CLIP model (`--clip`).
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    #[command(flatten)]
    pub clip: crate::clip::ClipArgs,
    /// Autoencoder for LangSplat V1 runs (one per scene, shared by the levels).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Output folder: `lerf.json` (2D) and `lerf_3d.json` (3D), and an overlay PNG per
    /// (frame, query) (`<frame>/` for 2D, `3d/<frame>/` for 3D).
    #[arg(long)]
    pub out: PathBuf,
    /// How label frames are matched to cameras.
    #[arg(long = "match", value_enum, default_value = "name")]
    pub matching: FrameMatch,
    /// The protocol: a 2D one (default: LangSplatV2's for LangSplatV2 runs, LangSplat's
    /// for the others), `3d`, or `all` (the run's 2D protocol and `3d` side by side).
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolArg>,
    /// Options of the 3D protocol.
    #[command(flatten)]
    pub three_d: Lerf3dArgs,
    /// Backend to render on (default: the first run's).
    #[arg(long)]
    pub backend: Option<String>,
}

/// Runs an `eval` subcommand.
pub fn run(cmd: EvalCommand) -> Result<()> {
    match cmd {
        EvalCommand::Lerf(a) => lerf_eval(a),
        EvalCommand::Ovs(a) => crate::eval_ovs::run(a),
        EvalCommand::Gaussians(a) => crate::eval_gaussians::run(a),
    }
}

/// The camera of a frame, at the label's image size.
pub fn frame_camera(frame: &Frame, cams: &[Camera], how: FrameMatch) -> Result<Camera> {
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

/// Level runs of one scene (same Gaussians, cameras, channels and model).
pub fn load_level_runs(dirs: &[PathBuf]) -> Result<Vec<RunInputs>> {
    let runs: Vec<RunInputs> = dirs
        .iter()
        .map(|d| crate::plugins::load_run(d))
        .collect::<Result<_, _>>()?;
    let first = &runs[0];
    for (r, d) in runs.iter().zip(dirs).skip(1) {
        let names = |x: &RunInputs| x.cameras.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if r.gaussians.len() != first.gaussians.len()
            || names(r) != names(first)
            || r.channels != first.channels
        {
            bail!(
                "run {} does not match run {} (Gaussians, cameras or channels differ): level runs must share one scene",
                d.display(),
                dirs[0].display()
            );
        }
    }
    let models: Vec<&str> = runs.iter().map(|r| r.config.train.model.as_str()).collect();
    if let Some(i) = models.iter().position(|m| *m != models[0]) {
        bail!(
            "run {} was trained as {} but run {} as {}: the level runs of one evaluation must share a model",
            dirs[i].display(),
            models[i],
            dirs[0].display(),
            models[0]
        );
    }
    Ok(runs)
}

/// The lift of each level run.
pub fn level_lifts(
    runs: &[RunInputs],
    dirs: &[PathBuf],
    model: Option<&std::path::Path>,
    text: &TextEmbeddings,
) -> Result<Vec<Lift>> {
    runs.iter()
        .zip(dirs)
        .map(|(r, d)| Lift::new(d, r.channels, r.decoder.as_ref(), model, text))
        .collect::<Result<_, _>>()
        .map_err(Into::into)
}

/// The device the runs render on: the first run's, or `backend`.
pub fn open_device(run: &RunInputs, backend: Option<&str>) -> Result<Device> {
    let mut cfg = run.config.clone();
    if let Some(b) = backend {
        cfg.device.backend = crate::views::backend_kind(b)?;
    }
    crate::scene::open_device(&mut cfg)
}

fn lerf_eval(mut a: LerfArgs) -> Result<()> {
    if let Some(m) = &a.model_path {
        a.runs = (1..=3)
            .map(|l| crate::folders::run_dir(m, &[l]))
            .filter(|d| d.is_dir())
            .collect();
        if a.runs.is_empty() {
            bail!(
                "-m {}: no level runs {} (train them with `train -m {} --feature_level L`)",
                m.display(),
                crate::folders::run_dir(m, &[1]).display(),
                m.display()
            );
        }
    }
    let frames = read_frames(&a.labels)?;
    let runs = load_level_runs(&a.runs)?;
    let model = runs[0].config.train.model.as_str();
    let run_2d = if model == langsplat_v2::model::NAME {
        lerf::Protocol::LangSplatV2
    } else {
        lerf::Protocol::LangSplat
    };
    let (protocol, three_d) = match a.protocol {
        Some(ProtocolArg::Langsplat) => (Some(lerf::Protocol::LangSplat), false),
        Some(ProtocolArg::LangsplatV2) => (Some(lerf::Protocol::LangSplatV2), false),
        Some(ProtocolArg::ThreeD) => (None, true),
        Some(ProtocolArg::All) => (Some(run_2d), true),
        None => (Some(run_2d), false),
    };
    let select = a.three_d.validate(three_d)?;
    // Every category must have an embedding before anything is rendered.
    let mut cats: Vec<String> = Vec::new();
    for f in &frames {
        for o in &f.objects {
            if !cats.contains(&o.category) {
                cats.push(o.category.clone());
            }
        }
    }
    let text = TextSource::from_args(a.text.as_deref(), &a.clip, &runs[0].config, &a.runs[0])?
        .embed(&cats)?;
    let lifts = level_lifts(&runs, &a.runs, a.model.as_deref(), &text)?;
    let cams: Vec<Camera> = frames
        .iter()
        .map(|f| frame_camera(f, &runs[0].cameras, a.matching))
        .collect::<Result<_>>()?;
    for (k, c) in cams.iter().enumerate() {
        if let Some(j) = cams[..k].iter().position(|d| d.name == c.name) {
            bail!(
                "{}: frame `{}` is camera `{}`, as {} is: one label file per frame",
                frames[k].path.display(),
                frames[k].stem(),
                c.name,
                frames[j].path.display()
            );
        }
    }
    // Memory of one frame, from the label file's header, before anything is drawn: a
    // 0/1 mask per query, and per level the relevancy maps (4 B per query), the
    // picture and the smoothed maps.
    let levels = runs.len() as u64;
    for f in &frames {
        let mut q: Vec<&str> = f.objects.iter().map(|o| o.category.as_str()).collect();
        q.sort_unstable();
        q.dedup();
        let q = q.len() as u64;
        lsplat_core::memory::check_fits(
            &format!(
                "{}: {}x{} image, {q} queries, {levels} levels",
                f.path.display(),
                f.width,
                f.height
            ),
            f.width as u64 * f.height as u64,
            q + levels * (4 * q + 3 + 12) + 8,
        )?;
    }
    let dev = open_device(&runs[0], a.backend.as_deref())?;
    dev.visit(LerfJob {
        inputs: LerfInputs {
            args: a,
            frames,
            cams,
            runs,
            text,
            lifts,
        },
        protocol,
        select,
    })
}

/// What every LERF protocol reads.
pub struct LerfInputs {
    /// The command's options.
    pub args: LerfArgs,
    /// Label frames, in file order.
    pub frames: Vec<Frame>,
    /// Their cameras, at the labels' image sizes.
    pub cams: Vec<Camera>,
    /// The level runs.
    pub runs: Vec<RunInputs>,
    /// Embeddings of every category and the canonical phrases.
    pub text: TextEmbeddings,
    /// Each run's lift into the text space.
    pub lifts: Vec<Lift>,
}

struct LerfJob {
    inputs: LerfInputs,
    protocol: Option<lerf::Protocol>,
    select: Option<Select3d>,
}

impl BackendVisitor for LerfJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let LerfJob {
            inputs,
            protocol,
            select,
        } = self;
        let t0 = std::time::Instant::now();
        let mut outcomes = Vec::new();
        if let Some(p) = protocol {
            outcomes.push(lerf_2d(&inputs, &dev, p)?);
        }
        if let Some(s) = select {
            outcomes.push(crate::eval_lerf3d::lerf_3d(&inputs, &dev, &s)?);
        }
        let i = &inputs;
        let common = Common {
            labels: i.args.labels.clone(),
            runs: i.args.runs.clone(),
            levels: i.runs.iter().map(|r| r.config.scene.level).collect(),
            frames: i.frames.len(),
            clipped: i.frames.iter().map(|f| f.clipped).sum(),
            out: i.args.out.clone(),
        };
        crate::eval_report::finish(&common, &outcomes, i.runs.len(), t0.elapsed().as_secs_f64())
    }
}

/// LangSplat's (or LangSplatV2's) 2D protocol on rendered relevancy maps.
fn lerf_2d<B: Backend>(i: &LerfInputs, dev: &B, protocol: lerf::Protocol) -> Result<Outcome> {
    let c = i.runs[0].channels;
    let views: Vec<Views<'_, B>> = i
        .runs
        .iter()
        .map(|r| Ok(Views::new(dev, &r.gaussians, &r.features, c, &r.config)?))
        .collect::<Result<_>>()?;
    let levels: Vec<u8> = i.runs.iter().map(|r| r.config.scene.level).collect();
    let log = &i.runs[0].config.log;
    let mut bar = Progress::new(
        "eval",
        i.frames.len() as u64,
        "frames",
        log.progress,
        Cadence::of(log),
    );
    let mut pairs = Vec::new();
    let mut hits = 0;
    std::fs::create_dir_all(&i.args.out)?;
    for (frame, cam) in i.frames.iter().zip(&i.cams) {
        let queries = frame.queries();
        let names: Vec<String> = queries.iter().map(|q| q.category.clone()).collect();
        let (pos, neg) = text_rows(&i.text, &names)?;
        let per_level: Vec<_> = views
            .iter()
            .zip(&i.lifts)
            .map(|(v, l)| image_relevancy(v, cam, l, (&l.text(&pos), &l.text(&neg)), None))
            .collect::<Result<_, _>>()?;
        let (w, h) = (frame.width as usize, frame.height as usize);
        for (k, q) in queries.iter().enumerate() {
            let maps: Vec<Vec<f32>> = per_level.iter().map(|l| l.maps[k].clone()).collect();
            let filtered = lerf::smooth_levels(protocol, &maps, w, h)?;
            let seg = lerf::segment_filtered(protocol, &maps, &filtered, w, h);
            let loc = lerf::localize_filtered(&filtered, w);
            let hit = lerf::hit(&loc.candidates, &q.boxes);
            let png = overlay(&seg, &loc.candidates, q, w, h);
            let path = overlay_path(&i.args.out, frame.stem(), &q.category);
            std::fs::create_dir_all(path.parent().unwrap_or(&i.args.out))?;
            write_bytes_atomic(&path, &png_rgb(frame.width, frame.height, &png)?)?;
            hits += usize::from(hit);
            let extra = json!({
                "hit": hit,
                "segmentation_level": levels[seg.level],
                "localization_level": levels[loc.level],
                "candidates": loc.candidates.len(),
            });
            pairs.push(Pair {
                frame: frame.stem().to_string(),
                query: q.category.clone(),
                iou: lerf::iou(&seg.mask, &q.mask),
                extra: extra.as_object().cloned().unwrap_or_default(),
            });
        }
        bar.inc(1);
    }
    bar.finish();
    let n = pairs.len().max(1);
    let mut o = Outcome::new("2D", protocol.name().to_string(), "lerf.json", pairs)?;
    let acc = hits as f64 / n as f64;
    o.fields = vec![
        (
            "localization_accuracy".into(),
            json!(acc),
            format!("localization accuracy {acc:.4} ({hits}/{n})"),
        ),
        ("localization_hits".into(), json!(hits), String::new()),
    ];
    Ok(o)
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
