//! Shared helpers of the GPU parity tests: device discovery (skip without a GPU),
//! fresh-seeded random scenes, and comparisons.
#![allow(dead_code)]

use glam::Vec3;
use lsplat_core::{Camera, Gaussians, Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_cuda::CudaBackend;
use lsplat_device::{CameraParams, GroundTruth, PixelSet};

/// The CUDA device, or `None` (test skipped, with a message) when none is usable.
/// `LSPLAT_REQUIRE_CUDA=1` turns a missing device into a failure.
pub fn cuda() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(d) => Some(d),
        Err(e) => {
            let required = std::env::var("LSPLAT_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "LSPLAT_REQUIRE_CUDA=1 but: {e}");
            eprintln!("SKIPPED (no CUDA device): {e}");
            None
        }
    }
}

/// A fresh seed (from `LSPLAT_SEED` when set, to reproduce a failure), printed.
pub fn seed() -> u64 {
    let s = std::env::var("LSPLAT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed {s} (LSPLAT_SEED={s} reproduces)");
    s
}

/// A random scene: `n` Gaussians in front of a `w × h` camera.
pub struct Scene {
    pub gaussians: Gaussians,
    pub camera: CameraParams,
    pub grid: TileGrid,
}

pub fn scene(rng: &mut Rng, n: usize, w: u32, h: u32, tile: u32) -> Scene {
    let mut g = Gaussians::default();
    for _ in 0..n {
        g.means.push([
            rng.range(-1.5, 1.5),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
        ]);
        let s = rng.range(-4.5, -2.0);
        g.log_scales
            .push([s + rng.range(-0.5, 0.5), s, s + rng.range(-0.5, 0.5)]);
        let u = rng.unit3();
        g.rotations.push([rng.range(0.2, 1.0), u[0], u[1], u[2]]);
        g.opacity_logits.push(rng.range(-3.0, 4.0));
    }
    g.normalize_rotations();
    let cam = Camera::look_at(
        "t",
        (w, h),
        0.9,
        Vec3::new(0.3, -0.2, -4.0),
        Vec3::ZERO,
        Vec3::new(0.0, -1.0, 0.0),
    );
    Scene {
        gaussians: g,
        camera: CameraParams::new(&cam, 0.01, 1e10),
        grid: TileGrid::new(tile, w, h),
    }
}

/// Random values in [-1, 1).
pub fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.range(-1.0, 1.0)).collect()
}

/// A random valid-pixel subset (probability `p`) as host lists.
pub fn subset(rng: &mut Rng, grid: TileGrid, p: f32) -> (Vec<u32>, Vec<u32>) {
    grid.select_pixels(|_| rng.f32() < p)
}

/// Ground truth on both devices from the same host data.
pub fn ground_truth(
    rng: &mut Rng,
    cpu: &CpuBackend,
    gpu: &CudaBackend,
    grid: TileGrid,
    c: usize,
) -> (GroundTruth<CpuBackend>, GroundTruth<CudaBackend>) {
    let (px, off) = subset(rng, grid, 0.7);
    let rows = 9;
    let mask: Vec<u32> = px.iter().map(|_| rng.below(rows as u64) as u32).collect();
    let table = values(rng, rows * c);
    let make_cpu = GroundTruth {
        pixels: PixelSet::upload(cpu, grid, &px, &off).unwrap(),
        mask: mask.clone(),
        table: table.clone(),
        rows,
        channels: c,
    };
    use lsplat_device::Backend;
    let make_gpu = GroundTruth {
        pixels: PixelSet::upload(gpu, grid, &px, &off).unwrap(),
        mask: gpu.upload(&mask).unwrap(),
        table: gpu.upload(&table).unwrap(),
        rows,
        channels: c,
    };
    (make_cpu, make_gpu)
}

/// Compares element-wise with `|a − b| ≤ atol + rtol·|b|`; returns the number of
/// mismatches and panics (with context) when more than `allowed` differ or any GPU
/// value is non-finite where the CPU's is finite (poison left behind).
pub fn compare(
    what: &str,
    gpu: &[f32],
    cpu: &[f32],
    atol: f32,
    rtol: f32,
    allowed: usize,
) -> usize {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    let mut bad = Vec::new();
    for (i, (&a, &b)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            !a.is_nan() || b.is_nan(),
            "{what}[{i}]: GPU left poison (cpu {b})"
        );
        if (a - b).abs() > atol + rtol * b.abs() {
            bad.push((i, a, b));
        }
    }
    assert!(
        bad.len() <= allowed,
        "{what}: {} of {} differ (allowed {allowed}); first: {:?}",
        bad.len(),
        cpu.len(),
        &bad[..bad.len().min(8)]
    );
    bad.len()
}
