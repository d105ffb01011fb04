//! Sparse coefficients: top-k softmax, renormalised (`softmax_to_topk_soft_code`).
//!
//! LangSplatV2 takes p = softmax(l) over each Gaussian's `codes` logits, keeps the k
//! largest entries and renormalises: w = p_S / (Σ p_S + 1e-10). Since
//! p_i / Σ_S p_j = e^{l_i} / Σ_S e^{l_j}, this is exactly a softmax over the k
//! selected logits, which is what [`topk_forward`] computes (the 1e-10 is dropped).
//! Consequently the exact gradient reaches only the k selected logits
//! ([`topk_backward`]); the original, backpropagating through the full softmax,
//! leaks rounding noise into the others.
//!
//! Selection order: larger logit first; ties go to the lower index; NaN ranks below
//! every number (including −∞). Non-finite logits never panic, but a selected NaN or
//! infinite logit makes that row's weights non-finite.

use crate::check::{expect_len, indices_below, positive, product, rows_of};
use crate::error::{Error, Result};

pub use crate::sparse::{gather_sparse, scatter_dense};

/// Whether logit `a` ranks strictly above `b` (NaN ranks lowest).
fn ranks_above(a: f32, b: f32) -> bool {
    !a.is_nan() && (b.is_nan() || a > b)
}

/// Checks `1 ≤ k ≤ codes` and that code indices fit `u32`.
fn check_k(codes: usize, k: usize) -> Result<()> {
    positive("codes", codes)?;
    positive("k", k)?;
    if k > codes {
        return Err(Error::Param {
            what: "k",
            reason: "must not exceed codes",
        });
    }
    if u32::try_from(codes - 1).is_err() {
        return Err(Error::Param {
            what: "codes",
            reason: "code indices must fit u32",
        });
    }
    Ok(())
}

/// Top-k softmax of each row of `logits` (`[n, codes]`).
///
/// Writes `idx` (`[n, k]`, the chosen codes in descending logit order) and `val`
/// (`[n, k]`, the softmax over just those k logits, computed with the row maximum
/// subtracted and summed in f64).
pub fn topk_forward(
    logits: &[f32],
    codes: usize,
    k: usize,
    idx: &mut [u32],
    val: &mut [f32],
) -> Result<()> {
    check_k(codes, k)?;
    let n = rows_of("logits", logits.len(), codes)?;
    let nk = product("idx", n, k)?;
    expect_len("idx", nk, idx.len())?;
    expect_len("val", nk, val.len())?;
    let mut sel: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    let rows = logits.chunks_exact(codes);
    for ((row, ri), rv) in rows
        .zip(idx.chunks_exact_mut(k))
        .zip(val.chunks_exact_mut(k))
    {
        sel.clear();
        for (c, &l) in (0u32..).zip(row) {
            if sel.len() == k && !ranks_above(l, sel[k - 1].1) {
                continue;
            }
            let pos = sel
                .iter()
                .position(|&(_, v)| ranks_above(l, v))
                .unwrap_or(sel.len());
            sel.insert(pos, (c, l));
            sel.truncate(k);
        }
        let m = f64::from(sel[0].1);
        let mut sum = 0.0f64;
        for &(_, l) in &sel {
            sum += (f64::from(l) - m).exp();
        }
        for ((oi, ov), &(c, l)) in ri.iter_mut().zip(rv.iter_mut()).zip(&sel) {
            *oi = c;
            *ov = ((f64::from(l) - m).exp() / sum) as f32;
        }
    }
    Ok(())
}

/// Exact gradient of [`topk_forward`]: overwrites `d_logits` (`[rows, codes]`) with
/// zeros except at the selected entries, where dl_i = w_i (dw_i − Σ_j w_j dw_j), the
/// sum running over the row's selected j. `idx`, `val`, `d_val` are `[rows, k]`.
pub fn topk_backward(
    rows: usize,
    codes: usize,
    k: usize,
    idx: &[u32],
    val: &[f32],
    d_val: &[f32],
    d_logits: &mut [f32],
) -> Result<()> {
    check_k(codes, k)?;
    let nk = product("idx", rows, k)?;
    expect_len("idx", nk, idx.len())?;
    expect_len("val", nk, val.len())?;
    expect_len("d_val", nk, d_val.len())?;
    expect_len(
        "d_logits",
        product("d_logits", rows, codes)?,
        d_logits.len(),
    )?;
    indices_below("idx", idx, codes)?;
    d_logits.fill(0.0);
    let sparse = idx.chunks_exact(k).zip(val.chunks_exact(k));
    for ((ri, rv), (rd, out)) in
        sparse.zip(d_val.chunks_exact(k).zip(d_logits.chunks_exact_mut(codes)))
    {
        let dot: f64 = rv
            .iter()
            .zip(rd)
            .map(|(&w, &d)| f64::from(w) * f64::from(d))
            .sum();
        for ((&c, &w), &d) in ri.iter().zip(rv).zip(rd) {
            out[c as usize] += (f64::from(w) * (f64::from(d) - dot)) as f32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    /// Random logits whose values are pairwise at least 0.3 apart.
    fn spread_logits(rng: &mut Rng, n: usize, codes: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n * codes);
        for _ in 0..n {
            let mut perm: Vec<usize> = (0..codes).collect();
            rng.shuffle(&mut perm);
            out.extend(perm.iter().map(|&p| 0.4 * p as f32 - 3.0 + 0.1 * rng.f32()));
        }
        out
    }

    fn forward(logits: &[f32], codes: usize, k: usize) -> (Vec<u32>, Vec<f32>) {
        let n = logits.len() / codes;
        let (mut idx, mut val) = (vec![0; n * k], vec![0.0; n * k]);
        topk_forward(logits, codes, k, &mut idx, &mut val).unwrap();
        (idx, val)
    }

    #[test]
    fn forward_is_softmax_over_the_k_largest() {
        let logits = [0.5, 3.0, -1.0, 2.0, 1.0, 2.5];
        let (idx, val) = forward(&logits, 6, 3);
        assert_eq!(idx, [1, 5, 3]);
        let e: Vec<f64> = [3.0f64, 2.5, 2.0].iter().map(|l| l.exp()).collect();
        let s: f64 = e.iter().sum();
        for (v, e) in val.iter().zip(&e) {
            assert!((f64::from(*v) - e / s).abs() < 1e-7);
        }
    }

    /// Central differences of a random linear functional Σ c·val match the backward.
    #[test]
    fn backward_matches_finite_differences() {
        let (n, codes, k) = (5, 16, 4);
        let mut rng = Rng::new(7);
        let logits = spread_logits(&mut rng, n, codes);
        let coef: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
        let functional = |l: &[f32]| -> f64 {
            let (_, val) = forward(l, codes, k);
            val.iter()
                .zip(&coef)
                .map(|(&v, &c)| f64::from(v) * f64::from(c))
                .sum()
        };
        let (idx, val) = forward(&logits, codes, k);
        let mut grad = vec![1.0; n * codes];
        topk_backward(n, codes, k, &idx, &val, &coef, &mut grad).unwrap();
        let eps = 3e-3f32;
        let (mut max_err, mut max_grad) = (0.0f64, 0.0f64);
        for i in 0..n * codes {
            let (mut lp, mut lm) = (logits.clone(), logits.clone());
            lp[i] += eps;
            lm[i] -= eps;
            let fd = (functional(&lp) - functional(&lm)) / f64::from(lp[i] - lm[i]);
            max_err = max_err.max((fd - f64::from(grad[i])).abs());
            max_grad = max_grad.max(fd.abs());
            if !idx[i / codes * k..][..k].contains(&((i % codes) as u32)) {
                assert_eq!(grad[i], 0.0);
                assert_eq!(fd, 0.0);
            }
        }
        eprintln!("topk FD: max abs err {max_err:.2e}, max |grad| {max_grad:.2e}");
        assert!(max_err < 1e-4 * max_grad.max(1.0), "{max_err}");
    }

    #[test]
    fn ties_pick_the_lower_index() {
        let (idx, val) = forward(&[1.0, 2.0, 2.0, 1.0, 2.0], 5, 2);
        assert_eq!(idx, [1, 2]);
        assert_eq!(val, [0.5, 0.5]);
        let (idx, _) = forward(&[0.0; 8], 8, 4);
        assert_eq!(idx, [0, 1, 2, 3]);
    }

    #[test]
    fn nan_does_not_panic_and_ranks_last() {
        let (idx, val) = forward(&[f32::NAN, 1.0, f32::NAN, 0.0], 4, 2);
        assert_eq!(idx, [1, 3]);
        assert!(val.iter().all(|v| v.is_finite()));
        let (idx, val) = forward(&[f32::NAN, f32::NAN, f32::NEG_INFINITY, f32::NAN], 4, 2);
        assert_eq!(idx, [2, 0]);
        assert_eq!(val.len(), 2);
    }

    #[test]
    fn shape_errors() {
        let (mut idx, mut val) = (vec![0u32; 4], vec![0.0f32; 4]);
        let shape = |e| matches!(e, Err(Error::Shape { .. }));
        assert!(shape(topk_forward(
            &[0.0; 8],
            4,
            2,
            &mut idx[..3],
            &mut val
        )));
        assert!(shape(topk_forward(
            &[0.0; 8],
            4,
            2,
            &mut idx,
            &mut val[..2]
        )));
        assert!(matches!(
            topk_forward(&[0.0; 7], 4, 2, &mut idx, &mut val),
            Err(Error::NotMultiple { .. })
        ));
        assert!(matches!(
            topk_forward(&[0.0; 8], 4, 5, &mut idx, &mut val),
            Err(Error::Param { what: "k", .. })
        ));
        assert!(matches!(
            topk_forward(&[0.0; 8], 0, 2, &mut idx, &mut val),
            Err(Error::Param { what: "codes", .. })
        ));
        let mut d = vec![0.0; 8];
        assert!(shape(topk_backward(2, 4, 2, &idx, &val, &val[..3], &mut d)));
        assert!(shape(topk_backward(2, 4, 2, &idx, &val, &val, &mut d[..7])));
        let bad = [0u32, 4, 1, 2];
        assert!(matches!(
            topk_backward(2, 4, 2, &bad, &val, &val, &mut d),
            Err(Error::Index {
                index: 4,
                position: 1,
                ..
            })
        ));
    }
}
