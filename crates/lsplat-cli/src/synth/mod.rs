//! `lsplat-engine synth`: a LangSplat-layout dataset for any splat, without CLIP or SAM.
//!
//! The Gaussians are clustered hierarchically by position (level 3: K objects,
//! level 2: each object halved, level 1: each half halved), each segment gets a random
//! unit feature, and every camera's segmentation maps are rendered: a pixel carries a
//! segment's mask where the splat is opaque (Σw ≥ 0.95) and that segment holds at
//! least 90% of the pixel's weight, so a trained model can reproduce the targets. The files are written as LangSplat writes them:
//! `<stem>_f.npy` (float32 `[rows, D]`, rows grouped default|s|m|l) and `<stem>_s.npy`
//! (float32 `[4, H, W]`, −1 or a global row).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use glam::Vec3;
use lsplat_core::{Camera, Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_data::io::{write_bytes_atomic, write_npy_f32};
use lsplat_data::run::RunDir;
use lsplat_device::{Backend, CameraParams, PixelSet};

pub mod kmeans;
pub mod orbit;
mod tile;

/// Options of `synth`.
#[derive(clap::Args, Debug)]
pub struct SynthArgs {
    /// Input splats (3DGS PLY, Inria layout).
    #[arg(long)]
    pub splats: PathBuf,
    /// Cameras (cameras.json, COLMAP sparse folder or transforms.json). Without it,
    /// `--orbit` cameras are made and written to `<out>/cameras.json`.
    #[arg(long)]
    pub cameras: Option<PathBuf>,
    /// Number of orbit cameras (when no --cameras is given; at least 1), framed so
    /// that ≥ 99.5 % of the opaque Gaussians' centres are inside every image.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub orbit: u32,
    /// Orbit image width (at least 1).
    #[arg(long, default_value_t = 640, value_parser = clap::value_parser!(u32).range(1..))]
    pub width: u32,
    /// Orbit image height (at least 1).
    #[arg(long, default_value_t = 480, value_parser = clap::value_parser!(u32).range(1..))]
    pub height: u32,
    /// The splat's up axis, for the orbit: x, y, z, -x, -y or -z.
    #[arg(long, default_value = "-y", allow_hyphen_values = true)]
    pub up: String,
    /// Objects (segments at level 3; at most the number of Gaussians); levels 2 and
    /// 1 have up to 2× and 4× as many.
    #[arg(long, default_value_t = 6)]
    pub objects: usize,
    /// Feature dimension (3 = LangSplat V1 autoencoded codes, 512 = CLIP).
    #[arg(long, default_value_t = 3)]
    pub dim: usize,
    /// Seed of the clustering and the features.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Repeat the splat on an AxB grid across the up axis (copies side by side;
    /// written to `<out>/splats.ply`): `--tile 3x3` makes a 1.4 M-Gaussian scene of the
    /// biker splat.
    #[arg(long, default_value = "1x1", value_parser = tile::parse_copies)]
    pub tile: (u32, u32),
    /// Keep every K-th Gaussian of the splat (of each copy): `--keep-every 16` with
    /// a quarter of the width and height makes a 1/16-scale scene.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub keep_every: u32,
    /// Also write `cameras_K.json` and `scene_K.toml` for each K listed: K orbit
    /// cameras spread evenly over the orbit, sharing the dataset of all of them (e.g.
    /// `--orbit 299 --subsets 25,50`).
    #[arg(long, value_delimiter = ',')]
    pub subsets: Vec<u32>,
    /// Output folder: `language_features/`, `cameras.json` (orbit), `scene.toml`, then
    /// `summary.json` (written last: it marks the folder finished).
    #[arg(long)]
    pub out: PathBuf,
    /// Overwrite a finished (or interrupted, unfinished) synth output in --out.
    #[arg(long)]
    pub force: bool,
}

/// Runs `synth`.
pub fn run(args: SynthArgs) -> Result<()> {
    if args.dim == 0 || args.objects == 0 {
        bail!("--dim and --objects must be at least 1");
    }
    let tiling = tile::Tiling {
        copies: args.tile,
        keep: args.keep_every,
    };
    if !args.subsets.is_empty() && args.cameras.is_some() {
        bail!("--subsets picks orbit cameras: it cannot be used with --cameras");
    }
    if let Some(&k) = args.subsets.iter().find(|&&k| k == 0 || k > args.orbit) {
        bail!(
            "--subsets {k}: each subset needs 1 to --orbit ({}) cameras",
            args.orbit
        );
    }
    let ply = lsplat_data::ply::read_ply(&args.splats)?;
    let (_, axis) = orbit::up_axis(&args.up)?;
    let ply = tile::tile(&ply, tiling, ((axis + 1) % 3, (axis + 2) % 3))
        .with_context(|| format!("tiling {}", args.splats.display()))?;
    let g = &ply.gaussians;
    if args.objects > g.len() {
        bail!(
            "--objects {} exceeds the {} Gaussians of {}: every object is a cluster of at least one Gaussian",
            args.objects,
            g.len(),
            args.splats.display()
        );
    }
    // The feature table every camera's `_f.npy` holds: 8 rows per object.
    lsplat_core::memory::check_fits(
        &format!(
            "the feature table ({} objects × 8 rows × {} values)",
            args.objects, args.dim
        ),
        (args.objects as u64)
            .saturating_mul(8)
            .saturating_mul(args.dim as u64),
        4,
    )?;
    let (cameras, orbit_json) = match &args.cameras {
        Some(p) => (
            lsplat_data::cameras::load_cameras(p)?
                .into_iter()
                .map(|c| {
                    let (w, h) = lsplat_core::camera::langsplat_resolution(c.width, c.height, 1080);
                    c.rescaled(w, h)
                })
                .collect(),
            Vec::new(),
        ),
        None => orbit_cameras(g, &args)?,
    };
    for cam in &cameras {
        fits_in_memory(cam)?;
    }
    // Everything is checked: the output folder is taken (the run rule: a finished or
    // unfinished one only with --force), and summary.json marks it finished last.
    let out = RunDir::create_as(&args.out, args.force, &lsplat_data::run::layout::SYNTH)?;
    if args.cameras.is_none() {
        write_bytes_atomic(
            &args.out.join("cameras.json"),
            serde_json::to_string_pretty(&orbit_json)?.as_bytes(),
        )?;
    }
    let feat_dir = args.out.join("language_features");
    std::fs::create_dir_all(&feat_dir)
        .with_context(|| format!("creating {}", feat_dir.display()))?;
    let pts: Vec<Vec3> = g.means.iter().map(|m| Vec3::from(*m)).collect();
    let levels = kmeans::segment(&pts, args.objects, args.seed);
    let counts = [
        args.objects,
        4 * args.objects,
        2 * args.objects,
        args.objects,
    ];
    // Rows: default (= level 3's segments) | s | m | l.
    let level_rows = segment_features(args.dim, args.objects, args.seed);
    let mut table: Vec<f32> = level_rows[2].concat();
    for rows in &level_rows {
        table.extend(rows.concat());
    }
    let offsets = [
        0,
        counts[0],
        counts[0] + counts[1],
        counts[0] + counts[1] + counts[2],
    ];
    let dev = CpuBackend::new(0);
    let geom = dev.upload_geometry(g)?;
    let mut valid = [0u64; 4];
    let mut pixels = 0u64;
    let mut bar = crate::progress::Progress::new(
        "synth",
        cameras.len() as u64,
        "cameras",
        true,
        Default::default(),
    );
    for (ci, cam) in cameras.iter().enumerate() {
        let maps = render_segments(&dev, &geom, cam, &levels)?;
        let hw = cam.pixel_count();
        let mut s =
            lsplat_core::memory::try_filled(&format!("camera `{}`", cam.name), 4 * hw, -1f32)?;
        for (l, map) in maps.iter().enumerate() {
            // Level 0 (default) repeats level 3's masks with its own rows.
            for (k, target) in [(l + 1, offsets[l + 1]), (0, offsets[0])] {
                if k == 0 && l != 2 {
                    continue;
                }
                for (p, &seg) in map.iter().enumerate() {
                    if seg >= 0 {
                        s[k * hw + p] = (target + seg as usize) as f32;
                    }
                }
            }
        }
        for (l, v) in valid.iter_mut().enumerate() {
            *v += s[l * hw..(l + 1) * hw]
                .iter()
                .filter(|&&x| x >= 0.0)
                .count() as u64;
        }
        pixels += hw as u64;
        write_npy_f32(
            &feat_dir.join(format!("{}_f.npy", cam.name)),
            &[table.len() / args.dim, args.dim],
            &view_jitter(&table, args.dim, args.seed, ci as u64),
        )?;
        write_npy_f32(
            &feat_dir.join(format!("{}_s.npy", cam.name)),
            &[4, cam.height as usize, cam.width as usize],
            &s,
        )?;
        bar.inc(1);
    }
    bar.finish();
    // Paths in scene.toml resolve against its own folder: the orbit cameras (and a
    // tiled splat) sit beside it.
    let splats = if tiling == tile::Tiling::NONE {
        absolute(&args.splats)?
    } else {
        let comment = format!(
            "made by lsplat-engine synth --tile {}x{} --keep-every {} from {}",
            args.tile.0,
            args.tile.1,
            args.keep_every,
            args.splats.display()
        )
        .replace(['\n', '\r'], " ");
        lsplat_data::ply::write_ply_with_comments(&args.out.join("splats.ply"), &ply, &[&comment])?;
        PathBuf::from("splats.ply")
    };
    let cams_path = match &args.cameras {
        Some(p) => absolute(p)?,
        None => PathBuf::from("cameras.json"),
    };
    let scene = |cams: &Path| {
        format!(
            "# Made by `lsplat-engine synth`. Import the features first:\n\
             #   lsplat-engine import langsplat --source {feat} --out {ds}\n\
             [scene]\nsplats = {splats:?}\ncameras = {cams:?}\ndataset = \"dataset\"\nlevel = 1\n",
            feat = feat_dir.display(),
            ds = args.out.join("dataset").display(),
            splats = splats.display().to_string(),
            cams = cams.display().to_string(),
        )
    };
    write_bytes_atomic(&args.out.join("scene.toml"), scene(&cams_path).as_bytes())?;
    for &k in &args.subsets {
        let json: Vec<&serde_json::Value> = subset(cameras.len(), k as usize)
            .into_iter()
            .map(|i| &orbit_json[i])
            .collect();
        let name = format!("cameras_{k}.json");
        write_bytes_atomic(
            &args.out.join(&name),
            serde_json::to_string_pretty(&json)?.as_bytes(),
        )?;
        write_bytes_atomic(
            &args.out.join(format!("scene_{k}.toml")),
            scene(Path::new(&name)).as_bytes(),
        )?;
    }
    let summary = serde_json::json!({
        "command": "synth",
        "cameras": cameras.len(),
        "gaussians": g.len(),
        "objects": args.objects,
        "dim": args.dim,
        "seed": args.seed,
    });
    out.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
    println!(
        "synth: {} cameras, {} Gaussians, {} objects; valid pixels per level (default, s, m, l): {}",
        cameras.len(),
        g.len(),
        args.objects,
        valid
            .iter()
            .map(|v| format!("{:.1}%", 100.0 * *v as f64 / pixels.max(1) as f64))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("wrote {}", args.out.display());
    Ok(())
}

/// Refuses a camera whose rendering cannot fit in memory (before anything is written).
fn fits_in_memory(cam: &Camera) -> Result<()> {
    // Per pixel: the `_s.npy` maps (16 B), three segment maps (12 B), the pixel list
    // and operator row offsets (8 B), and the operator's entries (about 28 B).
    lsplat_core::memory::check_fits(
        &format!("camera `{}` ({}x{})", cam.name, cam.width, cam.height),
        cam.pixel_count() as u64,
        64,
    )?;
    Ok(())
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))
}

/// Unit features of the segments of levels 1, 2 and 3 (`[level][segment]`).
///
/// Up to 3-D (LangSplat V1 codes) they are independent random unit vectors. Wider
/// features get the structure CLIP features of a scene's masks have: every feature
/// shares a common direction, objects (level 3) differ from each other (cosine ≈ 0.6),
/// parts (level 2) stay near their object (≈ 0.9) and sub-parts (level 1) near their
/// part (≈ 0.9), so the levels are nested.
pub fn segment_features(dim: usize, objects: usize, seed: u64) -> [Vec<Vec<f32>>; 3] {
    let mut rng = Rng::new(seed ^ 0xfea7);
    let gauss = |rng: &mut Rng| (0..dim).map(|_| rng.normal()).collect::<Vec<f32>>();
    let unit = |v: Vec<f32>| {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.into_iter().map(|x| x / n).collect::<Vec<f32>>()
    };
    if dim <= 3 {
        let mut level = |n: usize| (0..n).map(|_| unit(gauss(&mut rng))).collect::<Vec<_>>();
        let (l1, l2, l3) = (level(4 * objects), level(2 * objects), level(objects));
        return [l1, l2, l3];
    }
    let near = |base: &[f32], spread: f32, rng: &mut Rng| {
        let r = unit(gauss(rng));
        unit(base.iter().zip(&r).map(|(b, x)| b + spread * x).collect())
    };
    let common = unit(gauss(&mut rng));
    let l3: Vec<Vec<f32>> = (0..objects).map(|_| near(&common, 0.8, &mut rng)).collect();
    // Segment j of a level is a half of segment j / 2 of the level above.
    let l2: Vec<Vec<f32>> = (0..2 * objects)
        .map(|j| near(&l3[j / 2], 0.5, &mut rng))
        .collect();
    let l1: Vec<Vec<f32>> = (0..4 * objects)
        .map(|j| near(&l2[j / 2], 0.5, &mut rng))
        .collect();
    [l1, l2, l3]
}

/// Camera `view`'s copy of the feature table: for features wider than 3, every row
/// moves a little (cosine ≈ 0.98 to the segment's feature), as CLIP features of one mask
/// differ between views; codes (≤ 3-D) are copied unchanged.
pub fn view_jitter(table: &[f32], dim: usize, seed: u64, view: u64) -> Vec<f32> {
    if dim <= 3 {
        return table.to_vec();
    }
    let mut rng = Rng::new(seed ^ 0x1171 ^ view.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let sigma = 0.2 / (dim as f32).sqrt();
    let mut out = Vec::with_capacity(table.len());
    for row in table.chunks_exact(dim) {
        let v: Vec<f32> = row.iter().map(|x| x + sigma * rng.normal()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        out.extend(v.into_iter().map(|x| x / n));
    }
    out
}

/// `k` of `n` cameras spread evenly: `⌊i·n/k⌋` for i < k.
fn subset(n: usize, k: usize) -> Vec<usize> {
    (0..k).map(|i| i * n / k).collect()
}

/// Orbit cameras framing the splat ([`orbit::cameras`]), with their `cameras.json`
/// entries (written once every check has passed).
fn orbit_cameras(
    g: &lsplat_core::Gaussians,
    args: &SynthArgs,
) -> Result<(Vec<Camera>, Vec<serde_json::Value>)> {
    let o = orbit::Orbit {
        count: args.orbit,
        size: (args.width, args.height),
        up: args.up.clone(),
    };
    let cams = orbit::cameras(g, &o)?;
    let mut json = Vec::with_capacity(cams.len());
    for (c, cam) in cams.iter().enumerate() {
        fits_in_memory(cam)?;
        let r = cam.rotation.transpose();
        let rows: Vec<[f32; 3]> = (0..3)
            .map(|i| [r.x_axis[i], r.y_axis[i], r.z_axis[i]])
            .collect();
        json.push(serde_json::json!({
            "id": c, "img_name": cam.name, "width": cam.width, "height": cam.height,
            "position": cam.centre().to_array(), "rotation": rows, "fx": cam.fx, "fy": cam.fy,
        }));
    }
    Ok((cams, json))
}

/// Renders the segment maps of the three levels (`-1` = no mask), row-major.
fn render_segments(
    dev: &CpuBackend,
    geom: &<CpuBackend as Backend>::Geometry,
    cam: &Camera,
    levels: &[Vec<u32>; 3],
) -> Result<[Vec<i32>; 3]> {
    let grid = TileGrid::new(16, cam.width, cam.height);
    let mut proj = Default::default();
    let mut bins = Default::default();
    dev.project(geom, &CameraParams::new(cam, 0.01, 1e10), grid, &mut proj)?;
    dev.bin_and_sort(&proj, grid, &mut bins)?;
    let set = PixelSet::full(dev, grid)?;
    let n = levels[0].len();
    let op = dev.build_operator(
        &proj,
        &bins,
        &set,
        n,
        lsplat_core::config::WeightPrecision::F32,
    )?;
    let mut maps = [
        vec![-1i32; grid.pixel_count()],
        vec![-1i32; grid.pixel_count()],
        vec![-1i32; grid.pixel_count()],
    ];
    let mut acc: Vec<(u32, f32)> = Vec::new();
    for (r, &p) in set.pixels.iter().enumerate() {
        let row = op.row(r);
        let total: f32 = row.iter().map(|e| e.1).sum();
        if total < 0.95 {
            continue;
        }
        for (l, seg) in levels.iter().enumerate() {
            acc.clear();
            for &(g, w) in &row {
                let s = seg[g as usize];
                match acc.iter_mut().find(|e| e.0 == s) {
                    Some(e) => e.1 += w,
                    None => acc.push((s, w)),
                }
            }
            if let Some(best) = acc.iter().max_by(|a, b| a.1.total_cmp(&b.1))
                && best.1 >= 0.9 * total
            {
                maps[l][p as usize] = best.0 as i32;
            }
        }
    }
    Ok(maps)
}
