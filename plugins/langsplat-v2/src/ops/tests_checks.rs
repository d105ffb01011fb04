//! `check` refuses every short buffer; wrong argument kinds, wrong size scalars and
//! bad index data are errors, not panics; the serial host pool agrees.

use lsplat_cpu::CpuBackend;
use lsplat_device::op::SerialPool;
use lsplat_device::{Backend, DeviceOp, HostArg, HostArgs, OpArg, Scalar};
use lsplat_gpu::simt::Schedule;

use super::tests_run::{DIM, N, ROWS, V, inputs, run_all, simt};
use super::*;
use crate::reference::{rel_err, wide};

/// Every per-item op with its items and the exact lengths of its arguments
/// (0: a scalar).
fn ops() -> Vec<(Box<dyn DeviceOp>, usize, Vec<usize>)> {
    let (rc, cc, cd) = (ROWS * CODES, CODES * CODES, CODES * DIM);
    let prep = PrepOp {
        rows: ROWS,
        dim: DIM,
    };
    let acc = AccOp {
        rows: ROWS,
        pixels: V,
    };
    let (n_c, n_k) = (N * CODES, N * TOP_K);
    let (prep_items, acc_items) = (prep.items(), acc.items());
    vec![
        (
            Box::new(TopKOp { gaussians: N }),
            N,
            vec![n_c, n_k, n_k, n_c],
        ),
        (
            Box::new(TopKBackwardOp { gaussians: N }),
            N,
            vec![n_k, n_k, n_c, n_c],
        ),
        (
            Box::new(prep),
            prep_items,
            vec![cd, ROWS * DIM, rc, cc, ROWS, 0],
        ),
        (
            Box::new(CosineOp {
                rows: ROWS,
                pixels: V,
            }),
            V,
            vec![V * CODES, V, rc, cc, ROWS, V * CODES, V, 2 * V, 0],
        ),
        (
            Box::new(acc),
            acc_items,
            vec![V * CODES, V, 2 * V, rc, cc, AccOp::part_len(ROWS), 1, 0, 0],
        ),
        (
            Box::new(CodebookGradOp {
                rows: ROWS,
                dim: DIM,
            }),
            cd,
            vec![rc, cc, ROWS * DIM, cd, cd, 0],
        ),
        (
            Box::new(VisBitsOp { gaussians: N }),
            vis_words(N),
            vec![N, vis_words(N), 0],
        ),
        (Box::new(VisOrOp { gaussians: N }), N, vec![vis_words(N), N]),
    ]
}

#[test]
fn check_refuses_every_short_buffer_wrong_items_and_wrong_arity() {
    for (op, items, lens) in ops() {
        let name = op.name();
        op.check(items, &lens)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for i in (0..lens.len()).filter(|&i| lens[i] > 0) {
            let mut short = lens.clone();
            short[i] -= 1;
            let e = op.check(items, &short).unwrap_err().to_string();
            assert!(e.starts_with(name) && e.contains("needs at least"), "{e}");
        }
        assert!(op.check(items + 1, &lens).is_err(), "{name}: items + 1");
        assert!(op.check(items - 1, &lens).is_err(), "{name}: items - 1");
        assert!(op.check(items, &lens[..lens.len() - 1]).is_err());
        let more: Vec<usize> = lens.iter().copied().chain([0]).collect();
        assert!(op.check(items, &more).is_err());
        // Longer buffers are accepted (per-pixel buffers sized for the largest camera).
        let long: Vec<usize> = lens
            .iter()
            .map(|&l| if l > 0 { l + 5 } else { 0 })
            .collect();
        op.check(items, &long).unwrap();
    }
    assert!(SumOp.check(SUM_THREADS - 1, &[1, 1, 0, 0, 0, 0]).is_err());
    assert!(SumOp.check(SUM_THREADS, &[1, 1, 0, 0, 0]).is_err());
}

/// A cosine call with `w` one pixel short, on `dev`: refused before anything runs.
fn short_w_is_refused<B: Backend>(dev: &B) {
    let inp = inputs(5);
    let w = dev.upload(&inp.w[..(V - 1) * CODES]).unwrap();
    let mask = dev.upload(&inp.mask).unwrap();
    let f = |n: usize| dev.alloc::<f32>(n).unwrap();
    let (bg, gram, gnorm) = (f(ROWS * CODES), f(CODES * CODES), f(ROWS));
    let (mut d_w, mut rho, mut coef) = (f(V * CODES), f(V), f(2 * V));
    let op = CosineOp {
        rows: ROWS,
        pixels: V,
    };
    let args = &mut [
        OpArg::F32(&w),
        OpArg::U32(&mask),
        OpArg::F32(&bg),
        OpArg::F32(&gram),
        OpArg::F32(&gnorm),
        OpArg::F32Mut(&mut d_w),
        OpArg::F32Mut(&mut rho),
        OpArg::F32Mut(&mut coef),
        OpArg::Scalar(Scalar::F32(1.0)),
    ];
    let e = dev.run_op(&op, V, args).unwrap_err().to_string();
    assert!(e.contains("lv2_cosine") && e.contains("w has"), "{e}");
    assert!(e.contains("plugin langsplat-v2"), "{e}");
    assert!(dev.download(&d_w).unwrap().iter().all(|&v| v == 0.0));
}

#[test]
fn a_short_buffer_is_refused_naming_the_op_and_the_plugin() {
    short_w_is_refused(&CpuBackend::new(1));
    if let Some(dev) = simt(32, Schedule::InOrder) {
        short_w_is_refused(&dev);
    }
}

/// The error of running `op` on the CPU backend with `args`.
fn cpu_err(op: &dyn DeviceOp, items: usize, args: &mut [OpArg<'_, CpuBackend>]) -> String {
    let dev = CpuBackend::new(1);
    dev.run_op(op, items, args).unwrap_err().to_string()
}

#[test]
fn wrong_argument_kinds_scalars_and_indices_are_errors_not_panics() {
    let dev = CpuBackend::new(1);
    let f = |n: usize| dev.alloc::<f32>(n).unwrap();
    let u = |v: Vec<u32>| dev.upload(&v).unwrap();
    let gauss = |n: usize| TopKOp { gaussians: n };
    // TopK: idx passed as floats.
    let (logits, mut a, mut b, mut c) = (f(N * CODES), f(N * TOP_K), f(N * TOP_K), f(N * CODES));
    let mut args = [
        OpArg::F32(&logits),
        OpArg::F32Mut(&mut a),
        OpArg::F32Mut(&mut b),
        OpArg::F32Mut(&mut c),
    ];
    let e = cpu_err(&gauss(N), N, &mut args);
    assert!(
        e.contains("argument 1") && e.contains("writable u32 buffer"),
        "{e}"
    );
    // TopKBackward: a code index ≥ CODES.
    let mut bad = vec![0u32; N * TOP_K];
    bad[7] = CODES as u32;
    let (idx, val, dd, mut dl) = (u(bad), f(N * TOP_K), f(N * CODES), f(N * CODES));
    let mut args = [
        OpArg::U32(&idx),
        OpArg::F32(&val),
        OpArg::F32(&dd),
        OpArg::F32Mut(&mut dl),
    ];
    let e = cpu_err(&TopKBackwardOp { gaussians: N }, N, &mut args);
    assert!(e.contains("idx[7] = 64"), "{e}");
    // Prep: dim as a float, then the wrong dim.
    let prep = PrepOp {
        rows: ROWS,
        dim: DIM,
    };
    let (cb, table) = (f(CODES * DIM), f(ROWS * DIM));
    let (mut bg, mut gram, mut gnorm) = (f(ROWS * CODES), f(CODES * CODES), f(ROWS));
    for (dim, want) in [
        (Scalar::F32(DIM as f32), "argument 5 should be a u32 value"),
        (Scalar::U32(DIM as u32 + 1), "dim = 49"),
    ] {
        let mut args = [
            OpArg::F32(&cb),
            OpArg::F32(&table),
            OpArg::F32Mut(&mut bg),
            OpArg::F32Mut(&mut gram),
            OpArg::F32Mut(&mut gnorm),
            OpArg::Scalar(dim),
        ];
        let e = cpu_err(&prep, prep.items(), &mut args);
        assert!(e.contains(want), "{e}");
    }
    // Cosine: grad_scale as a u32, then a mask row ≥ rows.
    let (w, mut d_w, mut rho, mut coef) = (f(V * CODES), f(V * CODES), f(V), f(2 * V));
    let mut rows = vec![0u32; V];
    rows[9] = ROWS as u32;
    let (good, bad) = (u(vec![0; V]), u(rows));
    let op = CosineOp {
        rows: ROWS,
        pixels: V,
    };
    for (mask, scale, want) in [
        (&good, Scalar::U32(1), "argument 8 should be a float value"),
        (&bad, Scalar::F32(1.0), "mask[9] = 7"),
    ] {
        let mut args = [
            OpArg::F32(&w),
            OpArg::U32(mask),
            OpArg::F32(&bg),
            OpArg::F32(&gram),
            OpArg::F32(&gnorm),
            OpArg::F32Mut(&mut d_w),
            OpArg::F32Mut(&mut rho),
            OpArg::F32Mut(&mut coef),
            OpArg::Scalar(scale),
        ];
        let e = cpu_err(&op, V, &mut args);
        assert!(e.contains(want), "{e}");
    }
    // Acc: the wrong pixel count; CodebookGrad: the wrong row count.
    let acc = AccOp {
        rows: ROWS,
        pixels: V,
    };
    let (mut us, mut ss) = (f(ROWS * CODES), f(CODES * CODES));
    let mut part = f(AccOp::part_len(ROWS));
    let mut count = u(vec![0]);
    let mut args = [
        OpArg::F32(&w),
        OpArg::U32(&good),
        OpArg::F32(&coef),
        OpArg::F32Mut(&mut us),
        OpArg::F32Mut(&mut ss),
        OpArg::F32Mut(&mut part),
        OpArg::U32Mut(&mut count),
        OpArg::Scalar(Scalar::U32(V as u32 - 1)),
        OpArg::Scalar(Scalar::U32(ROWS as u32)),
    ];
    let e = cpu_err(&acc, acc.items(), &mut args);
    assert!(e.contains("pixels = 499"), "{e}");
    let grad = CodebookGradOp {
        rows: ROWS,
        dim: DIM,
    };
    let mut dc = f(CODES * DIM);
    let mut args = [
        OpArg::F32(&us),
        OpArg::F32(&ss),
        OpArg::F32(&table),
        OpArg::F32(&cb),
        OpArg::F32Mut(&mut dc),
        OpArg::Scalar(Scalar::U32(ROWS as u32 + 1)),
    ];
    let e = cpu_err(&grad, CODES * DIM, &mut args);
    assert!(e.contains("rows = 8"), "{e}");
    // Sum: n past the end of rho.
    let mut loss = f(1);
    let mut args = [
        OpArg::F32(&rho),
        OpArg::F32Mut(&mut loss),
        OpArg::Scalar(Scalar::U32(V as u32 + 1)),
        OpArg::Scalar(Scalar::U32(0)),
        OpArg::Scalar(Scalar::F32(1.0)),
        OpArg::Scalar(Scalar::U32(0)),
    ];
    let e = cpu_err(&SumOp, SUM_THREADS, &mut args);
    assert!(e.contains("rho has 500 elements"), "{e}");
}

/// The serial pool (one block: what backends without a native path use) gives the
/// CPU backend's bits, except the blocked sums of AccOp (rounding only).
#[test]
fn serial_pool_agrees_with_the_cpu_backend() {
    let inp = inputs(6);
    let cpu = run_all(&CpuBackend::new(2), &inp);
    let (mut d_w, mut rho, mut coef) = (vec![0.0; V * CODES], vec![0.0; V], vec![0.0; 2 * V]);
    let args = vec![
        HostArg::F32(&inp.w),
        HostArg::U32(&inp.mask),
        HostArg::F32(&cpu.bg),
        HostArg::F32(&cpu.gram),
        HostArg::F32(&cpu.gnorm),
        HostArg::F32Mut(&mut d_w),
        HostArg::F32Mut(&mut rho),
        HostArg::F32Mut(&mut coef),
        HostArg::Scalar(Scalar::F32(inp.grad_scale)),
    ];
    let op = CosineOp {
        rows: ROWS,
        pixels: V,
    };
    op.run_cpu(V, &mut HostArgs::new(op.name(), args), &SerialPool)
        .unwrap();
    assert_eq!((&d_w, &rho, &coef), (&cpu.d_w, &cpu.rho, &cpu.coef));
    let (mut u, mut s) = (vec![0.0; ROWS * CODES], vec![0.0; CODES * CODES]);
    let (mut part, mut count) = (vec![0.0; AccOp::part_len(ROWS)], vec![0u32]);
    let args = vec![
        HostArg::F32(&inp.w),
        HostArg::U32(&inp.mask),
        HostArg::F32(&coef),
        HostArg::F32Mut(&mut u),
        HostArg::F32Mut(&mut s),
        HostArg::F32Mut(&mut part),
        HostArg::U32Mut(&mut count),
        HostArg::Scalar(Scalar::U32(V as u32)),
        HostArg::Scalar(Scalar::U32(ROWS as u32)),
    ];
    let acc = AccOp {
        rows: ROWS,
        pixels: V,
    };
    acc.run_cpu(
        acc.items(),
        &mut HostArgs::new(acc.name(), args),
        &SerialPool,
    )
    .unwrap();
    let e = rel_err(&u, &wide(&cpu.u)).max(rel_err(&s, &wide(&cpu.s)));
    assert!(e < 1e-6, "{e}");
}
