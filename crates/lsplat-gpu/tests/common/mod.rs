//! Shared helpers of the GPU tests: the runtimes every test runs on (simt at warp 32
//! and 64 under three schedules; CUDA and HIP when compiled in), fresh-seeded random
//! scenes, and comparisons.
#![allow(dead_code)]

use glam::Vec3;
use lsplat_core::{Camera, Gaussians, Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_device::{Backend, CameraParams, DeviceError, GroundTruth, PixelSet};
use lsplat_gpu::simt::{Schedule, Simt, SimtOptions};
use lsplat_gpu::{GpuBackend, Runtime, SimtBackend};
use lsplat_kernels::Kernel;

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

fn skip<T>(var: &str, what: &str, e: DeviceError) -> Option<T> {
    assert!(!required(var), "{var}=1 but {what} is unavailable: {e}");
    eprintln!("SKIPPED (no {what}): {e}");
    None
}

/// The simt runtime with `warp` lanes and `schedule` (seeded from [`seed`]), or `None`
/// (skipped, with a message) without a C++ compiler unless `LSPLAT_REQUIRE_SIMT=1`.
pub fn simt(warp: u32, schedule: Schedule) -> Option<SimtBackend> {
    let options = SimtOptions {
        warp,
        schedule,
        seed: seed(),
        threads: 2,
    };
    match Simt::new(options) {
        Ok(rt) => {
            // The kernels' shapes on a GPU, shuffles included (simt's default avoids them).
            let g = GpuBackend::new(rt);
            g.set_grouped_spmm(true);
            Some(long_rows_split(g))
        }
        Err(e) => skip("LSPLAT_REQUIRE_SIMT", "simt runtime", e),
    }
}

/// `g` with the long-row split of the grouped SpMM at 64 entries (2048 in use), so
/// that the test scenes' larger Gaussians take the block-per-row path.
fn long_rows_split<R: Runtime>(g: GpuBackend<R>) -> GpuBackend<R> {
    g.set_spmm_long_min(64);
    g
}

/// The CUDA device, or `None` (skipped) unless `LSPLAT_REQUIRE_CUDA=1`.
#[cfg(feature = "cuda")]
pub fn cuda() -> Option<lsplat_gpu::CudaBackend> {
    match lsplat_gpu::cuda::Cuda::new(0, Default::default()) {
        Ok(rt) => Some(long_rows_split(GpuBackend::new(rt))),
        Err(e) => skip("LSPLAT_REQUIRE_CUDA", "CUDA device", e),
    }
}

/// The HIP device, or `None` (skipped) unless `LSPLAT_REQUIRE_HIP=1`.
#[cfg(feature = "hip")]
pub fn hip() -> Option<lsplat_gpu::HipBackend> {
    match lsplat_gpu::hip::Hip::new(0) {
        Ok(rt) => Some(long_rows_split(GpuBackend::new(rt))),
        Err(e) => skip("LSPLAT_REQUIRE_HIP", "HIP device", e),
    }
}

/// Instantiates generic test bodies `fn name<R: Runtime>(gpu: &GpuBackend<R>)` once per
/// runtime configuration: simt × {warp 32, 64} × {in order, reverse, random}, and
/// CUDA / HIP when their features are on.
#[macro_export]
macro_rules! gpu_tests {
    ($($name:ident),* $(,)?) => {
        $crate::gpu_tests!(@simt simt_w32_in_order, 32, InOrder; $($name),*);
        $crate::gpu_tests!(@simt simt_w32_reverse, 32, Reverse; $($name),*);
        $crate::gpu_tests!(@simt simt_w32_random, 32, Random; $($name),*);
        $crate::gpu_tests!(@simt simt_w64_in_order, 64, InOrder; $($name),*);
        $crate::gpu_tests!(@simt simt_w64_reverse, 64, Reverse; $($name),*);
        $crate::gpu_tests!(@simt simt_w64_random, 64, Random; $($name),*);
        #[cfg(feature = "cuda")]
        mod cuda {
            $(#[test] fn $name() {
                if let Some(g) = $crate::common::cuda() { super::$name(&g) }
            })*
        }
        #[cfg(feature = "hip")]
        mod hip {
            $(#[test] fn $name() {
                if let Some(g) = $crate::common::hip() { super::$name(&g) }
            })*
        }
    };
    (@simt $module:ident, $warp:expr, $schedule:ident; $($name:ident),*) => {
        mod $module {
            $(#[test] fn $name() {
                let schedule = lsplat_gpu::simt::Schedule::$schedule;
                if let Some(g) = $crate::common::simt($warp, schedule) { super::$name(&g) }
            })*
        }
    };
}

/// Uploads to whichever device.
pub fn up<R: Runtime, T: lsplat_device::Element>(
    gpu: &GpuBackend<R>,
    data: &[T],
) -> lsplat_gpu::GpuBuf<R, T> {
    gpu.upload(data).unwrap()
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

/// The scene projected and binned on `dev`.
pub fn binned<B: Backend>(dev: &B, s: &Scene) -> (B::Projection, B::Bins) {
    let geometry = dev.upload_geometry(&s.gaussians).unwrap();
    let (mut proj, mut bins) = (B::Projection::default(), B::Bins::default());
    dev.project(&geometry, &s.camera, s.grid, &mut proj)
        .unwrap();
    dev.bin_and_sort(&proj, s.grid, &mut bins).unwrap();
    (proj, bins)
}

/// Compiles every kernel family for each target, both tile sizes and C = 3 and 64
/// with `compile(kernel, tile, channels, target)`, which returns the compiler's log;
/// fails listing every error and every non-empty log (warnings are errors).
pub fn compile_every_family(
    targets: &[&str],
    mut compile: impl FnMut(Kernel, u32, u32, &str) -> Result<String, DeviceError>,
) {
    let mut failures = Vec::new();
    let mut count = 0;
    for target in targets {
        for tile in lsplat_kernels::TILE_SIZES {
            for channels in [3u32, 64] {
                for kernel in Kernel::ALL {
                    count += 1;
                    match compile(kernel, tile, channels, target) {
                        Ok(log) if log.is_empty() => {}
                        Ok(log) => failures.push(format!(
                            "{} {target} tile {tile} C {channels}: warnings:\n{log}",
                            kernel.file_name()
                        )),
                        Err(e) => failures.push(e.to_string()),
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} compilations failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("{count} compilations clean");
}

/// Random values in [-1, 1).
pub fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.range(-1.0, 1.0)).collect()
}

/// A random valid-pixel subset (probability `p`) as host lists, with every seventh
/// tile left without valid pixels (empty tiles).
pub fn subset(rng: &mut Rng, grid: TileGrid, p: f32) -> (Vec<u32>, Vec<u32>) {
    grid.select_pixels(|i| {
        let tile = grid.tile_of(i % grid.width, i / grid.width);
        rng.f32() < p && tile % 7 != 3
    })
}

/// Ground truth on both devices from the same host data.
pub fn ground_truth<G: Backend>(
    rng: &mut Rng,
    cpu: &CpuBackend,
    gpu: &G,
    grid: TileGrid,
    c: usize,
) -> (GroundTruth<CpuBackend>, GroundTruth<G>) {
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
    let make_gpu = GroundTruth {
        pixels: PixelSet::upload(gpu, grid, &px, &off).unwrap(),
        mask: gpu.upload(&mask).unwrap(),
        table: gpu.upload(&table).unwrap(),
        rows,
        channels: c,
    };
    (make_cpu, make_gpu)
}

/// Whether `a` is off `b` by more than `atol + rtol·|b|`.
pub fn differs(a: f32, b: f32, atol: f32, rtol: f32) -> bool {
    (a - b).abs() > atol + rtol * b.abs()
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
        if differs(a, b, atol, rtol) {
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
