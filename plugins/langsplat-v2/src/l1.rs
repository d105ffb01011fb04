//! Optional L1 loss between the decoded features and the ground truth.
//!
//! fvdb's normalisation: `weight · Σ_valid Σ_d |F_p − g_p|_d / area`, *not* divided by
//! `dim` (512× the original LangSplatV2 L1). F_p = Bᵀ w_p is formed one pixel at a
//! time in an f64 scratch row of `dim` values.

use std::ops::Range;

use crate::check::{
    expect_len, indices_below, positive, product, range_within, rows_of, valid_area,
};
use crate::error::Result;

/// L1 loss of the pixels in `range` and its gradients.
///
/// `codebook` is `[codes, dim]`, `table` `[rows, dim]`, `w` `[pixels, codes]`, `mask`
/// `[pixels]`. Overwrites `d_w` (`[range.len(), codes]`) with
/// B·sign(F − g)·weight/area and adds w_p ⊗ sign(F − g)·weight/area into
/// `d_codebook_partial` (`[codes, dim]`). sign(0) = 0. Returns the loss of the range.
pub fn l1_pixels(
    codebook: &[f32],
    codes: usize,
    dim: usize,
    table: &[f32],
    w: &[f32],
    mask: &[u32],
    range: Range<usize>,
    weight: f32,
    area: f32,
    d_w: &mut [f32],
    d_codebook_partial: &mut [f32],
) -> Result<f64> {
    positive("codes", codes)?;
    positive("dim", dim)?;
    let cd = product("codebook", codes, dim)?;
    expect_len("codebook", cd, codebook.len())?;
    expect_len("d_codebook_partial", cd, d_codebook_partial.len())?;
    let rows = rows_of("table", table.len(), dim)?;
    let pixels = rows_of("w", w.len(), codes)?;
    expect_len("mask", pixels, mask.len())?;
    range_within(&range, pixels)?;
    expect_len("d_w", product("d_w", range.len(), codes)?, d_w.len())?;
    valid_area(area)?;
    indices_below("mask", &mask[range.clone()], rows)?;

    let scale = f64::from(weight) / f64::from(area);
    let mut f = vec![0.0f64; dim];
    let mut sign = vec![0.0f32; dim];
    let mut loss = 0.0f64;
    for (p, dw) in range.zip(d_w.chunks_exact_mut(codes)) {
        let wp = &w[p * codes..][..codes];
        let g = &table[mask[p] as usize * dim..][..dim];
        f.fill(0.0);
        for (&wc, b) in wp.iter().zip(codebook.chunks_exact(dim)) {
            if wc != 0.0 {
                let wc = f64::from(wc);
                for (o, &x) in f.iter_mut().zip(b) {
                    *o += wc * f64::from(x);
                }
            }
        }
        let mut sum = 0.0f64;
        for ((s, &fv), &gv) in sign.iter_mut().zip(&f).zip(g) {
            let diff = fv - f64::from(gv);
            sum += diff.abs();
            *s = if diff > 0.0 {
                1.0
            } else if diff < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
        loss += scale * sum;
        let rows_b = codebook.chunks_exact(dim);
        let rows_d = d_codebook_partial.chunks_exact_mut(dim);
        for ((o, &wc), (b, db)) in dw.iter_mut().zip(wp).zip(rows_b.zip(rows_d)) {
            let proj: f64 = b
                .iter()
                .zip(&sign)
                .map(|(&x, &s)| f64::from(x) * f64::from(s))
                .sum();
            *o = (scale * proj) as f32;
            if wc != 0.0 {
                let k = (scale * f64::from(wc)) as f32;
                for (d, &s) in db.iter_mut().zip(&sign) {
                    *d += k * s;
                }
            }
        }
    }
    Ok(loss)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::reference::{problem, rel_err, wide};

    #[test]
    fn matches_dense_f64_reference_and_finite_differences() {
        let pb = problem(11);
        let (codes, dim) = (pb.codes, pb.dim);
        let mut d_w = vec![f32::NAN; pb.w.len()];
        let mut d_b = vec![0.0; codes * dim];
        let mut loss = 0.0;
        for r in [0..13, 13..pb.pixels] {
            let dw = &mut d_w[r.start * codes..r.end * codes];
            loss += l1_pixels(
                &pb.codebook,
                codes,
                dim,
                &pb.table,
                &pb.w,
                &pb.mask,
                r,
                pb.weight,
                pb.area,
                dw,
                &mut d_b,
            )
            .unwrap();
        }
        let (b, w) = (wide(&pb.codebook), wide(&pb.w));
        let (rl, rw, rb) = pb.l1(&b, &w);
        let (el, ew, eb) = (
            (loss - rl).abs() / rl,
            rel_err(&d_w, &rw),
            rel_err(&d_b, &rb),
        );
        eprintln!("l1 vs f64 reference: loss {el:.1e}, d_w {ew:.1e}, d_codebook {eb:.1e}");
        assert!(el < 1e-6 && ew < 1e-5 && eb < 1e-5, "{el} {ew} {eb}");
        // The reference's gradient is the derivative away from kinks.
        let eps = 1e-6;
        let mut worst = 0.0f64;
        for i in (0..w.len()).step_by(13) {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[i] += eps;
            wm[i] -= eps;
            let fd = (pb.l1(&b, &wp).0 - pb.l1(&b, &wm).0) / (2.0 * eps);
            worst = worst.max((fd - rw[i]).abs() / rw[i].abs().max(1e-3));
        }
        for i in (0..b.len()).step_by(7) {
            let (mut bp, mut bm) = (b.clone(), b.clone());
            bp[i] += eps;
            bm[i] -= eps;
            let fd = (pb.l1(&bp, &w).0 - pb.l1(&bm, &w).0) / (2.0 * eps);
            worst = worst.max((fd - rb[i]).abs() / rb[i].abs().max(1e-3));
        }
        eprintln!("l1 f64 reference vs FD: max rel err {worst:.1e}");
        assert!(worst < 1e-5, "{worst}");
    }

    #[test]
    fn sign_of_zero_is_zero() {
        let (codebook, table) = ([1.0, 2.0, 0.5, 0.0], [1.0, 2.0]);
        let (mut d_w, mut d_b) = ([9.0; 2], [0.0; 4]);
        let l = l1_pixels(
            &codebook,
            2,
            2,
            &table,
            &[1.0, 0.0],
            &[0],
            0..1,
            1.0,
            1.0,
            &mut d_w,
            &mut d_b,
        );
        assert_eq!(l, Ok(0.0));
        assert_eq!((d_w, d_b), ([0.0; 2], [0.0; 4]));
    }

    #[test]
    fn shape_errors() {
        let pb = problem(12);
        let (codes, dim) = (pb.codes, pb.dim);
        let mut d_w = vec![0.0; 4 * codes];
        let mut d_b = vec![0.0; codes * dim];
        let mut run = |table: &[f32], mask: &[u32], range: Range<usize>, d_b: &mut [f32]| {
            l1_pixels(
                &pb.codebook,
                codes,
                dim,
                table,
                &pb.w,
                mask,
                range,
                1.0,
                64.0,
                &mut d_w,
                d_b,
            )
        };
        assert!(run(&pb.table, &pb.mask, 0..4, &mut d_b).is_ok());
        assert!(matches!(
            run(&pb.table, &pb.mask, 0..5, &mut d_b),
            Err(Error::Shape { what: "d_w", .. })
        ));
        assert!(matches!(
            run(&pb.table[1..], &pb.mask, 0..4, &mut d_b),
            Err(Error::NotMultiple { .. })
        ));
        assert!(matches!(
            run(&pb.table[dim..], &[4; 40], 0..4, &mut d_b),
            Err(Error::Index { index: 4, .. })
        ));
        assert!(matches!(
            run(&pb.table, &pb.mask, 0..4, &mut d_b[1..]),
            Err(Error::Shape { .. })
        ));
    }
}
