//! The plugin against a float64 reference, finite differences, and across backends.

use lsplat_core::{Rng, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_device::{
    Backend, DeviceError, DeviceOp, GroundTruth, HostArgs, HostPool, OpArg, OpKernel, PixelSet,
    Result, Scalar,
};
use lsplat_engine::PixelLoss;
use lsplat_gpu::SimtBackend;
use lsplat_gpu::simt::{Schedule, Simt, SimtOptions};

use super::*;

const C: usize = 8;
const ROWS: usize = 5;

/// ρ(1 − cos(f, g)) in float64.
fn rho64(f: &[f64], g: &[f64], s: f64) -> f64 {
    let nf = f.iter().map(|v| v * v).sum::<f64>().sqrt();
    let ng = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    let dot: f64 = f.iter().zip(g).map(|(a, b)| a * b).sum();
    let cos = dot / (nf * ng);
    s * (1.0 + (1.0 - cos) / s).ln()
}

struct Case {
    grid: TileGrid,
    rendered: Vec<f32>,
    mask: Vec<u32>,
    table: Vec<f32>,
}

fn case(seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let grid = TileGrid::new(16, 20, 12);
    let v = grid.pixel_count();
    let rendered = (0..v * C).map(|_| rng.normal()).collect();
    let mask = (0..v).map(|_| rng.below(ROWS as u64) as u32).collect();
    let table = (0..ROWS * C).map(|_| rng.normal()).collect();
    Case {
        grid,
        rendered,
        mask,
        table,
    }
}

fn gt<B: Backend>(dev: &B, c: &Case) -> GroundTruth<B> {
    GroundTruth {
        pixels: PixelSet::full(dev, c.grid).unwrap(),
        mask: dev.upload(&c.mask).unwrap(),
        table: dev.upload(&c.table).unwrap(),
        rows: ROWS,
        channels: C,
    }
}

/// (loss slot 1 after storing then adding, d_rendered) on `dev`.
fn run<B: Backend>(dev: &B, c: &Case, weight: f32) -> (f32, f32, Vec<f32>) {
    let gt = gt(dev, c);
    let loss_fn = RobustCosine::<B>::default();
    let rendered = dev.upload(&c.rendered).unwrap();
    let mut d = dev.alloc::<f32>(c.rendered.len()).unwrap();
    let mut loss = dev.alloc::<f32>(3).unwrap();
    loss_fn
        .loss(dev, &rendered, &gt, weight, &mut d, &mut loss, 1, false)
        .unwrap();
    let once = dev.download(&loss).unwrap()[1];
    loss_fn
        .loss(dev, &rendered, &gt, weight, &mut d, &mut loss, 1, true)
        .unwrap();
    let twice = dev.download(&loss).unwrap()[1];
    (once, twice, dev.download(&d).unwrap())
}

fn simt(warp: u32, schedule: Schedule) -> Option<SimtBackend> {
    let options = SimtOptions {
        warp,
        schedule,
        seed: 7,
        threads: 2,
    };
    match Simt::new(options) {
        Ok(rt) => Some(lsplat_gpu::GpuBackend::new(rt)),
        Err(e) => {
            let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
            assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but: {e}");
            eprintln!("SKIPPED (no simt runtime): {e}");
            None
        }
    }
}

#[test]
fn cpu_matches_float64_reference_and_finite_differences() {
    let c = case(1);
    let weight = 0.5;
    let (once, twice, d) = run(&CpuBackend::new(2), &c, weight);
    let hw = c.grid.pixel_count() as f64;
    let s = SCALE as f64;
    let row = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let mut want = 0.0;
    for (p, &m) in c.mask.iter().enumerate() {
        let m = m as usize;
        let f = row(&c.rendered[p * C..p * C + C]);
        let g = row(&c.table[m * C..m * C + C]);
        want += rho64(&f, &g, s);
        // Central differences of weight·ρ/HW for every channel of this pixel.
        for j in 0..C {
            let h = 1e-6;
            let (mut a, mut b) = (f.clone(), f.clone());
            a[j] += h;
            b[j] -= h;
            let fd = weight as f64 * (rho64(&a, &g, s) - rho64(&b, &g, s)) / (2.0 * h) / hw;
            let got = d[p * C + j] as f64;
            assert!(
                (got - fd).abs() <= 1e-4 * fd.abs().max(1e-3 / hw),
                "pixel {p} channel {j}: {got} vs {fd}"
            );
        }
    }
    let want = weight as f64 * want / hw;
    assert!((once as f64 - want).abs() < 1e-6 * want, "{once} vs {want}");
    assert!((twice as f64 - 2.0 * want).abs() < 2e-6 * want);
}

#[test]
fn simt_matches_cpu_at_both_warp_sizes() {
    let c = case(2);
    let cpu = run(&CpuBackend::new(2), &c, 1.0);
    for (warp, schedule) in [(32, Schedule::InOrder), (64, Schedule::Random)] {
        let Some(dev) = simt(warp, schedule) else {
            return;
        };
        let got = run(&dev, &c, 1.0);
        assert!(
            (got.0 - cpu.0).abs() <= 1e-6 * cpu.0,
            "warp {warp}: {} vs {}",
            got.0,
            cpu.0
        );
        assert!((got.1 - cpu.1).abs() <= 1e-6 * cpu.1);
        let worst = got
            .2
            .iter()
            .zip(&cpu.2)
            .map(|(a, b)| (a - b).abs() / b.abs().max(1e-6))
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "warp {warp}: gradient differs by {worst}");
        // Same inputs, same backend: the same bits.
        assert_eq!(run(&dev, &c, 1.0).2, got.2);
    }
}

#[test]
fn short_buffers_are_refused_before_anything_runs() {
    let dev = CpuBackend::new(1);
    let c = case(3);
    let gt = gt(&dev, &c);
    let rendered = dev.upload(&c.rendered[..C]).unwrap();
    let mut d = dev.alloc::<f32>(c.rendered.len()).unwrap();
    let mut loss = dev.alloc::<f32>(1).unwrap();
    let e = RobustCosine::<CpuBackend>::default()
        .loss(&dev, &rendered, &gt, 1.0, &mut d, &mut loss, 0, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("robust_cosine_pixels") && e.contains("rendered"),
        "{e}"
    );
    assert!(e.contains("plugin robust-cosine"), "{e}");
    assert!(d.iter().all(|&v| v == 0.0), "nothing is written");
}

/// An op whose kernel does not compile.
struct Broken;

impl DeviceOp for Broken {
    fn plugin(&self) -> &'static str {
        "broken-plugin"
    }
    fn name(&self) -> &'static str {
        "broken_op"
    }
    fn kernel(&self) -> OpKernel {
        OpKernel {
            source: "#include \"compat.h\"\nextern \"C\" __global__ void broken(u32 items, float* x) { x[0] = undeclared_thing; }\n",
            entry: "broken",
            block: 32,
            defines: Vec::new(),
        }
    }
    fn check(&self, _items: usize, _lens: &[usize]) -> Result<()> {
        Ok(())
    }
    fn run_cpu(&self, _: usize, _: &mut HostArgs<'_>, _: &dyn HostPool) -> Result<()> {
        Err(DeviceError::shape("broken_op", "no CPU implementation"))
    }
}

#[test]
fn a_kernel_that_does_not_compile_names_the_plugin_the_op_and_the_log() {
    let Some(dev) = simt(32, Schedule::InOrder) else {
        return;
    };
    let mut x = dev.alloc::<f32>(4).unwrap();
    let e = dev
        .run_op(&Broken, 4, &mut [OpArg::F32Mut(&mut x)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("broken-plugin") && e.contains("broken_op"),
        "{e}"
    );
    assert!(
        e.contains("undeclared_thing"),
        "the compiler's log is missing: {e}"
    );
}

#[test]
fn wrong_argument_kinds_are_errors_not_panics() {
    let dev = CpuBackend::new(1);
    let c = case(4);
    let gt = gt(&dev, &c);
    let op = ops::PixelsOp {
        rows: ROWS,
        channels: C,
    };
    let rendered = dev.upload(&c.rendered).unwrap();
    let mut d = dev.alloc::<f32>(c.rendered.len()).unwrap();
    let mut rho = dev.alloc::<f32>(gt.pixels.len).unwrap();
    let e = dev
        .run_op(
            &op,
            gt.pixels.len,
            &mut [
                OpArg::F32(&rendered),
                OpArg::U32(&gt.mask),
                OpArg::F32(&gt.table),
                OpArg::F32Mut(&mut d),
                OpArg::F32Mut(&mut rho),
                OpArg::Scalar(Scalar::F32(1.0)), // should be the u32 channel count
                OpArg::Scalar(Scalar::F32(1.0)),
                OpArg::Scalar(Scalar::F32(0.2)),
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("argument 5") && e.contains("u32 value"), "{e}");
}
