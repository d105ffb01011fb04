//! The fused logit step (`lv2_adam_select`) against the three passes it replaces —
//! top-k backward, the engine's Adam, top-k selection — and simt against the CPU.

use lsplat_core::Rng;
use lsplat_cpu::CpuBackend;
use lsplat_device::{AdamParams, Backend, OpArg};
use lsplat_gpu::simt::Schedule;

use super::tests_run::{N, simt};
use super::*;

/// Logits (ties and NaN-free), Adam moments from earlier steps, a selection, d_val.
struct State {
    logits: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    d_val: Vec<f32>,
    d_dense: Vec<f32>,
}

fn state(seed: u64) -> State {
    let mut rng = Rng::new(seed);
    let mut logits: Vec<f32> = (0..N * CODES).map(|_| 0.05 * rng.normal()).collect();
    logits[..CODES].fill(0.01);
    State {
        logits,
        m: (0..N * CODES).map(|_| 1e-3 * rng.normal()).collect(),
        v: (0..N * CODES).map(|_| 1e-6 * rng.f32()).collect(),
        d_val: (0..N * TOP_K).map(|_| rng.normal()).collect(),
        d_dense: (0..N * CODES).map(|_| rng.normal()).collect(),
    }
}

const HP: AdamParams = AdamParams {
    lr: 0.0025,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-15,
    step: 7,
    grad_scale: 1.0,
};

fn topk<B: Backend>(dev: &B, logits: &B::Buf<f32>) -> (B::Buf<u32>, B::Buf<f32>, B::Buf<f32>) {
    let (mut idx, mut val) = (
        dev.alloc::<u32>(N * TOP_K).unwrap(),
        dev.alloc::<f32>(N * TOP_K).unwrap(),
    );
    let mut dense = dev.alloc(N * CODES).unwrap();
    let args = &mut [
        OpArg::F32(logits),
        OpArg::U32Mut(&mut idx),
        OpArg::F32Mut(&mut val),
        OpArg::F32Mut(&mut dense),
    ];
    dev.run_op(&TopKOp { gaussians: N }, N, args).unwrap();
    (idx, val, dense)
}

/// logits, m, v, idx, val after the fused pass; the selection comes from `topk`.
/// logits, m, v, idx, val after the fused step.
type Fused = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<u32>, Vec<f32>);

fn fused<B: Backend>(dev: &B, s: &State) -> Fused {
    let mut logits = dev.upload(&s.logits).unwrap();
    let (mut idx, mut val, _) = topk(dev, &logits);
    let (mut m, mut v) = (dev.upload(&s.m).unwrap(), dev.upload(&s.v).unwrap());
    let d_val = dev.upload(&s.d_val).unwrap();
    let vis = dev.upload(&vec![1.0f32; N]).unwrap();
    let mut last = dev.alloc(N).unwrap();
    adam_select(
        dev,
        [&mut logits, &mut m, &mut v],
        (&mut idx, &mut val),
        &d_val,
        &vis,
        &mut last,
        &HP,
    );
    assert_eq!(dev.download(&last).unwrap(), vec![HP.step; N]);
    let get = |x: &B::Buf<f32>| dev.download(x).unwrap();
    let idx = dev.download(&idx).unwrap();
    (get(&logits), get(&m), get(&v), idx, get(&val))
}

/// One [`AdamSelectOp`] pass at step `hp.step`.
pub(super) fn adam_select<B: Backend>(
    dev: &B,
    [logits, m, v]: [&mut B::Buf<f32>; 3],
    (idx, val): (&mut B::Buf<u32>, &mut B::Buf<f32>),
    d_val: &B::Buf<f32>,
    vis: &B::Buf<f32>,
    last: &mut B::Buf<u32>,
    hp: &AdamParams,
) {
    let bufs = AdamSelectBufs {
        logits,
        m,
        v,
        idx,
        val,
        d_val,
        vis,
        last,
    };
    AdamSelectOp { gaussians: N }
        .run(dev, bufs, hp.step, &StepConstants::new(hp))
        .unwrap();
}

#[test]
fn fused_step_equals_backward_adam_and_selection_bitwise() {
    let cpu = CpuBackend::new(2);
    let s = state(11);
    let got = fused(&cpu, &s);
    // The three passes: d_val scattered to a dense d_dense at the selection, the
    // top-k backward, the engine's Adam, a fresh selection.
    let mut logits = cpu.upload(&s.logits).unwrap();
    let (idx, val, _) = topk(&cpu, &logits);
    let sel = cpu.download(&idx).unwrap();
    let mut d_dense = vec![0.0f32; N * CODES];
    for (g, (ri, rd)) in sel.chunks(TOP_K).zip(s.d_val.chunks(TOP_K)).enumerate() {
        for (&c, &d) in ri.iter().zip(rd) {
            d_dense[g * CODES + c as usize] = d;
        }
    }
    let d_dense = cpu.upload(&d_dense).unwrap();
    let mut d_logits = cpu.alloc(N * CODES).unwrap();
    let args = &mut [
        OpArg::U32(&idx),
        OpArg::F32(&val),
        OpArg::F32(&d_dense),
        OpArg::F32Mut(&mut d_logits),
    ];
    cpu.run_op(&TopKBackwardOp { gaussians: N }, N, args)
        .unwrap();
    let (mut m, mut v) = (cpu.upload(&s.m).unwrap(), cpu.upload(&s.v).unwrap());
    cpu.adam_step(&mut logits, &d_logits, &mut m, &mut v, &HP)
        .unwrap();
    let (idx2, val2, _) = topk(&cpu, &logits);
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&got.0),
        bits(&cpu.download(&logits).unwrap()),
        "logits"
    );
    assert_eq!(bits(&got.1), bits(&cpu.download(&m).unwrap()), "m");
    assert_eq!(bits(&got.2), bits(&cpu.download(&v).unwrap()), "v");
    assert_eq!(got.3, cpu.download(&idx2).unwrap(), "idx");
    assert_eq!(bits(&got.4), bits(&cpu.download(&val2).unwrap()), "val");
    // The step moved every logit (momentum) and changed some selections.
    assert!(got.0.iter().zip(&s.logits).all(|(a, b)| a != b));
    assert_ne!(
        got.3, sel,
        "no selection changed: the test would not see stale idx"
    );
}

#[test]
fn gather_add_adds_the_dense_gradient_at_the_selection() {
    let cpu = CpuBackend::new(2);
    let s = state(12);
    let logits = cpu.upload(&s.logits).unwrap();
    let (idx, _, _) = topk(&cpu, &logits);
    let mut d_val = cpu.upload(&s.d_val).unwrap();
    let d_dense = cpu.upload(&s.d_dense).unwrap();
    let args = &mut [
        OpArg::U32(&idx),
        OpArg::F32(&d_dense),
        OpArg::F32Mut(&mut d_val),
    ];
    cpu.run_op(&GatherAddOp { gaussians: N }, N, args).unwrap();
    let (sel, got) = (cpu.download(&idx).unwrap(), cpu.download(&d_val).unwrap());
    for g in 0..N {
        for j in 0..TOP_K {
            let want = s.d_val[g * TOP_K + j] + s.d_dense[g * CODES + sel[g * TOP_K + j] as usize];
            assert_eq!(got[g * TOP_K + j], want, "gaussian {g}, slot {j}");
        }
    }
}

#[test]
fn fused_step_on_simt_equals_cpu_bitwise_at_both_warp_sizes() {
    let mut s = state(13);
    // Row 1: runs of equal logits and NaNs, which rank below every number (the device
    // selection is a group argmax and must break ties and place NaNs as the CPU does).
    for (c, l) in s.logits[CODES..2 * CODES].iter_mut().enumerate() {
        *l = match c % 5 {
            0 => f32::NAN,
            1 | 2 => 0.02,
            _ => -0.01 * (c / 5) as f32,
        };
    }
    // Without moments, the logits off the selection stay tied through the step.
    s.m[..2 * CODES].fill(0.0);
    s.v[..2 * CODES].fill(0.0);
    let cpu = fused(&CpuBackend::new(2), &s);
    for (warp, schedule) in [(32, Schedule::InOrder), (64, Schedule::Random)] {
        let Some(dev) = simt(warp, schedule) else {
            continue;
        };
        fused_matches(&dev, &s, &cpu, &format!("simt warp {warp}"));
    }
    #[cfg(feature = "cuda")]
    if let Some(dev) = super::tests_run::cuda() {
        fused_matches(&dev, &s, &cpu, "cuda");
    }
}

/// The fused step on `dev` equals the CPU's outputs `cpu` bit for bit (every NaN
/// counts as one: a GPU's arithmetic returns its canonical NaN, x86 the input's).
fn fused_matches<B: Backend>(dev: &B, s: &State, cpu: &Fused, label: &str) {
    let got = fused(dev, s);
    let bits = |x: &[f32]| {
        x.iter()
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect::<Vec<_>>()
    };
    assert_eq!(got.3, cpu.3, "{label}: idx");
    for (name, g, c) in [
        ("logits", &got.0, &cpu.0),
        ("m", &got.1, &cpu.1),
        ("v", &got.2, &cpu.2),
        ("val", &got.4, &cpu.4),
    ] {
        assert_eq!(bits(g), bits(c), "{label}: {name}");
    }
}

#[test]
fn fused_step_refuses_bad_selections_and_short_buffers() {
    let cpu = CpuBackend::new(1);
    let s = state(14);
    let mut logits = cpu.upload(&s.logits).unwrap();
    let (mut m, mut v) = (cpu.upload(&s.m).unwrap(), cpu.upload(&s.v).unwrap());
    let mut idx = cpu.upload(&vec![CODES as u32; N * TOP_K]).unwrap();
    let mut val = cpu.alloc(N * TOP_K).unwrap();
    let vis = cpu.upload(&vec![1.0f32; N]).unwrap();
    let mut last = cpu.alloc::<u32>(N).unwrap();
    let k = StepConstants::new(&HP);
    let mut refusal = |d_val: &Vec<f32>| {
        let bufs = AdamSelectBufs {
            logits: &mut logits,
            m: &mut m,
            v: &mut v,
            idx: &mut idx,
            val: &mut val,
            d_val,
            vis: &vis,
            last: &mut last,
        };
        let op = AdamSelectOp { gaussians: N };
        op.run(&cpu, bufs, 1, &k).unwrap_err().to_string()
    };
    let e = refusal(&cpu.alloc(N * TOP_K - 1).unwrap());
    assert!(e.contains("lv2_adam_select") && e.contains("d_val"), "{e}");
    let e = refusal(&cpu.alloc(N * TOP_K).unwrap());
    assert!(e.contains("idx") && e.contains("not below"), "{e}");
    assert_eq!(cpu.download(&logits).unwrap(), s.logits, "nothing written");
}
