//! Lazy Adam (`lv2_catch_up` + `lv2_adam_select` over the seen Gaussians) against the
//! dense step over every Gaussian, and simt against the CPU.

use lsplat_core::Rng;
use lsplat_cpu::CpuBackend;
use lsplat_device::{AdamParams, Backend, OpArg, Scalar};
use lsplat_gpu::simt::Schedule;

use super::tests_adam::adam_select;
use super::tests_run::{N, simt};
use super::*;

const STEPS: u32 = 12;

fn hp(step: u32) -> AdamParams {
    AdamParams {
        lr: 0.0025,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-15,
        step,
        grad_scale: 1.0,
    }
}

fn catch_up<B: Backend>(
    dev: &B,
    [logits, m, v]: [&mut B::Buf<f32>; 3],
    (idx, val): (&mut B::Buf<u32>, &mut B::Buf<f32>),
    vis: &B::Buf<f32>,
    last: &mut B::Buf<u32>,
    target: u32,
) {
    let h = hp(0);
    let h = Hyper {
        lr: h.lr,
        beta1: h.beta1,
        beta2: h.beta2,
        eps: h.eps,
    };
    let [a, b, c, d] = CatchUpOp::scalars(&h).map(|x| OpArg::Scalar(Scalar::F32(x)));
    let args = &mut [
        OpArg::F32Mut(logits),
        OpArg::F32Mut(m),
        OpArg::F32Mut(v),
        OpArg::U32Mut(idx),
        OpArg::F32Mut(val),
        OpArg::F32(vis),
        OpArg::U32Mut(last),
        OpArg::Scalar(Scalar::U32(target)),
        a,
        b,
        c,
        d,
    ];
    dev.run_op(&CatchUpOp { gaussians: N }, N, args).unwrap();
}

/// Per step, which Gaussians a camera sees (about half, some never, some always)
/// and the weight gradient of those it sees (zero elsewhere).
fn schedule(seed: u64) -> Vec<(Vec<f32>, Vec<f32>)> {
    let mut rng = Rng::new(seed);
    (0..STEPS)
        .map(|_| {
            let vis: Vec<f32> = (0..N)
                .map(|g| match g % 10 {
                    0 => 0.0,
                    1 => 0.7,
                    _ if rng.f32() < 0.5 => 0.0,
                    _ => 0.1 + rng.f32(),
                })
                .collect();
            let d_val = (0..N * TOP_K)
                .map(|i| {
                    if vis[i / TOP_K] == 0.0 {
                        0.0
                    } else {
                        rng.normal()
                    }
                })
                .collect();
            (vis, d_val)
        })
        .collect()
}

struct Run {
    logits: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    idx: Vec<u32>,
    val: Vec<f32>,
    /// Per step, the selection of the seen Gaussians when the step composites.
    seen: Vec<Vec<(u32, f32)>>,
    /// `last` before the final catch-up.
    last: Vec<u32>,
}

/// `STEPS` steps from a seeded state; `lazy` skips the unseen Gaussians and catches
/// them up, the dense run steps every Gaussian (the unseen with a zero gradient).
fn run<B: Backend>(dev: &B, sched: &[(Vec<f32>, Vec<f32>)], lazy: bool) -> Run {
    let mut rng = Rng::new(5);
    let logits: Vec<f32> = (0..N * CODES).map(|_| 0.05 * rng.normal()).collect();
    let mut logits = dev.upload(&logits).unwrap();
    let m: Vec<f32> = (0..N * CODES).map(|_| 1e-3 * rng.normal()).collect();
    let v: Vec<f32> = (0..N * CODES).map(|_| 1e-6 * rng.f32()).collect();
    let (mut m, mut v) = (dev.upload(&m).unwrap(), dev.upload(&v).unwrap());
    let (mut idx, mut val) = (dev.alloc(N * TOP_K).unwrap(), dev.alloc(N * TOP_K).unwrap());
    let mut dense = dev.alloc(N * CODES).unwrap();
    let args = &mut [
        OpArg::F32(&logits),
        OpArg::U32Mut(&mut idx),
        OpArg::F32Mut(&mut val),
        OpArg::F32Mut(&mut dense),
    ];
    dev.run_op(&TopKOp { gaussians: N }, N, args).unwrap();
    let mut last = dev.alloc::<u32>(N).unwrap();
    let all = dev.upload(&vec![1.0f32; N]).unwrap();
    let mut seen = Vec::new();
    for (t, (vis, d_val)) in (1..=STEPS).zip(sched) {
        let vis = dev.upload(vis).unwrap();
        let d_val = dev.upload(d_val).unwrap();
        let p = [&mut logits, &mut m, &mut v];
        if lazy {
            catch_up(dev, p, (&mut idx, &mut val), &vis, &mut last, t - 1);
        }
        let (i, w) = (dev.download(&idx).unwrap(), dev.download(&val).unwrap());
        let mask = dev.download(&vis).unwrap();
        seen.push(
            (0..N * TOP_K)
                .filter(|&e| mask[e / TOP_K] != 0.0)
                .map(|e| (i[e], w[e]))
                .collect(),
        );
        let step_vis = if lazy { &vis } else { &all };
        let p = [&mut logits, &mut m, &mut v];
        adam_select(
            dev,
            p,
            (&mut idx, &mut val),
            &d_val,
            step_vis,
            &mut last,
            &hp(t),
        );
    }
    let before = dev.download(&last).unwrap();
    let p = [&mut logits, &mut m, &mut v];
    catch_up(dev, p, (&mut idx, &mut val), &all, &mut last, STEPS);
    assert_eq!(dev.download(&last).unwrap(), vec![STEPS; N]);
    let get = |x: &B::Buf<f32>| dev.download(x).unwrap();
    Run {
        logits: get(&logits),
        m: get(&m),
        v: get(&v),
        idx: dev.download(&idx).unwrap(),
        val: get(&val),
        seen,
        last: before,
    }
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn assert_same(got: &Run, want: &Run, what: &str) {
    assert_eq!(bits(&got.logits), bits(&want.logits), "{what}: logits");
    assert_eq!(bits(&got.m), bits(&want.m), "{what}: m");
    assert_eq!(bits(&got.v), bits(&want.v), "{what}: v");
    assert_eq!(got.idx, want.idx, "{what}: idx");
    assert_eq!(bits(&got.val), bits(&want.val), "{what}: val");
    for (t, (g, w)) in got.seen.iter().zip(&want.seen).enumerate() {
        assert!(
            g == w,
            "{what}: step {}: the seen Gaussians' selection",
            t + 1
        );
    }
}

#[test]
fn pow_int_equals_powi() {
    for beta in [0.9f64, 0.999, 0.5, 0.99999, 0.9f32 as f64, 0.999f32 as f64] {
        for t in 1..=200_000u32 {
            let (a, b) = (pow_int(beta, t), beta.powi(t as i32));
            assert_eq!(a.to_bits(), b.to_bits(), "β = {beta}, t = {t}");
        }
    }
}

#[test]
fn lazy_adam_equals_dense_adam_bitwise() {
    let cpu = CpuBackend::new(2);
    let sched = schedule(21);
    let dense = run(&cpu, &sched, false);
    let lazy = run(&cpu, &sched, true);
    assert_same(&lazy, &dense, "lazy vs dense");
    // The lazy run did skip: Gaussians never seen stayed at step 0 until the end, and
    // the replay moved them (momentum), so a replay that drops or reorders steps fails.
    assert!(lazy.last.iter().step_by(10).all(|&l| l == 0));
    assert!(lazy.last.iter().skip(1).step_by(10).all(|&l| l == STEPS));
    assert!(lazy.last.iter().any(|&l| l > 0 && l < STEPS));
    assert_eq!(dense.last, vec![STEPS; N]);
}

#[test]
fn lazy_adam_on_simt_equals_cpu_bitwise_at_both_warp_sizes() {
    let sched = schedule(22);
    let cpu = run(&CpuBackend::new(2), &sched, true);
    for (warp, schedule) in [(32, Schedule::InOrder), (64, Schedule::Random)] {
        let Some(dev) = simt(warp, schedule) else {
            continue;
        };
        let got = run(&dev, &sched, true);
        assert_same(&got, &cpu, &format!("simt warp {warp}"));
        assert_eq!(got.last, cpu.last, "warp {warp}: last");
    }
    #[cfg(feature = "cuda")]
    if let Some(dev) = super::tests_run::cuda() {
        let got = run(&dev, &sched, true);
        assert_same(&got, &cpu, "cuda");
        assert_eq!(got.last, cpu.last, "cuda: last");
    }
}

#[test]
fn catch_up_refuses_short_buffers() {
    let cpu = CpuBackend::new(1);
    let mut bufs: Vec<_> = (0..3)
        .map(|_| cpu.alloc::<f32>(N * CODES).unwrap())
        .collect();
    let (mut idx, mut val) = (cpu.alloc(N * TOP_K).unwrap(), cpu.alloc(N * TOP_K).unwrap());
    let vis = cpu.alloc(N).unwrap();
    let mut last = cpu.alloc::<u32>(N - 1).unwrap();
    let [l, m, v] = &mut bufs[..] else {
        unreachable!()
    };
    let f = || OpArg::Scalar(Scalar::F32(0.5));
    let e = cpu
        .run_op(
            &CatchUpOp { gaussians: N },
            N,
            &mut [
                OpArg::F32Mut(l),
                OpArg::F32Mut(m),
                OpArg::F32Mut(v),
                OpArg::U32Mut(&mut idx),
                OpArg::F32Mut(&mut val),
                OpArg::F32(&vis),
                OpArg::U32Mut(&mut last),
                OpArg::Scalar(Scalar::U32(3)),
                f(),
                f(),
                f(),
                f(),
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("lv2_catch_up") && e.contains("last"), "{e}");
}

#[test]
fn replay_constants_equal_each_steps_own() {
    let h = Hyper {
        lr: 0.0025,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-15,
    };
    for target in [1u32, 5, 63, 64, 65, 200, 10_000] {
        let c = Constants::new(h, target);
        for t in 1..=target {
            let want = StepConstants::at(h.lr, h.beta1, h.beta2, h.eps, t);
            assert_eq!(c.at(t), want, "target {target}, step {t}");
        }
    }
    // A step's constants are the engine Adam's (`StepConstants::new`, from powi).
    let hp = hp(777);
    let k = StepConstants::new(&hp);
    assert_eq!(Constants::new(h, 800).at(777), k);
    assert_eq!(Constants::new(h, 7000).at(777), k);
}
