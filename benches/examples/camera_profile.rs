//! Where one camera's time goes: projection, binning and sorting, the rasterizer's
//! feature-only backward (what `solve --method average` runs per camera, one level and
//! three), the operator build and the products over it, each timed alone (best of
//! `--repeat` runs).
//!
//! ```sh
//! cargo run --release -p lsplat-benches --example camera_profile -- SCENE.toml [CAMERA] [REPEAT] [THREADS]
//! ```

use std::time::Instant;

use lsplat_core::config::WeightPrecision;
use lsplat_core::{Config, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_cpu::bins::CpuBins;
use lsplat_cpu::project::CpuProjection;
use lsplat_device::{Backend, CameraParams, PixelSet};

/// CPU seconds (user + system) of this process so far, from /proc (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with the last ')'): utime is the 12th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Best wall time of `repeat` runs (ms), with the CPU time of that run (ms, all threads).
fn best<T>(repeat: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = (f64::INFINITY, 0.0);
    let mut out = None;
    for _ in 0..repeat {
        let (t, c) = (Instant::now(), cpu_seconds());
        let v = f();
        let wall = t.elapsed().as_secs_f64();
        if wall < best.0 {
            best = (wall, cpu_seconds() - c);
        }
        out = Some(v);
    }
    CPU.with(|x| x.set(best.1 * 1e3));
    (best.0 * 1e3, out.expect("repeat >= 1"))
}

thread_local! {
    static CPU: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

/// CPU ms of the last [`best`].
fn cpu() -> String {
    format!("(cpu {:.0} ms)", CPU.with(|x| x.get()))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scene_path = args
        .get(1)
        .expect("usage: camera_profile SCENE.toml [CAMERA] [REPEAT] [THREADS]");
    let cam: usize = args.get(2).map_or(0, |s| s.parse().expect("camera index"));
    let repeat: usize = args.get(3).map_or(3, |s| s.parse().expect("repeat"));
    let threads: usize = args.get(4).map_or(0, |s| s.parse().expect("threads"));
    let cfg = Config::load(std::path::Path::new(scene_path)).expect("scene file");
    let t = Instant::now();
    let loaded = lsplat_data::scene::load_scene_levels(&cfg.scene, &[1, 2, 3]).expect("scene");
    eprintln!("loaded in {:.1} s", t.elapsed().as_secs_f64());
    let data = &loaded.data;
    let camera = &data.cameras[cam];
    let labels = [
        &data.labels[cam],
        &loaded.more_levels[0][cam],
        &loaded.more_levels[1][cam],
    ];
    let dev = CpuBackend::new(threads);
    let n = data.gaussians.len();
    let geom = dev.upload_geometry(&data.gaussians).expect("geometry");
    let render = cfg.render;
    let grid = TileGrid::new(render.tile_size, camera.width, camera.height);
    let params = CameraParams::new(camera, render.near, render.far);
    let mut proj = CpuProjection::default();
    let mut bins = CpuBins::default();
    let (t_proj, ()) = best(repeat, || {
        dev.project(&geom, &params, grid, &mut proj)
            .expect("project")
    });
    let proj_cpu = cpu();
    let (t_bin, ()) = best(repeat, || {
        dev.bin_and_sort(&proj, grid, &mut bins).expect("bin")
    });
    let bin_cpu = cpu();
    let visible = proj.splats.iter().filter(|s| s.rect != [0; 4]).count();
    let lists: Vec<usize> = (0..grid.tile_count()).map(|t| bins.tile(t).len()).collect();
    let max_list = lists.iter().copied().max().unwrap_or(0);
    println!(
        "{} Gaussians ({visible} on screen), {}x{}, {} tiles, {} intersections ({:.0} per tile, longest {max_list})",
        n,
        camera.width,
        camera.height,
        grid.tile_count(),
        bins.len(),
        bins.len() as f64 / grid.tile_count() as f64,
    );
    println!("project            {t_proj:9.1} ms {proj_cpu}");
    println!("bin + sort         {t_bin:9.1} ms {bin_cpu}");
    for levels in [1usize, 3] {
        let t = lsplat_solve::Targets::new(&labels[..levels], render.tile_size);
        let set = PixelSet::upload(&dev, grid, &t.pixels, &t.offsets).expect("pixels");
        let d = t.masked_targets_with_mask(&labels[..levels], 0..levels);
        let ch = levels * (data.dim() + 1);
        let mut acc = vec![0f32; n * ch];
        let (t_bwd, ()) = best(repeat, || {
            dev.rasterize_backward(&proj, &bins, &set, &d, ch, &mut acc)
                .expect("backward")
        });
        println!(
            "average walk, {levels} level(s) ({} pixels, {ch} channels) {t_bwd:9.1} ms {}",
            set.len,
            cpu()
        );
        if levels == 1 {
            let x: Vec<f32> = (0..n * ch).map(|i| (i % 7) as f32 * 0.1).collect();
            let mut out = vec![0f32; set.len * ch];
            let (t_fwd, ()) = best(repeat, || {
                dev.rasterize(&proj, &bins, &set, &x, ch, &mut out)
                    .expect("rasterize")
            });
            println!("rasterize forward  {t_fwd:9.1} ms {}", cpu());
        }
        // The exact operator's forward, against which the compact one is compared.
        let mut exact: Vec<f32> = Vec::new();
        for p in [
            WeightPrecision::F32,
            WeightPrecision::Compact,
            WeightPrecision::Recompute,
        ] {
            let (t_build, op) = best(repeat, || {
                dev.build_operator(&proj, &bins, &set, n, p)
                    .expect("operator")
            });
            let build_cpu = cpu();
            let s = dev.operator_stats(&op);
            let x: Vec<f32> = (0..n * ch).map(|i| (i % 7) as f32 * 0.1).collect();
            let mut out = vec![0f32; set.len * ch];
            let (t_spmm, ()) = best(repeat, || dev.spmm(&op, &x, ch, &mut out).expect("spmm"));
            // Largest |W̃x − Wx| relative to the largest |Wx| (0 for the exact one).
            if exact.is_empty() {
                exact = out.clone();
            }
            let peak = exact
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()))
                .max(f32::MIN_POSITIVE);
            let err = out
                .iter()
                .zip(&exact)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()))
                / peak;
            let (t_spmm_t, ()) = best(repeat, || {
                dev.spmm_t(&op, &out, ch, &mut acc).expect("spmm_t")
            });
            println!(
                "operator build {p:?}, {levels} level(s) {t_build:9.1} ms {build_cpu}: nnz {} ({:.1} per row; {} rows, {} block-list entries, {} Gaussians with a weight, {} entries with fillers), {:.1} MB ({:.2} B/entry); spmm {t_spmm:.1} ms, spmm_t {t_spmm_t:.1} ms; max |Δ(W·x)| / max |W·x| against f32 {err:.1e}",
                s.nnz,
                s.nnz as f64 / s.rows.max(1) as f64,
                s.rows,
                op.listed(),
                op.visible(),
                op.entries(),
                s.bytes as f64 / 1e6,
                s.bytes as f64 / s.nnz.max(1) as f64
            );
        }
    }
}
