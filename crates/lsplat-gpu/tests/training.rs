//! 100 LangSplat-V1 training steps on the cached operator, GPU runtime vs CPU from the
//! same start: normalise → W·f → masked L1 → Wᵀ·dF → normalisation backward → Adam;
//! and two GPU runs are bitwise equal.

mod common;

use common::{compare, ground_truth, scene, seed, values};
use lsplat_core::Rng;
use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_cpu::CpuBackend;
use lsplat_device::{AdamParams, Backend, GroundTruth};
use lsplat_gpu::{GpuBackend, Runtime};

gpu_tests!(hundred_training_steps_match_cpu);

struct Run<B: Backend> {
    x: B::Buf<f32>,
    m: B::Buf<f32>,
    v: B::Buf<f32>,
    f: B::Buf<f32>,
    df: B::Buf<f32>,
    dx: B::Buf<f32>,
    out: B::Buf<f32>,
    dout: B::Buf<f32>,
    loss: B::Buf<f32>,
}

fn run<B: Backend>(
    dev: &B,
    s: &common::Scene,
    gt: &GroundTruth<B>,
    x0: &[f32],
    steps: u32,
) -> (Vec<f32>, Vec<f32>) {
    let c = gt.channels;
    let n = s.gaussians.len();
    let geom = dev.upload_geometry(&s.gaussians).unwrap();
    let (mut proj, mut bins) = (B::Projection::default(), B::Bins::default());
    dev.project(&geom, &s.camera, s.grid, &mut proj).unwrap();
    dev.bin_and_sort(&proj, s.grid, &mut bins).unwrap();
    let op = dev
        .build_operator(&proj, &bins, &gt.pixels, n, WeightPrecision::F32)
        .unwrap();
    let rows = gt.pixels.len;
    let mut r = Run::<B> {
        x: dev.upload(x0).unwrap(),
        m: dev.alloc(n * c).unwrap(),
        v: dev.alloc(n * c).unwrap(),
        f: dev.alloc(n * c).unwrap(),
        df: dev.alloc(n * c).unwrap(),
        dx: dev.alloc(n * c).unwrap(),
        out: dev.alloc(rows * c).unwrap(),
        dout: dev.alloc(rows * c).unwrap(),
        loss: dev.alloc(1).unwrap(),
    };
    let mut losses = Vec::new();
    for step in 1..=steps {
        dev.normalize(&r.x, c, &mut r.f).unwrap();
        dev.spmm(&op, &r.f, c, &mut r.out).unwrap();
        dev.pixel_loss(
            LossKind::MaskedL1,
            &r.out,
            gt,
            1.0,
            &mut r.dout,
            &mut r.loss,
            0,
            false,
        )
        .unwrap();
        dev.fill(&mut r.df, 0.0).unwrap();
        dev.spmm_t(&op, &r.dout, c, &mut r.df).unwrap();
        dev.normalize_backward(&r.x, &r.df, c, &mut r.dx).unwrap();
        let hp = AdamParams {
            lr: 0.0025,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-15,
            step,
            grad_scale: 1.0,
        };
        dev.adam_step(&mut r.x, &r.dx, &mut r.m, &mut r.v, &hp)
            .unwrap();
        if step % 10 == 0 {
            losses.push(dev.download(&r.loss).unwrap()[0]);
        }
    }
    (dev.download(&r.x).unwrap(), losses)
}

fn hundred_training_steps_match_cpu<R: Runtime>(gpu: &GpuBackend<R>) {
    let cpu = CpuBackend::new(1);
    let mut rng = Rng::new(seed());
    let s = scene(&mut rng, 2000, 160, 120, 16);
    let c = 3;
    let (gtc, gtg) = ground_truth(&mut rng, &cpu, gpu, s.grid, c);
    let x0: Vec<f32> = values(&mut rng, s.gaussians.len() * c)
        .iter()
        .map(|v| 0.1 * v)
        .collect();
    let (xc, lc) = run(&cpu, &s, &gtc, &x0, 100);
    let (xg, lg) = run(gpu, &s, &gtg, &x0, 100);
    let (xg2, lg2) = run(gpu, &s, &gtg, &x0, 100);
    assert!(
        xg.iter().zip(&xg2).all(|(a, b)| a.to_bits() == b.to_bits()) && lg == lg2,
        "two runs on the same device differ"
    );
    eprintln!("cpu losses {lc:?}\ngpu losses {lg:?}");
    assert!(lc.last() < lc.first(), "CPU did not train");
    compare("loss curve", &lg, &lc, 1e-6, 1e-3, 0);
    // The GPU projects in f32 and the CPU in f64, so a few operator weights differ in
    // their last bits; the L1 loss's sign gradient and Adam's normalisation amplify
    // that over 100 steps for Gaussians whose residual crosses zero. The loss curve
    // above agrees to 1e-3; here most features must agree closely, and the whole
    // field to a few per mille. Measured over 17 seeds (2026-11-27): 0–412 of 6 000
    // features beyond 1e-3 + 1e-2·|x| (seed 1795793922039711114: 412, which failed
    // the former n/20 allowance), relative L2 difference 0.0000–0.0117, largest
    // difference 0.026. A wrong step moves the field by tens of per cent.
    compare("trained features", &xg, &xc, 1e-3, 1e-2, xc.len() / 5);
    let dist: f64 = xg
        .iter()
        .zip(&xc)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let norm: f64 = xc.iter().map(|b| f64::from(*b).powi(2)).sum();
    let rel = (dist / norm).sqrt();
    eprintln!("trained features: relative L2 difference {rel:.4}");
    assert!(
        rel <= 0.03,
        "trained features differ by {rel:.4} (relative L2)"
    );
}
