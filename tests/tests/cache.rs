//! The frozen-geometry caches (issue 4).
//!
//! - The three cache levels (`operator`, `geometry`, `none`) train the same model to
//!   float rounding: step losses and learned features, on random scenes, the embedded
//!   demo and the real biker splat.
//! - The cached operator's SpMM and transposed SpMM match a float64 product in every
//!   weight precision (f32, f16, bf16, with error bounds derived from the documented
//!   per-weight bounds), across the 65 536-Gaussian and 65 536-row boundaries.
//! - Runs are bitwise reproducible in every cache mode.
//! - LRU eviction under a tiny budget changes nothing but speed, really evicts, and
//!   never holds more than the budget.

use glam::Vec3;
use lsplat_core::config::WeightPrecision;
use lsplat_core::{Camera, Config, Gaussians, Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_cpu::operator::CpuOperator;
use lsplat_data::SceneData;
use lsplat_device::{Backend, CameraParams, PixelSet};
use lsplat_engine::components::Cache;
use lsplat_engine::resources::CacheStats;
use lsplat_engine::{EvalReport, Session};
use lsplat_render::CacheLevel;
use lsplat_tests::scenes::{
    fresh_seed, orbit_cameras, random_labels, random_scene, random_scene_data,
};

/// Unit round-off of f32.
const U32: f64 = 1.0 / (1u64 << 24) as f64;
/// Documented per-weight relative error of f16 weights (`WeightPrecision::F16`).
const U_F16: f64 = 1.0 / (1u64 << 11) as f64;
/// Documented per-weight relative error of bf16 weights (`WeightPrecision::Bf16`).
const U_BF16: f64 = 1.0 / (1u64 << 8) as f64;
/// Documented per-weight relative error of the compact layout's 16-bit weights
/// (`WeightPrecision::Compact`; weights α·T ≥ 1e-4/255 are all normal there).
const U_W16: f64 = 1.0 / (1u64 << 12) as f64;
/// Smallest normal f16 (2⁻¹⁴). Below it f16 is subnormal with spacing 2⁻²⁴, so the
/// rounding error is at most 2⁻²⁵ absolute, not 2⁻¹¹ relative.
const F16_MIN_NORMAL: f64 = 1.0 / (1u64 << 14) as f64;
const F16_SUBNORMAL_ABS: f64 = 1.0 / (1u64 << 25) as f64;

const MODES: [&str; 3] = ["operator", "geometry", "none"];

// ---------------------------------------------------------------------------------
// Scenes
// ---------------------------------------------------------------------------------

/// The embedded demo (level 1) with fewer cameras and smaller images, to keep the
/// test short.
fn demo_scene() -> SceneData {
    let mut cfg = Config::default();
    cfg.demo.cameras = 8;
    cfg.demo.width = 96;
    cfg.demo.height = 72;
    lsplat_data::demo::generate(&cfg.demo, 1).unwrap().scene
}

/// The real biker splat (every `stride`-th Gaussian) with orbit cameras at small
/// resolution and random labels; `None` (skipped, with one line) without the test data.
fn biker_scene(seed: u64, cams: usize, size: (u32, u32), stride: usize) -> Option<SceneData> {
    let path = lsplat_data::testdata::test_file("splats/playcanvas_biker.inria_sh0.ply")?;
    let all = lsplat_data::ply::read_ply(&path).unwrap().gaussians;
    fn every<T: Copy>(v: &[T], stride: usize) -> Vec<T> {
        v.iter().copied().step_by(stride).collect()
    }
    let gaussians = Gaussians {
        means: every(&all.means, stride),
        log_scales: every(&all.log_scales, stride),
        rotations: every(&all.rotations, stride),
        opacity_logits: every(&all.opacity_logits, stride),
    };
    // Orbit the median centre at ~1.5x the spread of the middle 80% of centres (the
    // extreme bounds are set by floaters).
    let mut axis: [Vec<f32>; 3] = Default::default();
    for m in &gaussians.means {
        for k in 0..3 {
            axis[k].push(m[k]);
        }
    }
    let mut centre = [0f32; 3];
    let mut spread = 0f32;
    for k in 0..3 {
        axis[k].sort_by(f32::total_cmp);
        let q = |f: f64| axis[k][((axis[k].len() - 1) as f64 * f) as usize];
        centre[k] = q(0.5);
        spread = spread.max(q(0.9) - q(0.1));
    }
    let mut rng = Rng::new(seed);
    // Inria scenes are COLMAP-oriented: -y is roughly up.
    let cameras = orbit_cameras(
        &mut rng,
        cams,
        size,
        Vec3::from(centre),
        (0.9 * spread, 1.3 * spread),
        -Vec3::Y,
    );
    let labels = cameras
        .iter()
        .map(|c| random_labels(&mut rng, c, 3, 6, 0.25))
        .collect();
    Some(SceneData {
        gaussians,
        cameras,
        labels,
    })
}

// ---------------------------------------------------------------------------------
// Training runs
// ---------------------------------------------------------------------------------

/// What one training run produced.
struct Run {
    losses: Vec<f32>,
    features: Vec<f32>,
    stats: CacheStats,
    /// Largest `CacheStats::bytes` seen after any step.
    peak_bytes: u64,
    /// Where the operators went, as announced with the first one built.
    placement: Option<lsplat_render::placement::Placement>,
    /// Evaluation before the first step.
    eval_before: EvalReport,
    /// Evaluation through the caches the run ended with.
    eval: EvalReport,
}

fn config(sets: &[&str], steps: u64) -> Config {
    let mut cfg = Config::default();
    // LangSplat's zero start unless a case asks otherwise: these comparisons of cache
    // modes were calibrated on it (masked L1 turns rounding differences into sign flips
    // of the gradient once features move, so moving runs are compared per case).
    cfg.set("train.init_std=0").unwrap();
    cfg.set(&format!("train.iterations={steps}")).unwrap();
    cfg.set("log.every=25").unwrap();
    cfg.set("log.progress=false").unwrap();
    for s in sets {
        cfg.set(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    cfg
}

/// Trains `steps` steps and checks the cache bookkeeping after every step: the bytes
/// counted equal the bytes the camera caches hold, and no camera holds more than it
/// may.
fn train(scene: &SceneData, sets: &[&str], steps: u64, threads: usize) -> Run {
    train_in(scene, sets, steps, threads, None)
}

/// [`train`] with operators past the budget spilled to `cache_dir`.
fn train_in(
    scene: &SceneData,
    sets: &[&str],
    steps: u64,
    threads: usize,
    cache_dir: Option<&std::path::Path>,
) -> Run {
    let cfg = config(sets, steps);
    let mut s = Session::<CpuBackend>::new(CpuBackend::new(threads), &cfg, scene.clone())
        .unwrap_or_else(|e| panic!("{sets:?}: {e}"));
    if let Some(dir) = cache_dir {
        s.set_cache_dir(dir.to_path_buf());
    }
    let eval_before = s.evaluate().unwrap();
    let mut peak_bytes = 0;
    let probe = CpuBackend::new(1);
    for step in 0..steps {
        s.step()
            .unwrap_or_else(|e| panic!("{sets:?}: step {step}: {e}"));
        let stats = s.cache_stats();
        peak_bytes = peak_bytes.max(stats.bytes);
        let (held, operators, nnz) = {
            let world = &mut s.engine.world;
            let mut q = world.query::<&Cache<CpuBackend>>();
            let mut held = 0u64;
            let mut operators = 0u64;
            let mut nnz = 0u64;
            for c in q.iter(world) {
                held += c.cache.bytes(&probe) as u64;
                nnz += c.cache.operator_stats(&probe).map_or(0, |o| o.nnz as u64);
                operators += (c.cache.level() == CacheLevel::Operator) as u64;
                assert!(
                    c.cache.level() <= c.allowed,
                    "{sets:?}: step {step}: a camera holds {:?} but may hold only {:?}",
                    c.cache.level(),
                    c.allowed
                );
                assert!(
                    c.allowed <= CacheLevel::from_mode(cfg.render.cache),
                    "{sets:?}: a camera may hold more than render.cache allows"
                );
            }
            (held, operators, nnz)
        };
        assert_eq!(
            stats.bytes, held,
            "{sets:?}: step {step}: cache_stats().bytes differs from the bytes the caches hold"
        );
        assert_eq!(
            (stats.operators, stats.nnz),
            (operators, nnz),
            "{sets:?}: step {step}: operator count and non-zeros"
        );
    }
    let records = s.drain_records();
    assert_eq!(
        records.iter().map(|r| r.step).collect::<Vec<_>>(),
        (0..steps).collect::<Vec<_>>(),
        "{sets:?}: one record per step, in order"
    );
    let losses: Vec<f32> = records.iter().map(|r| r.loss).collect();
    assert!(
        losses.iter().all(|l| l.is_finite()),
        "{sets:?}: non-finite loss"
    );
    let features = s.features().unwrap();
    assert!(features.iter().all(|v| v.is_finite()));
    let stats = s.cache_stats();
    let placement = s.cache_placement();
    let eval = s.evaluate().unwrap();
    Run {
        placement,
        losses,
        features,
        stats,
        peak_bytes,
        eval_before,
        eval,
    }
}

/// Largest relative difference of the losses, and the largest absolute difference of
/// the (unit-row) features with the number of feature values that differ by more
/// than `FEATURE_TOL`, of two runs.
fn differences(a: &Run, b: &Run) -> (f64, f64, usize) {
    assert_eq!(a.losses.len(), b.losses.len());
    assert_eq!(a.features.len(), b.features.len());
    let loss = a
        .losses
        .iter()
        .zip(&b.losses)
        .map(|(x, y)| (*x as f64 - *y as f64).abs() / (x.abs().max(y.abs()) as f64).max(1e-30))
        .fold(0.0, f64::max);
    let diffs = a
        .features
        .iter()
        .zip(&b.features)
        .map(|(x, y)| (*x as f64 - *y as f64).abs());
    let feat = diffs.clone().fold(0.0, f64::max);
    let over = diffs.filter(|d| d.is_nan() || *d > FEATURE_TOL).count();
    (loss, feat, over)
}

/// Checks the differences of two runs that should agree to float rounding.
fn assert_close(what: &str, a: &Run, b: &Run) {
    let (dl, df, over) = differences(a, b);
    eprintln!(
        "{what}: loss rel diff {dl:.2e}, feature abs diff {df:.2e} ({over} of {} over {FEATURE_TOL:e})",
        a.features.len()
    );
    assert!(
        dl <= LOSS_TOL,
        "{what}: losses differ by {dl:.2e} (relative)"
    );
    assert!(
        over <= (a.features.len() / STRAY_FRACTION).max(4) && df <= FEATURE_MAX,
        "{what}: {over} feature values differ by more than {FEATURE_TOL:e}, the most by {df:.2e}"
    );
    let (x, y) = (&a.eval, &b.eval);
    assert_eq!(x.pixels, y.pixels);
    assert!(
        (x.mean_l1 - y.mean_l1).abs() <= LOSS_TOL * x.mean_l1
            && (x.mean_cosine - y.mean_cosine).abs() <= LOSS_TOL,
        "{what}: evaluation {x:?} vs {y:?}"
    );
}

/// Tolerances for "equal to float rounding" after 100 Adam steps. The three modes
/// sum the backward in different orders (CSC rows vs per-intersection partials), so
/// gradients differ in the last bits. Adam divides by √v, so that stays near f32
/// rounding, except for a gradient that is itself a near-cancelling sum: there the
/// update's sign can flip (a raw difference of up to 2·lr), which the normalisation
/// magnifies for a Gaussian whose raw feature is short; with an L1 term, a residual's
/// sign can flip too (`LSPLAT_SEED=1795701746703434972`, random case 1: 9 of 2 500
/// values over `FEATURE_TOL`, the most 6.1e-4, losses within 3.8e-6;
/// `LSPLAT_SEED=1795947998785362763`, random case 0: 42 of 1 800, the most 8.3e-3,
/// losses within 2.5e-5; `LSPLAT_SEED=1795904514921594414`, random case 0: 94 of
/// 1 800, the most 1.34e-2, losses within 3.1e-5; 25 further random runs: at most 36
/// of 1 800). So features must
/// agree to `FEATURE_TOL` except for a handful of values (`STRAY_FRACTION`), and all to
/// `FEATURE_MAX`; losses and evaluations must agree to `LOSS_TOL` (relative). Any real
/// difference (a wrong or missing weight, a stale cache, a camera rendered through
/// another camera's cache) moves many features and the losses by far more.
const LOSS_TOL: f64 = 1e-4;
const FEATURE_TOL: f64 = 1e-4;
const FEATURE_MAX: f64 = 0.1;
/// At most one value in this many may differ by more than `FEATURE_TOL` (and at least
/// 4 are allowed).
const STRAY_FRACTION: usize = 10;

fn assert_modes_agree(name: &str, scene: &SceneData, extra: &[&str], steps: u64) {
    let runs: Vec<Run> = MODES
        .iter()
        .map(|m| {
            let mode = format!("render.cache={m}");
            let mut sets = vec![mode.as_str()];
            sets.extend_from_slice(extra);
            let t0 = std::time::Instant::now();
            let r = train(scene, &sets, steps, 2);
            eprintln!(
                "{name} {m}: {steps} steps in {:.2} s, loss {:.5} -> {:.5}, {:?}",
                t0.elapsed().as_secs_f64(),
                r.losses[0],
                r.losses[r.losses.len() - 1],
                r.stats
            );
            r
        })
        .collect();
    let cams = scene.cameras.len() as u64;
    let batch = config(extra, steps).train.batch_size as u64;
    for (m, r) in MODES.iter().zip(&runs) {
        let visits = r.stats.hits + r.stats.misses;
        assert_eq!(visits, steps * batch, "{name} {m}: every visit is counted");
        assert_eq!(r.stats.evictions, 0, "{name} {m}: nothing evicted");
        if *m == "none" {
            assert_eq!(
                (r.stats.hits, r.stats.bytes),
                (0, 0),
                "{name}: none caches nothing"
            );
        } else {
            assert!(
                r.stats.misses <= cams,
                "{name} {m}: a camera missed twice under an unlimited budget ({:?})",
                r.stats
            );
            assert!(r.stats.bytes > 0);
        }
        if *m == "operator" {
            assert_eq!(
                r.stats.operators, r.stats.misses,
                "{name}: one operator per visited camera"
            );
        }
    }
    // The run learns something: rendered features turn towards the targets. From
    // the zero start a run that moved them nowhere or the wrong way ends near 0 or
    // below; the biker case ends at 0.12–0.22 for most seeds, but at 0.0498 for seed
    // 1796085690584754900 (its losses fall on every camera all the same).
    let (before, after) = (&runs[0].eval_before, &runs[0].eval);
    assert!(
        after.mean_cosine > before.mean_cosine + 0.02,
        "{name}: mean cosine {:.4} -> {:.4}",
        before.mean_cosine,
        after.mean_cosine
    );
    for (m, r) in MODES.iter().zip(&runs).skip(1) {
        assert_close(&format!("{name}: operator vs {m}"), &runs[0], r);
    }
    // Operators that store no weights train bitwise as the f32 ones, in less memory
    // (here little less: these tiny cameras' rows are short, so the block lists and
    // row offsets weigh more than the entries).
    let mut sets = vec![
        "render.cache=operator",
        "render.operator_precision=recompute",
    ];
    sets.extend_from_slice(extra);
    let re = train(scene, &sets, steps, 2);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&re.losses),
        bits(&runs[0].losses),
        "{name}: recompute losses"
    );
    assert_eq!(
        bits(&re.features),
        bits(&runs[0].features),
        "{name}: recompute features"
    );
    assert!(
        re.stats.bytes < runs[0].stats.bytes,
        "{name}: recompute holds {} bytes against f32's {}",
        re.stats.bytes,
        runs[0].stats.bytes
    );
}

#[test]
fn cache_modes_agree_on_random_scenes() {
    let seed = fresh_seed("cache_modes_agree_on_random_scenes");
    // (gaussians, cameras, size, dim, extra settings)
    let cases: [(usize, usize, (u32, u32), usize, &[&str]); 3] = [
        // A small random start: from zeros, LangSplat V1's normalisation freezes Adam
        // for thousands of steps (see `train.init_std`), and 100 steps learn little.
        (600, 5, (64, 48), 3, &["train.init_std=0.1"]),
        (
            500,
            4,
            (50, 40),
            5,
            &[
                "train.init_std=0.1",
                "render.tile_size=8",
                "train.batch_size=2",
                "train.loss=l1_cosine",
            ],
        ),
        // Not from zeros either: a cosine loss of near-zero renders is ill-conditioned,
        // so the modes' rounding differences flipped early Adam steps and the losses
        // drifted apart by up to 3.2e-4 before they met again
        // (`LSPLAT_SEED=1795858982532025978`; 7.4e-8 from init_std 0.1).
        (
            400,
            4,
            (40, 36),
            16,
            &[
                "train.init_std=0.1",
                "train.normalize=false",
                "train.loss=cosine",
            ],
        ),
    ];
    for (k, (n, cams, size, dim, extra)) in cases.into_iter().enumerate() {
        let scene = random_scene_data(seed.wrapping_add(k as u64), n, cams, size, dim);
        assert_modes_agree(&format!("random case {k}"), &scene, extra, 100);
    }
}

#[test]
fn cache_modes_agree_on_the_demo() {
    assert_modes_agree("demo", &demo_scene(), &[], 100);
}

fn biker_case(name: &str, stride: usize, size: (u32, u32), extra: &[&str], steps: u64) {
    let seed = fresh_seed(name);
    let t0 = std::time::Instant::now();
    let Some(scene) = biker_scene(seed, 3, size, stride) else {
        return;
    };
    eprintln!(
        "biker: {} Gaussians loaded in {:.2} s",
        scene.gaussians.len(),
        t0.elapsed().as_secs_f64()
    );
    assert_modes_agree(name, &scene, extra, steps);
}

/// A quarter of the biker's Gaussians (every 4th), 3 cameras at 80×60: the `none`
/// mode projects, bins and sorts every step, which for the full 153k-Gaussian splat
/// costs ~0.2 s a step in the dev profile.
#[test]
fn cache_modes_agree_on_the_biker_splat() {
    biker_case(
        "cache_modes_agree_on_the_biker_splat",
        4,
        (80, 60),
        &["render.tile_size=8"],
        60,
    );
}

/// The whole biker splat for 100 steps (about 2 minutes in the dev profile).
#[test]
#[ignore = "slow (about 2 minutes): run with --ignored"]
fn cache_modes_agree_on_the_full_biker_splat() {
    biker_case(
        "cache_modes_agree_on_the_full_biker_splat",
        1,
        (96, 64),
        &[],
        100,
    );
}

// ---------------------------------------------------------------------------------
// SpMM against float64
// ---------------------------------------------------------------------------------

/// `γ_k = k·u / (1 − k·u)`: the relative bound of a k-term f32 dot product.
fn gamma(k: usize) -> f64 {
    let k = k as f64;
    k * U32 / (1.0 - k * U32)
}

/// Bound on the error of one stored weight `w` (exact f32 value) in `p`.
fn weight_bound(p: WeightPrecision, w: f64) -> f64 {
    match p {
        WeightPrecision::F32 | WeightPrecision::Recompute => 0.0,
        WeightPrecision::F16 => (U_F16 * w).max(if w < F16_MIN_NORMAL {
            F16_SUBNORMAL_ABS
        } else {
            0.0
        }),
        WeightPrecision::Bf16 => U_BF16 * w,
        WeightPrecision::Compact => U_W16 * w,
    }
}

fn rows(op: &CpuOperator) -> Vec<Vec<(u32, f32)>> {
    (0..op.rows()).map(|r| op.row(r)).collect()
}

struct SpmmCase {
    name: &'static str,
    /// Gaussians behind the camera, placed before the visible ones so that every
    /// visible index is ≥ this (a u16 truncation would alias them).
    hidden: usize,
    visible: usize,
    size: (u32, u32),
    /// Fraction of pixels in the set (1 = all).
    fraction: u32,
    channels: usize,
    /// Rows past 65 536 carry entries (u32 row offsets matter).
    many_rows: bool,
}

const SPMM_CASES: [SpmmCase; 6] = [
    SpmmCase {
        name: "u16/u16",
        hidden: 0,
        visible: 500,
        size: (80, 60),
        fraction: 3,
        channels: 3,
        many_rows: false,
    },
    SpmmCase {
        name: "u16/u16 C=16",
        hidden: 0,
        visible: 300,
        size: (48, 40),
        fraction: 10,
        channels: 16,
        many_rows: false,
    },
    SpmmCase {
        name: "u32 columns",
        hidden: 70_000,
        visible: 500,
        size: (80, 60),
        fraction: 3,
        channels: 5,
        many_rows: false,
    },
    SpmmCase {
        name: "N = 65536 (u16 boundary)",
        hidden: 65_536 - 300,
        visible: 300,
        size: (64, 48),
        fraction: 3,
        channels: 3,
        many_rows: false,
    },
    SpmmCase {
        name: "N = 65537",
        hidden: 65_537 - 300,
        visible: 300,
        size: (64, 48),
        fraction: 3,
        channels: 3,
        many_rows: false,
    },
    SpmmCase {
        name: "u32 rows",
        hidden: 0,
        visible: 400,
        size: (300, 230),
        fraction: 10,
        channels: 4,
        many_rows: true,
    },
];

/// `hidden` Gaussians behind `cam`, followed by `g`.
fn with_hidden(g: Gaussians, cam: &Camera, hidden: usize) -> Gaussians {
    let behind = cam.centre() - 2.0 * cam.rotation.row(2);
    let mut out = Gaussians::default();
    for _ in 0..hidden {
        out.means.push(behind.to_array());
        out.log_scales.push([-4.0; 3]);
        out.rotations.push([1.0, 0.0, 0.0, 0.0]);
        out.opacity_logits.push(2.0);
    }
    out.means.extend(g.means);
    out.log_scales.extend(g.log_scales);
    out.rotations.extend(g.rotations);
    out.opacity_logits.extend(g.opacity_logits);
    out
}

/// `g` with `count` Gaussians added side by side in front of `cam`, 2 units away,
/// whose footprints cover the image's last rows: a random scene may leave them empty
/// (seed 1795898897197639895 left rows past 65 536 of a 300×230 image without entries).
fn with_bottom_strip(mut g: Gaussians, cam: &Camera, count: usize) -> Gaussians {
    let world_from_camera = cam.camera_from_world().inverse();
    let z = 2.0;
    let v = cam.height as f32 - 6.0;
    for i in 0..count {
        let u = (i as f32 + 0.5) * cam.width as f32 / count as f32;
        let p = Vec3::new((u - cam.cx) * z / cam.fx, (v - cam.cy) * z / cam.fy, z);
        g.means
            .push(world_from_camera.transform_point3(p).to_array());
        // σ of about 6 pixels.
        g.log_scales.push([(6.0 * z / cam.fx).ln(); 3]);
        g.rotations.push([1.0, 0.0, 0.0, 0.0]);
        g.opacity_logits.push(2.0);
    }
    g
}

#[test]
fn spmm_and_its_transpose_match_float64() {
    let seed = fresh_seed("spmm_and_its_transpose_match_float64");
    let dev = CpuBackend::new(2);
    let mut subnormal_f16 = 0usize;
    for (k, case) in SPMM_CASES.iter().enumerate() {
        let c = case.channels;
        let (w, h) = case.size;
        let (g, cam, _) = random_scene(seed.wrapping_add(k as u64), case.visible, c, case.size);
        let g = if case.many_rows {
            with_bottom_strip(g, &cam, 40)
        } else {
            g
        };
        let g = with_hidden(g, &cam, case.hidden);
        let n = g.len();
        let grid = TileGrid::new(16, w, h);
        let geom = dev.upload_geometry(&g).unwrap();
        let mut proj = Default::default();
        let mut bins = Default::default();
        dev.project(&geom, &CameraParams::new(&cam, 0.01, 1e10), grid, &mut proj)
            .unwrap();
        dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
        let frac = case.fraction;
        let (pixels, offsets) = grid.select_pixels(|p| p.wrapping_mul(2_654_435_761) % 10 < frac);
        let set = PixelSet::upload(&dev, grid, &pixels, &offsets).unwrap();
        let mut rng = Rng::new(seed ^ k as u64);
        let x: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let d: Vec<f32> = (0..set.len * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let d0: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();

        let exact = dev
            .build_operator(&proj, &bins, &set, n, WeightPrecision::F32)
            .unwrap();
        let exact_rows = rows(&exact);
        let nnz = exact.nnz();
        assert!(
            nnz > set.len,
            "{}: the scene covers the pixels ({nnz} non-zeros)",
            case.name
        );
        if case.hidden > 0 {
            assert!(
                exact_rows
                    .iter()
                    .flatten()
                    .all(|e| e.0 as usize >= case.hidden),
                "{}: a hidden Gaussian contributes",
                case.name
            );
        }
        if case.many_rows {
            assert!(
                exact_rows[1 << 16..].iter().any(|r| !r.is_empty()),
                "{}: rows past 65536 have entries",
                case.name
            );
        }
        // The rasterizer's own forward, for the bitwise check of the f32 operator.
        let mut raster = vec![f32::NAN; set.len * c];
        dev.rasterize(&proj, &bins, &set, &x, c, &mut raster)
            .unwrap();

        for p in [
            WeightPrecision::F32,
            WeightPrecision::F16,
            WeightPrecision::Bf16,
            WeightPrecision::Compact,
            WeightPrecision::Recompute,
        ] {
            let what = format!("{} {p:?}", case.name);
            let op = dev.build_operator(&proj, &bins, &set, n, p).unwrap();
            assert_eq!(
                (op.rows(), op.cols(), op.nnz()),
                (set.len, n, nnz),
                "{what}: shape"
            );
            let stats = dev.operator_stats(&op);
            assert_eq!(stats.bytes, op.bytes(), "{what}: operator_stats bytes");
            // Bytes per stored entry: a u16 position and the weight, or (compact) a
            // one-byte gap and a 16-bit weight, with weight-0 fillers bridging gaps
            // over 255 (not non-zeros: `entries() - nnz()` of them).
            let entry_bytes = match p {
                WeightPrecision::F32 => 6 * nnz,
                WeightPrecision::F16 | WeightPrecision::Bf16 => 4 * nnz,
                WeightPrecision::Compact => 3 * op.entries(),
                // One byte per entry (fillers included) and each row's pixel.
                WeightPrecision::Recompute => op.entries() + 4 * set.len,
            };
            // Row offsets, block offsets and lists, the visible Gaussians with their
            // list positions, a u16 local index and a weight per non-zero; no
            // transposed copy of the entries.
            let listed = op.listed();
            let visible = op.visible();
            assert_eq!(
                op.bytes(),
                4 * (set.len + 1 + 2 * (op.blocks() + 1) + 2 * listed + 2 * visible + 1)
                    + entry_bytes,
                "{what}: bytes"
            );
            assert!(
                op.listed() <= nnz && op.blocks() <= grid.tile_count(),
                "{what}: one block per tile, each Gaussian listed once per block"
            );
            let op_rows = rows(&op);
            // Per-weight bounds.
            for (ra, rb) in exact_rows.iter().zip(&op_rows) {
                assert_eq!(ra.len(), rb.len());
                for (a, b) in ra.iter().zip(rb) {
                    assert_eq!(a.0, b.0, "{what}: same Gaussians in the same order");
                    let (wa, wq) = (a.1 as f64, b.1 as f64);
                    assert!(
                        (wq - wa).abs() <= weight_bound(p, wa),
                        "{what}: weight {wa:e} stored as {wq:e}"
                    );
                    if p == WeightPrecision::F16 && wa < F16_MIN_NORMAL && wa != wq {
                        subnormal_f16 += 1;
                    }
                }
            }

            // Forward: out = W·x, overwriting (NaN-filled output, longer than needed:
            // the tail is neither read nor written).
            let mut out = vec![f32::NAN; set.len * c + 7];
            dev.spmm(&op, &x, c, &mut out).unwrap();
            assert!(
                out[set.len * c..].iter().all(|v| v.is_nan()),
                "{what}: spmm wrote past its rows"
            );
            out.truncate(set.len * c);
            if matches!(p, WeightPrecision::F32 | WeightPrecision::Recompute) {
                assert!(
                    out.iter()
                        .zip(&raster)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{what}: the exact operator's SpMM is bitwise the rasterizer's forward"
                );
            }
            for r in 0..set.len {
                let (re, rq) = (&exact_rows[r], &op_rows[r]);
                for ch in 0..c {
                    let xs = |g: u32| x[g as usize * c + ch] as f64;
                    let ref_q: f64 = rq.iter().map(|&(g, w)| w as f64 * xs(g)).sum();
                    let abs_q: f64 = rq.iter().map(|&(g, w)| (w as f64 * xs(g)).abs()).sum();
                    let ref_e: f64 = re.iter().map(|&(g, w)| w as f64 * xs(g)).sum();
                    let quant: f64 = re
                        .iter()
                        .map(|&(g, w)| weight_bound(p, w as f64) * xs(g).abs())
                        .sum();
                    let got = out[r * c + ch] as f64;
                    // Against the stored weights: f32 accumulation only.
                    let acc = gamma(rq.len()) * abs_q;
                    assert!(
                        (got - ref_q).abs() <= acc + 1e-37,
                        "{what}: spmm row {r} ch {ch}: {got} vs {ref_q} (bound {acc:e})"
                    );
                    // Against the exact weights: plus the documented quantisation.
                    assert!(
                        (got - ref_e).abs() <= acc + quant + 1e-37,
                        "{what}: spmm row {r} ch {ch}: {got} vs exact {ref_e} (bound {:e})",
                        acc + quant
                    );
                }
            }

            // Transpose: d_x += Wᵀ·d (accumulating into d0).
            let mut ref_q = vec![0f64; n * c];
            let mut abs_q = vec![0f64; n * c];
            let mut ref_e = vec![0f64; n * c];
            let mut quant = vec![0f64; n * c];
            let mut count = vec![0usize; n];
            for r in 0..set.len {
                for (&(g, wq), &(_, we)) in op_rows[r].iter().zip(&exact_rows[r]) {
                    let g = g as usize;
                    count[g] += 1;
                    for ch in 0..c {
                        let dv = d[r * c + ch] as f64;
                        ref_q[g * c + ch] += wq as f64 * dv;
                        abs_q[g * c + ch] += (wq as f64 * dv).abs();
                        ref_e[g * c + ch] += we as f64 * dv;
                        quant[g * c + ch] += weight_bound(p, we as f64) * dv.abs();
                    }
                }
            }
            let mut dx = d0.clone();
            // d_out longer than its rows, with a NaN tail that must not be read.
            let mut d_long = d.clone();
            d_long.extend([f32::NAN; 5]);
            dev.spmm_t(&op, &d_long, c, &mut dx).unwrap();
            for (g, &k) in count.iter().enumerate() {
                for ch in 0..c {
                    let i = g * c + ch;
                    let got = dx[i] as f64;
                    let base = d0[i] as f64;
                    // A sum of d0 and `count` products, in some order.
                    let acc = gamma(k + 1) * (abs_q[i] + base.abs());
                    assert!(
                        (got - (base + ref_q[i])).abs() <= acc + 1e-37,
                        "{what}: spmm_t gaussian {g} ch {ch}: {got} vs {} (bound {acc:e})",
                        base + ref_q[i]
                    );
                    assert!(
                        (got - (base + ref_e[i])).abs() <= acc + quant[i] + 1e-37,
                        "{what}: spmm_t gaussian {g} ch {ch}: {got} vs exact {}",
                        base + ref_e[i]
                    );
                    if k == 0 {
                        assert_eq!(dx[i], d0[i], "{what}: untouched Gaussians keep d_x");
                    }
                }
            }
        }
    }
    eprintln!("{subnormal_f16} f16 weights below 2^-14 (subnormal) were rounded");
}

/// `WeightPrecision::F16` documents an error ≤ max(2⁻¹¹·w, 2⁻²⁵) per weight: relative
/// for weights ≥ 2⁻¹⁴ (f16's smallest normal), absolute below, where weights α·T
/// (down to 1/255 · 1e-4 ≈ 3.9e-7) are subnormal in f16.
#[test]
fn f16_weights_meet_the_documented_bound() {
    let seed = fresh_seed("f16_weights_meet_the_documented_bound");
    let dev = CpuBackend::new(2);
    let (g, cam, _) = random_scene(seed, 800, 3, (80, 60));
    let grid = TileGrid::new(16, 80, 60);
    let geom = dev.upload_geometry(&g).unwrap();
    let mut proj = Default::default();
    let mut bins = Default::default();
    dev.project(&geom, &CameraParams::new(&cam, 0.01, 1e10), grid, &mut proj)
        .unwrap();
    dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
    let set = PixelSet::full(&dev, grid).unwrap();
    let exact = dev
        .build_operator(&proj, &bins, &set, g.len(), WeightPrecision::F32)
        .unwrap();
    let half = dev
        .build_operator(&proj, &bins, &set, g.len(), WeightPrecision::F16)
        .unwrap();
    // The documented bound: max(2^-11·w, 2^-25) per weight.
    let mut checked = 0;
    for r in 0..exact.rows() {
        for (a, b) in exact.row(r).iter().zip(&half.row(r)) {
            let bound = (U_F16 * a.1 as f64).max(2f64.powi(-25));
            assert!(
                (b.1 as f64 - a.1 as f64).abs() <= bound,
                "f16 weight {:e} stored as {:e}: error above max(2^-11 w, 2^-25)",
                a.1,
                b.1
            );
            checked += 1;
        }
    }
    assert!(checked > 1000);
}

// ---------------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------------

fn assert_bitwise(what: &str, a: &Run, b: &Run) {
    assert!(
        a.losses
            .iter()
            .zip(&b.losses)
            .all(|(x, y)| x.to_bits() == y.to_bits()),
        "{what}: losses differ"
    );
    let diff = a
        .features
        .iter()
        .zip(&b.features)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count();
    assert_eq!(diff, 0, "{what}: {diff} feature values differ");
}

#[test]
fn identical_runs_are_bitwise_equal_in_every_mode() {
    let seed = fresh_seed("identical_runs_are_bitwise_equal_in_every_mode");
    // Large enough that the backend splits its work over both threads (at 96×72,
    // seed 1795741469076687099 made operators of 30 751 non-zeros on average, below
    // the 32 768 of the parallel path).
    let scene = random_scene_data(seed, 1000, 4, (120, 90), 3);
    for m in MODES {
        let mode = format!("render.cache={m}");
        let sets = [mode.as_str(), "train.batch_size=2", "train.seed=11"];
        let a = train(&scene, &sets, 40, 2);
        let b = train(&scene, &sets, 40, 2);
        assert_bitwise(&format!("{m}, two runs"), &a, &b);
        assert!(
            m == "none" || a.stats.nnz == 0 || a.stats.nnz / a.stats.operators.max(1) >= 1 << 15,
            "the operators are large enough for the parallel SpMM path: {:?}",
            a.stats
        );
        // The work split depends on the thread count; the sums' order does not.
        let one = train(&scene, &sets, 40, 1);
        assert_bitwise(&format!("{m}, 1 vs 2 threads"), &a, &one);
        for p in ["f16", "bf16", "compact"] {
            if m != "operator" {
                continue;
            }
            let w = format!("render.weights={p}");
            let sets = [mode.as_str(), w.as_str(), "train.batch_size=2"];
            let a = train(&scene, &sets, 20, 2);
            let b = train(&scene, &sets, 20, 2);
            assert_bitwise(&format!("{m} {p}, two runs"), &a, &b);
        }
    }
}

// ---------------------------------------------------------------------------------
// The fused operator step
// ---------------------------------------------------------------------------------

/// Training with the fused forward → loss → backward over each cached operator equals
/// training with SpMM, loss and transposed SpMM as three ops, to float rounding, for
/// every per-pixel loss, with and without the V1 normalisation.
#[test]
fn fused_training_equals_the_two_pass_training() {
    let seed = fresh_seed("fused_training_equals_the_two_pass_training");
    let scene = random_scene_data(seed, 1000, 4, (96, 72), 3);
    for loss in ["masked_l1", "cosine", "l1_cosine"] {
        for normalize in ["true", "false"] {
            let l = format!("train.loss={loss}");
            let nrm = format!("train.normalize={normalize}");
            let sets = |fused: &str| {
                vec![
                    "render.cache=operator".to_string(),
                    format!("render.fused={fused}"),
                    l.clone(),
                    nrm.clone(),
                    "train.init_std=0.1".into(),
                    "train.batch_size=2".into(),
                ]
            };
            let (f, t) = (sets("true"), sets("false"));
            let f: Vec<&str> = f.iter().map(String::as_str).collect();
            let t: Vec<&str> = t.iter().map(String::as_str).collect();
            let a = train(&scene, &f, 40, 2);
            let b = train(&scene, &t, 40, 2);
            assert_close(
                &format!("{loss}, normalize {normalize}: fused vs two-pass"),
                &a,
                &b,
            );
        }
    }
}

/// One camera's fused step against the three ops it replaces, in every weight
/// precision and loss: the loss agrees to f64 rounding, the gradient to f32 rounding
/// of its sums; the fused step is bitwise reproducible and independent of the worker
/// count.
#[test]
fn fused_step_matches_the_three_ops_and_is_reproducible() {
    use lsplat_core::config::LossKind;
    let seed = fresh_seed("fused_step_matches_the_three_ops_and_is_reproducible");
    let scene = random_scene_data(seed, 1500, 1, (120, 90), 3);
    let (cam, labels) = (&scene.cameras[0], &scene.labels[0]);
    let devs = [CpuBackend::new(2), CpuBackend::new(1)];
    let dev = &devs[0];
    let geom = dev.upload_geometry(&scene.gaussians).unwrap();
    let grid = TileGrid::new(16, cam.width, cam.height);
    let mut proj = Default::default();
    let mut bins = Default::default();
    dev.project(&geom, &CameraParams::new(cam, 0.01, 1e10), grid, &mut proj)
        .unwrap();
    dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
    let gt = lsplat_engine::gt::upload(dev, labels, 16).unwrap();
    let (n, c, rows) = (scene.gaussians.len(), 3, gt.pixels.len);
    let mut rng = Rng::new(seed ^ 77);
    let x: Vec<f32> = (0..n * c).map(|_| rng.range(-0.5, 0.5)).collect();
    let start: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
    for p in [
        WeightPrecision::F32,
        WeightPrecision::F16,
        WeightPrecision::Bf16,
        WeightPrecision::Compact,
        WeightPrecision::Recompute,
    ] {
        let op = dev.build_operator(&proj, &bins, &gt.pixels, n, p).unwrap();
        assert!(op.nnz() >= 1 << 15, "large enough to run in parallel");
        for kind in [LossKind::MaskedL1, LossKind::Cosine, LossKind::L1Cosine] {
            let what = format!("{p:?} {kind:?}");
            let (mut r, mut d) = (vec![0f32; rows * c], vec![0f32; rows * c]);
            let (mut two, mut l_two) = (start.clone(), vec![0f32; 2]);
            dev.spmm(&op, &x, c, &mut r).unwrap();
            dev.pixel_loss(kind, &r, &gt, 0.5, &mut d, &mut l_two, 1, false)
                .unwrap();
            dev.spmm_t(&op, &d, c, &mut two).unwrap();
            // |Wᵀ|·|d| bounds the rounding of each gradient sum.
            let mut scale = vec![0f64; n * c];
            for row in 0..rows {
                for (g, w) in op.row(row) {
                    for k in 0..c {
                        scale[g as usize * c + k] += (w * d[row * c + k]).abs() as f64;
                    }
                }
            }
            let mut runs = Vec::new();
            for (i, dv) in devs.iter().chain([dev]).enumerate() {
                let mut fused = start.clone();
                let mut loss = vec![0f32; 2];
                let work = (&mut vec![0f32; rows * c], &mut vec![0f32; rows * c]);
                dv.operator_loss_step(
                    kind, &op, &x, &gt, 0.5, work, &mut fused, &mut loss, 1, false,
                )
                .unwrap();
                assert!(
                    (loss[1] - l_two[1]).abs() <= 1e-6 * l_two[1].abs(),
                    "{what}: loss {} vs {}",
                    loss[1],
                    l_two[1]
                );
                for (j, (a, b)) in fused.iter().zip(&two).enumerate() {
                    let tol = 64.0 * U32 * (scale[j] + start[j].abs() as f64) + 1e-30;
                    assert!(
                        ((*a - *b) as f64).abs() <= tol,
                        "{what} run {i}: d_x[{j}] fused {a} vs two-pass {b} (tol {tol:e})"
                    );
                }
                runs.push((fused, loss));
            }
            for (i, r) in runs.iter().enumerate().skip(1) {
                assert!(
                    r.0.iter()
                        .zip(&runs[0].0)
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                        && r.1[1].to_bits() == runs[0].1[1].to_bits(),
                    "{what}: run {i} (1 or 2 workers, repeated) is not bitwise equal"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Eviction
// ---------------------------------------------------------------------------------

/// Bytes of each camera's operator (as the session would build it) and geometry cache.
fn cache_sizes(scene: &SceneData, tile: u32) -> Vec<(usize, usize)> {
    let dev = CpuBackend::new(2);
    let geom = dev.upload_geometry(&scene.gaussians).unwrap();
    scene
        .cameras
        .iter()
        .zip(&scene.labels)
        .map(|(cam, lab)| {
            let gt = lsplat_engine::gt::upload(&dev, lab, tile).unwrap();
            let grid = gt.pixels.grid;
            let mut proj = Default::default();
            let mut bins = Default::default();
            let clip = (Config::default().render.near, Config::default().render.far);
            dev.project(
                &geom,
                &CameraParams::new(cam, clip.0, clip.1),
                grid,
                &mut proj,
            )
            .unwrap();
            dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
            let op = dev
                .build_operator(
                    &proj,
                    &bins,
                    &gt.pixels,
                    scene.gaussians.len(),
                    WeightPrecision::F32,
                )
                .unwrap();
            (op.bytes(), dev.geometry_cache_bytes(&proj, &bins))
        })
        .collect()
}

#[test]
fn eviction_under_a_tiny_budget_changes_nothing_but_speed() {
    let seed = fresh_seed("eviction_under_a_tiny_budget_changes_nothing_but_speed");
    let scene = random_scene_data(seed, 700, 8, (64, 48), 3);
    let sizes = cache_sizes(&scene, 16);
    let mut ops: Vec<usize> = sizes.iter().map(|s| s.0).collect();
    ops.sort_unstable();
    eprintln!("operator and geometry bytes per camera: {sizes:?}");
    // About two cameras' operators (at least the largest, so every camera can hold its
    // own), far below what all cameras need.
    let budget = (ops[0] + ops[1]).max(ops[ops.len() - 1]) as u64;
    assert!(budget * 2 < ops.iter().sum::<usize>() as u64);
    for batch in [1, 2] {
        let b = format!("train.batch_size={batch}");
        let unlimited = train(&scene, &["render.cache=operator", b.as_str()], 100, 2);
        assert_eq!(unlimited.stats.evictions, 0);
        for mode in ["operator", "geometry"] {
            let m = format!("render.cache={mode}");
            let cap = format!("render.cache_budget={budget}");
            let tight = train(&scene, &[m.as_str(), b.as_str(), cap.as_str()], 100, 2);
            eprintln!(
                "batch {batch}, {mode} under {budget} bytes: {:?}, peak {} bytes",
                tight.stats, tight.peak_bytes
            );
            assert!(
                tight.stats.evictions > 0,
                "batch {batch} {mode}: nothing was evicted under a budget of two operators"
            );
            assert!(
                tight.peak_bytes <= budget,
                "batch {batch} {mode}: held {} bytes over a budget of {budget}",
                tight.peak_bytes
            );
            assert_close(
                &format!("batch {batch}, {mode} under the budget vs unlimited"),
                &unlimited,
                &tight,
            );
        }
        // With a cache folder, the operators that find the budget full are spilled to
        // disk instead of evicting others (a fast disk is assumed, so the cost model
        // spills whatever the machine's load), and the run is bitwise the unlimited
        // one.
        let dir =
            std::env::temp_dir().join(format!("lsplat-cache-spill-{}-{batch}", std::process::id()));
        let cap = format!("render.cache_budget={budget}");
        let spilled = train_in(
            &scene,
            &[
                "render.cache=operator",
                b.as_str(),
                cap.as_str(),
                "render.disk_read_bandwidth=1e15",
                // Whatever the disk the test runs on has free.
                "render.disk_keep_free=0",
            ],
            100,
            2,
            Some(&dir),
        );
        eprintln!("batch {batch}, spilled: {:?}", spilled.stats);
        // The spilled operators' resident parts count against the budget too; when
        // they find it full, an operator held in memory moves to disk to make room
        // (the same bits) instead of being evicted, so no camera ever falls back to
        // the rasterizer (whose transposed sums are ordered differently) and the
        // budget holds.
        assert!(
            spilled.stats.spilled > 0 && spilled.peak_bytes <= budget,
            "{:?}, peak {} of {budget}",
            spilled.stats,
            spilled.peak_bytes
        );
        assert!(
            spilled.stats.evictions == 0 && spilled.stats.operators == unlimited.stats.operators,
            "{:?}",
            spilled.stats
        );
        let plan = spilled.placement.unwrap();
        let cams = scene.cameras.len();
        // Planned from the first operator built (the first camera sampled).
        let in_memory = plan.memory;
        assert!(
            sizes
                .iter()
                .any(|s| (budget / s.0 as u64) as usize == in_memory),
            "{plan:?}"
        );
        assert_eq!((plan.disk, plan.rebuilt), (cams - in_memory, 0), "{plan:?}");
        assert!(plan.to_string().starts_with(&format!(
            "caching {in_memory} of {cams} cameras in memory, {} on disk (",
            cams - in_memory
        )));
        assert!(
            std::fs::read_dir(&dir).unwrap().next().is_none(),
            "spill files are unlinked once mapped"
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_bitwise(
            &format!("batch {batch}: spilled vs unlimited"),
            &unlimited,
            &spilled,
        );
        // A budget smaller than any cache: everything stays cold, nothing is evicted,
        // and the run is bitwise the `none` run.
        let zero = train(
            &scene,
            &["render.cache=operator", b.as_str(), "render.cache_budget=0"],
            100,
            2,
        );
        let none = train(&scene, &["render.cache=none", b.as_str()], 100, 2);
        assert_eq!(
            (
                zero.stats.bytes,
                zero.peak_bytes,
                zero.stats.evictions,
                zero.stats.hits
            ),
            (0, 0, 0, 0),
            "batch {batch}: a zero budget caches nothing: {:?}",
            zero.stats
        );
        assert_bitwise(&format!("batch {batch}: zero budget vs none"), &zero, &none);
    }
}
