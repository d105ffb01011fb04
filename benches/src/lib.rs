//! Bench inputs: one camera of a scene, projected and binned, its valid pixels, the
//! cached operator in each weight precision, and the byte counts that turn a time
//! into an achieved bandwidth.
//!
//! Bytes moved by one `spmm` (`out = W·x`), with `R` rows, `Z` non-zeros, `L` listed
//! Gaussians (each block's distinct Gaussians, summed over blocks), `C` channels and
//! weight width `w` bytes:
//!
//! ```text
//! operator (row/block offsets, block lists L·4, local indices Z·2, weights Z·w)
//!   +  gathered x rows L·C·4  +  output R·C·4
//! ```
//!
//! `spmm_t` (`d_x += Wᵀ·d`) reads the same operator bytes and `d` (`R·C·4`), and reads
//! and writes the block rows of `d_x` (`2·L·C·4`). Gathers of the same Gaussian by
//! several blocks are each counted; what reaches DRAM is between the compulsory
//! `N·C·4` and that figure.

use glam::Vec3;
use lsplat_core::config::WeightPrecision;
use lsplat_core::{Camera, Config, Gaussians, Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_cpu::bins::CpuBins;
use lsplat_cpu::operator::CpuOperator;
use lsplat_cpu::project::CpuProjection;
use lsplat_data::ImageLabels;
use lsplat_device::{Backend, CameraParams, GroundTruth, PixelSet};

/// One camera ready to bench.
pub struct Case {
    /// Name (used in bench ids).
    pub name: String,
    /// Projected splats.
    pub projection: CpuProjection,
    /// Sorted tile lists.
    pub bins: CpuBins,
    /// Valid pixels in tile-major order (the operator's rows), as training uploads them.
    pub pixels: PixelSet<CpuBackend>,
    /// The labels as training uploads them (pixels, mask rows, feature table).
    pub gt: GroundTruth<CpuBackend>,
    /// Gaussians.
    pub gaussians: usize,
    /// Image size.
    pub size: (u32, u32),
}

impl Case {
    /// Projects and bins `cam` and uploads its labels.
    pub fn new(
        dev: &CpuBackend,
        name: impl Into<String>,
        gaussians: &Gaussians,
        cam: &Camera,
        labels: &ImageLabels,
    ) -> Case {
        let render = Config::default().render;
        let geom = dev.upload_geometry(gaussians).expect("geometry");
        let grid = TileGrid::new(render.tile_size, cam.width, cam.height);
        let mut valid = vec![0u32; grid.pixel_count()];
        for (&p, &m) in labels.valid.iter().zip(&labels.mask) {
            valid[p as usize] = m + 1;
        }
        let (order, offsets) = grid.select_pixels(|p| valid[p as usize] != 0);
        let pixels = PixelSet::upload(dev, grid, &order, &offsets).expect("pixels");
        let gt = GroundTruth {
            pixels: PixelSet::upload(dev, grid, &order, &offsets).expect("pixels"),
            mask: order.iter().map(|&p| valid[p as usize] - 1).collect(),
            table: labels.features.clone(),
            rows: labels.rows(),
            channels: labels.dim,
        };
        let mut projection = CpuProjection::default();
        let mut bins = CpuBins::default();
        dev.project(
            &geom,
            &CameraParams::new(cam, render.near, render.far),
            grid,
            &mut projection,
        )
        .expect("project");
        dev.bin_and_sort(&projection, grid, &mut bins).expect("bin");
        Case {
            name: name.into(),
            projection,
            bins,
            pixels,
            gt,
            gaussians: gaussians.len(),
            size: (cam.width, cam.height),
        }
    }

    /// Valid pixels (operator rows).
    pub fn rows(&self) -> usize {
        self.pixels.len
    }

    /// The tile grid.
    pub fn grid(&self) -> TileGrid {
        self.pixels.grid
    }

    /// Builds the operator in `precision`.
    pub fn operator(&self, dev: &CpuBackend, precision: WeightPrecision) -> CpuOperator {
        dev.build_operator(
            &self.projection,
            &self.bins,
            &self.pixels,
            self.gaussians,
            precision,
        )
        .expect("operator")
    }

    /// Random `[N, C]` features.
    pub fn features(&self, channels: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        (0..self.gaussians * channels)
            .map(|_| rng.range(-1.0, 1.0))
            .collect()
    }

    /// A one-line summary: sizes, non-zeros per row, tile-list lengths.
    pub fn describe(&self, op: &CpuOperator) -> String {
        format!(
            "{}: {} Gaussians, {}x{}, {} valid pixels ({:.0}%), {} intersections, nnz {} ({:.1} per row), operator {:.1} MB",
            self.name,
            self.gaussians,
            self.size.0,
            self.size.1,
            self.rows(),
            100.0 * self.rows() as f64 / (self.size.0 as f64 * self.size.1 as f64),
            self.bins.len(),
            op.nnz(),
            op.nnz() as f64 / self.rows().max(1) as f64,
            op.bytes() as f64 / 1e6
        )
    }
}

/// Bytes moved by one `spmm` with `c` channels (see the crate docs).
pub fn spmm_bytes(op: &CpuOperator, c: usize) -> u64 {
    let (r, l, c) = (op.rows() as u64, op.listed() as u64, c as u64);
    op.bytes() as u64 + l * c * 4 + r * c * 4
}

/// Bytes moved by one `spmm_t` with `c` channels (see the crate docs).
pub fn spmm_t_bytes(op: &CpuOperator, c: usize) -> u64 {
    let (r, l, c) = (op.rows() as u64, op.listed() as u64, c as u64);
    op.bytes() as u64 + r * c * 4 + 2 * l * c * 4
}

/// Random labels: 8×8 blocks are valid with probability `valid` (masks are blobs)
/// and carry one of `rows` random unit features.
pub fn block_labels(
    rng: &mut Rng,
    cam: &Camera,
    dim: usize,
    rows: usize,
    valid: f64,
) -> ImageLabels {
    let mut features = Vec::with_capacity(rows * dim);
    for _ in 0..rows {
        let v: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-6);
        features.extend(v.iter().map(|a| a / n));
    }
    let (w, h) = (cam.width, cam.height);
    let (bw, bh) = (w.div_ceil(8), h.div_ceil(8));
    let block: Vec<i32> = (0..bw * bh)
        .map(|_| {
            if rng.f64() < valid {
                rng.below(rows as u64) as i32
            } else {
                -1
            }
        })
        .collect();
    let seg: Vec<i32> = (0..w * h)
        .map(|p| block[((p / w / 8) * bw + (p % w) / 8) as usize])
        .collect();
    ImageLabels::from_seg_map(cam.name.clone(), (w, h), &seg, features, dim).expect("labels")
}

/// `n` Gaussians on the surfaces of a few random spheres inside the unit cube, with
/// small, mostly flat scales (as a trained splat's surface Gaussians are), seen by a
/// camera at distance ~3.5 with 25% of the pixels valid.
pub fn synthetic(dev: &CpuBackend, n: usize, (w, h): (u32, u32), seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let spheres: Vec<(Vec3, f32)> = (0..12)
        .map(|_| {
            let c = Vec3::new(
                rng.range(-0.7, 0.7),
                rng.range(-0.7, 0.7),
                rng.range(-0.7, 0.7),
            );
            (c, rng.range(0.15, 0.45))
        })
        .collect();
    let mut g = Gaussians::default();
    for _ in 0..n {
        let (c, r) = spheres[rng.below(spheres.len() as u64) as usize];
        let p = c + r * Vec3::from(rng.unit3());
        g.means.push(p.to_array());
        let s = rng.range(-5.0, -3.3);
        g.log_scales
            .push([s, s + rng.range(-0.5, 0.5), s - rng.range(0.5, 2.0)]);
        g.rotations
            .push([rng.normal(), rng.normal(), rng.normal(), rng.normal()]);
        g.opacity_logits.push(rng.range(-2.0, 4.0));
    }
    g.normalize_rotations();
    let cam = Camera::look_at(
        "synthetic",
        (w, h),
        0.8,
        Vec3::new(3.0, -1.5, 1.0),
        Vec3::ZERO,
        Vec3::Z,
    );
    let labels = block_labels(&mut rng, &cam, 3, 12, 0.25);
    Case::new(dev, format!("synthetic{}k", n / 1000), &g, &cam, &labels)
}

/// The embedded demo scene, first camera, with its own labels.
pub fn demo(dev: &CpuBackend) -> Case {
    let cfg = Config::default();
    let d = lsplat_data::demo::generate(&cfg.demo, 1).expect("demo");
    let s = &d.scene;
    Case::new(dev, "demo", &s.gaussians, &s.cameras[0], &s.labels[0])
}

/// The biker splat (`splats/playcanvas_biker.inria_sh0.ply` of the test data, see
/// [`lsplat_data::testdata`]) seen from an orbit camera at `size`, 25% valid pixels;
/// `None` (skipped, with one line) when the test data is absent.
pub fn biker(dev: &CpuBackend, size: (u32, u32)) -> Option<Case> {
    let path = lsplat_data::testdata::test_file("splats/playcanvas_biker.inria_sh0.ply")?;
    let g = lsplat_data::ply::read_ply(&path).ok()?.gaussians;
    // Look at the median centre from ~1.1x the spread of the middle 80% of centres.
    let mut centre = [0f32; 3];
    let mut spread = 0f32;
    for (k, c) in centre.iter_mut().enumerate() {
        let mut v: Vec<f32> = g.means.iter().map(|m| m[k]).collect();
        v.sort_by(f32::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        *c = q(0.5);
        spread = spread.max(q(0.9) - q(0.1));
    }
    let target = Vec3::from(centre);
    let eye = target + 1.1 * spread * Vec3::new(0.8, -0.35, 0.5).normalize();
    let cam = Camera::look_at("biker", size, 0.9, eye, target, -Vec3::Y);
    let mut rng = Rng::new(5);
    let labels = block_labels(&mut rng, &cam, 3, 12, 0.25);
    Some(Case::new(dev, "biker", &g, &cam, &labels))
}
