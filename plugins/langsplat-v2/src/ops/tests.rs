//! The ops against the crate's host math and float64, and simt (warp 32 and 64)
//! against the CPU backend.

use lsplat_core::Rng;
use lsplat_cpu::CpuBackend;
use lsplat_gpu::simt::Schedule;

use super::tests_run::{DIM, Inputs, N, Outputs, ROWS, V, ZERO_ROW, inputs, run_all, simt};
use super::*;
use crate::reference::{rel_err, wide};
use crate::{
    CodebookAcc, codebook_gradient, cosine_pixels, gather_sparse, prepare, scatter_dense,
    topk_backward, topk_forward,
};

/// Checks `got` against the crate's host functions and float64; returns the worst
/// relative error (each ≤ 1e-5).
fn check_host(inp: &Inputs, got: &Outputs) -> f64 {
    let mut report = Vec::new();
    let mut near = |what: &'static str, g: &[f32], want: &[f64]| {
        let e = rel_err(g, want);
        assert!(e <= 1e-5, "{what}: rel err {e:.2e}");
        report.push((what, e));
    };
    let (mut idx, mut val, mut dense) = (
        vec![0; N * TOP_K],
        vec![0.0; N * TOP_K],
        vec![0.0; N * CODES],
    );
    topk_forward(&inp.logits, CODES, TOP_K, &mut idx, &mut val).unwrap();
    scatter_dense(&idx, &val, CODES, TOP_K, &mut dense).unwrap();
    assert_eq!(got.idx, idx);
    assert_eq!(
        &got.idx[..10],
        [0, 1, 2, 3, 1, 2, 3, 4, 10, 20],
        "ties, NaN"
    );
    near("val", &got.val, &wide(&val));
    near("dense", &got.dense, &wide(&dense));
    let mut d_val = vec![0.0; N * TOP_K];
    gather_sparse(&inp.d_dense, &idx, CODES, TOP_K, &mut d_val).unwrap();
    let mut d_logits = vec![0.0; N * CODES];
    topk_backward(N, CODES, TOP_K, &idx, &val, &d_val, &mut d_logits).unwrap();
    near("d_logits", &got.d_logits, &wide(&d_logits));

    let prep = prepare(&inp.codebook, CODES, DIM, &inp.table, ROWS).unwrap();
    near("bg", &got.bg, &wide(&prep.bg));
    near("gram", &got.gram, &wide(&prep.gram));
    near("gnorm", &got.gnorm, &wide(&prep.gnorm));
    let (mut acc, mut d_w) = (CodebookAcc::new(ROWS, CODES), vec![0.0; V * CODES]);
    let gs = inp.grad_scale;
    let (w, mask) = (&inp.w, &inp.mask);
    let loss = cosine_pixels(&prep, CODES, w, mask, 0..V, gs, 1.0, &mut d_w, &mut acc).unwrap();
    near("d_w", &got.d_w, &wide(&d_w));
    near("loss", &got.loss, &[loss, 2.0 * loss]);
    near("u vs cosine_pixels", &got.u, &wide(&acc.u));
    near("s vs cosine_pixels", &got.s, &wide(&acc.s));
    let mut d_b = inp.d_codebook.clone();
    codebook_gradient(&acc, &inp.codebook, &inp.table, ROWS, CODES, DIM, &mut d_b).unwrap();
    near("d_codebook", &got.d_codebook, &wide(&d_b));

    // rho = 1 − cos(Bᵀw, g) with F materialised in f64; u, s from the op's coef.
    let (b, t) = (wide(&inp.codebook), wide(&inp.table));
    let (mut rho, mut u, mut s) = (
        vec![0.0; V],
        vec![0.0; ROWS * CODES],
        vec![0.0; CODES * CODES],
    );
    for (p, rho_p) in rho.iter_mut().enumerate() {
        let (wp, r) = (&inp.w[p * CODES..][..CODES], inp.mask[p] as usize);
        let f: Vec<f64> = (0..DIM)
            .map(|j| (0..CODES).map(|c| f64::from(wp[c]) * b[c * DIM + j]).sum())
            .collect();
        let g = &t[r * DIM..][..DIM];
        let nf: f64 = f.iter().map(|x| x * x).sum();
        let ng: f64 = g.iter().map(|x| x * x).sum();
        let dot: f64 = f.iter().zip(g).map(|(x, y)| x * y).sum();
        *rho_p = if nf == 0.0 || ng == 0.0 {
            1.0
        } else {
            1.0 - dot / (nf * ng).sqrt()
        };
        let (c1, c2) = (f64::from(got.coef[2 * p]), f64::from(got.coef[2 * p + 1]));
        for k in 0..CODES {
            u[r * CODES + k] += c1 * f64::from(wp[k]);
            for m in 0..CODES {
                s[k * CODES + m] += c2 * f64::from(wp[k]) * f64::from(wp[m]);
            }
        }
    }
    let e = got
        .rho
        .iter()
        .zip(&rho)
        .map(|(&a, b)| (f64::from(a) - b).abs());
    let e = e.fold(0.0, f64::max);
    assert!(e < 1e-5, "rho: abs err {e:.2e}");
    near("u vs f64", &got.u, &u);
    near("s vs f64", &got.s, &s);
    let text: Vec<String> = report.iter().map(|(n, e)| format!("{n} {e:.1e}")).collect();
    eprintln!("rho vs f64 abs {e:.1e}, {}", text.join(", "));
    for p in (0..V).filter(|p| p % 23 == 7 || inp.mask[*p] as usize == ZERO_ROW) {
        assert_eq!(got.rho[p], 1.0);
        assert_eq!(&got.coef[2 * p..2 * p + 2], [0.0, 0.0]);
        assert!(got.d_w[p * CODES..][..CODES].iter().all(|&v| v == 0.0));
    }
    report.iter().fold(e, |m, r| m.max(r.1))
}

/// `inp` with w "rendered" from the TopK op's dense rows: each pixel blends the
/// coefficients of three random Gaussians (every 23rd pixel none).
fn rendered_from_topk(inp: Inputs, dense: &[f32], seed: u64) -> Inputs {
    let mut rng = Rng::new(seed);
    let mut w = vec![0.0f32; V * CODES];
    for p in (0..V).filter(|p| p % 23 != 7) {
        for _ in 0..3 {
            let (g, alpha) = (rng.below(N as u64) as usize, 0.6 * rng.f32());
            for (o, &d) in w[p * CODES..][..CODES].iter_mut().zip(&dense[g * CODES..]) {
                *o += alpha * d;
            }
        }
    }
    Inputs { w, ..inp }
}

#[test]
fn cpu_ops_match_host_math_and_float64() {
    let inp = inputs(1);
    let got = run_all(&CpuBackend::new(2), &inp);
    let worst = check_host(&inp, &got);
    eprintln!("cpu vs host math / f64: worst rel err {worst:.2e}");
    assert_eq!(run_all(&CpuBackend::new(2), &inp), got, "cpu run to run");
}

/// TopK → (w rendered from its dense rows) → Cosine → Acc → CodebookGrad equals
/// `codebook_gradient` of `cosine_pixels`' accumulator.
#[test]
fn chained_ops_match_host_codebook_gradient() {
    let cpu = CpuBackend::new(2);
    let inp = inputs(2);
    let first = run_all(&cpu, &inp);
    let inp = rendered_from_topk(inp, &first.dense, 3);
    let got = run_all(&cpu, &inp);
    let worst = check_host(&inp, &got);
    eprintln!("chained cpu vs host math: worst rel err {worst:.2e}");
}

#[test]
fn simt_matches_cpu_at_both_warp_sizes_and_is_reproducible() {
    let inp = inputs(4);
    let inp = rendered_from_topk(inp, &run_all(&CpuBackend::new(2), &inputs(4)).dense, 5);
    let cpu = run_all(&CpuBackend::new(2), &inp);
    for (warp, schedule) in [(32, Schedule::InOrder), (64, Schedule::Random)] {
        let Some(dev) = simt(warp, schedule) else {
            continue;
        };
        device_matches_cpu(&dev, &inp, &cpu, &format!("simt warp {warp}"));
    }
    #[cfg(feature = "cuda")]
    if let Some(dev) = super::tests_run::cuda() {
        device_matches_cpu(&dev, &inp, &cpu, "cuda");
    }
}

/// Every op on `dev` against the CPU's outputs `cpu` (same indices, floats within 1e-5,
/// bitwise where the report says `=`), and run to run bitwise.
fn device_matches_cpu<B: lsplat_device::Backend>(
    dev: &B,
    inp: &Inputs,
    cpu: &Outputs,
    label: &str,
) {
    let got = run_all(dev, inp);
    assert_eq!(got.idx, cpu.idx, "{label}: idx");
    let mut report = Vec::new();
    for ((name, g), (_, c)) in got.floats().into_iter().zip(cpu.floats()) {
        let e = rel_err(g, &wide(c));
        assert!(e <= 1e-5, "{label}: {name} differs by {e:.2e}");
        let same = g.iter().zip(c).all(|(a, b)| a.to_bits() == b.to_bits());
        report.push(format!(
            "{name} {}",
            if same { "=".into() } else { format!("{e:.1e}") }
        ));
    }
    eprintln!("{label} vs cpu: {}", report.join(", "));
    let again = run_all(dev, inp);
    assert_eq!(again.idx, got.idx);
    assert_eq!(again.bits(), got.bits(), "{label}: run to run");
    check_host(inp, &got);
}
