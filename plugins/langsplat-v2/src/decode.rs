//! Codebook decode fused with the cosine loss over valid pixels.
//!
//! The codebook `B` is `[codes, dim]`; a pixel's weights `w_p` (`[codes]`) decode to
//! F_p = Bᵀ w_p. A camera's ground truth is a table (`[rows, dim]`) of mask features
//! and, per valid pixel, the row `mask[p]` holding its feature g_p. The loss follows
//! fvdb's sparse path: `weight · Σ_valid (1 − cos(F_p, g_p)) / area` with `area = H·W`.
//!
//! Nothing of size `[pixels, dim]` is formed: [`prepare`] reduces the table and the
//! codebook to `table·Bᵀ` (`[rows, codes]`), `|g|` and the Gram matrix `B·Bᵀ`, after
//! which each pixel costs O(codes²). Those dot products are accumulated in f64 and
//! stored as f32; per-pixel arithmetic in [`cosine_pixels`] is also done in f64.
//!
//! The codebook gradient dL/dB = Σ_p w_p ⊗ dL/dF_p, with
//! dL/dF_p = c1·g_p + c2·F_p, is collected as two small matrices ([`CodebookAcc`]):
//! `u[r] = Σ_{p: mask[p]=r} c1 w_p` and `s = Σ_p c2 w_p w_pᵀ`, so that
//! dL/dB = uᵀ·table + s·B ([`codebook_gradient`]).

use std::ops::Range;

use crate::check::{
    expect_len, indices_below, positive, product, range_within, rows_of, valid_area,
};
use crate::error::Result;

pub use crate::codebook::{CodebookAcc, codebook_gradient};
pub use crate::l1::l1_pixels;

/// A pixel whose decoded |F|² is at most this (or whose ground truth is zero) has
/// cosine 0: it adds `weight/area` to the loss and has zero gradient.
pub const TINY_NORM_SQ: f64 = 1e-30;

/// Per-camera products needed by [`cosine_pixels`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CosinePrep {
    /// `[rows, codes]`: `table · Bᵀ` (each ground-truth row against each code).
    pub bg: Vec<f32>,
    /// `[rows]`: the norm of each ground-truth row.
    pub gnorm: Vec<f32>,
    /// `[codes, codes]`: the Gram matrix `B · Bᵀ`.
    pub gram: Vec<f32>,
}

/// f64-accumulated dot product.
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// Computes [`CosinePrep`] from the codebook (`[codes, dim]`) and the ground-truth
/// table (`[rows, dim]`). Dot products are summed in f64, then rounded to f32.
pub fn prepare(
    codebook: &[f32],
    codes: usize,
    dim: usize,
    table: &[f32],
    rows: usize,
) -> Result<CosinePrep> {
    positive("codes", codes)?;
    positive("dim", dim)?;
    expect_len("codebook", product("codebook", codes, dim)?, codebook.len())?;
    expect_len("table", product("table", rows, dim)?, table.len())?;
    let mut bg = Vec::with_capacity(product("bg", rows, codes)?);
    let mut gnorm = Vec::with_capacity(rows);
    for g in table.chunks_exact(dim) {
        bg.extend(codebook.chunks_exact(dim).map(|b| dot(g, b) as f32));
        gnorm.push(dot(g, g).sqrt() as f32);
    }
    let mut gram = vec![0.0f32; product("gram", codes, codes)?];
    for (i, bi) in codebook.chunks_exact(dim).enumerate() {
        for (j, bj) in codebook.chunks_exact(dim).enumerate().skip(i) {
            let v = dot(bi, bj) as f32;
            gram[i * codes + j] = v;
            gram[j * codes + i] = v;
        }
    }
    Ok(CosinePrep { bg, gnorm, gram })
}

/// Cosine loss of the pixels in `range`, its gradient w.r.t. their weights, and their
/// codebook-gradient pieces.
///
/// `w` is `[pixels, codes]` and `mask` `[pixels]` (row of each pixel's ground truth in
/// the table `prep` was built from); only pixels in `range` are touched. `d_w`
/// (`[range.len(), codes]`) is overwritten with dL/dw for those pixels; `acc` (shaped
/// for `prep`'s rows) is added to. Returns Σ weight·(1 − cos)/area over the range.
/// With a = w·bg_r, Gw = gram·w, |F| = √(w·Gw):
/// dL/dw = −(weight/area)·(bg_r/(|F||g|) − a·Gw/(|F|³|g|)).
pub fn cosine_pixels(
    prep: &CosinePrep,
    codes: usize,
    w: &[f32],
    mask: &[u32],
    range: Range<usize>,
    weight: f32,
    area: f32,
    d_w: &mut [f32],
    acc: &mut CodebookAcc,
) -> Result<f64> {
    positive("codes", codes)?;
    let rows = prep.gnorm.len();
    expect_len("prep.bg", product("prep.bg", rows, codes)?, prep.bg.len())?;
    expect_len(
        "prep.gram",
        product("prep.gram", codes, codes)?,
        prep.gram.len(),
    )?;
    let pixels = rows_of("w", w.len(), codes)?;
    expect_len("mask", pixels, mask.len())?;
    range_within(&range, pixels)?;
    expect_len("d_w", product("d_w", range.len(), codes)?, d_w.len())?;
    expect_len("acc.u", rows * codes, acc.u.len())?;
    expect_len("acc.s", codes * codes, acc.s.len())?;
    valid_area(area)?;
    indices_below("mask", &mask[range.clone()], rows)?;

    let scale = f64::from(weight) / f64::from(area);
    let mut gw = vec![0.0f64; codes];
    let mut nz: Vec<usize> = Vec::with_capacity(codes);
    let mut loss = 0.0f64;
    for (p, dw) in range.zip(d_w.chunks_exact_mut(codes)) {
        let wp = &w[p * codes..][..codes];
        let r = mask[p] as usize;
        let g = f64::from(prep.gnorm[r]);
        let bg = &prep.bg[r * codes..][..codes];
        nz.clear();
        nz.extend((0..codes).filter(|&c| wp[c] != 0.0));
        gw.fill(0.0);
        let mut a = 0.0f64;
        for &c in &nz {
            let wc = f64::from(wp[c]);
            a += wc * f64::from(bg[c]);
            for (o, &gv) in gw.iter_mut().zip(&prep.gram[c * codes..][..codes]) {
                *o += wc * f64::from(gv);
            }
        }
        let q: f64 = nz.iter().map(|&c| f64::from(wp[c]) * gw[c]).sum();
        if q <= TINY_NORM_SQ || g == 0.0 {
            loss += scale;
            dw.fill(0.0);
            continue;
        }
        let inv = 1.0 / (q.sqrt() * g);
        loss += scale * (1.0 - a * inv);
        let c1 = -scale * inv;
        let c2 = scale * a * inv / q;
        for ((o, &b), &gv) in dw.iter_mut().zip(bg).zip(&gw) {
            *o = (c1 * f64::from(b) + c2 * gv) as f32;
        }
        let u = &mut acc.u[r * codes..][..codes];
        for &i in &nz {
            let wi = f64::from(wp[i]);
            u[i] += (c1 * wi) as f32;
            let s = &mut acc.s[i * codes..][..codes];
            for &j in &nz {
                s[j] += (c2 * wi * f64::from(wp[j])) as f32;
            }
        }
    }
    Ok(loss)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::reference::{fused, problem, rel_err, wide};

    #[test]
    fn matches_dense_f64_reference() {
        for seed in 1..4 {
            let pb = problem(seed);
            let (loss, d_w, d_b) = fused(&pb, &pb.codebook, &pb.w, &[0, pb.pixels]);
            let (rl, rw, rb) = pb.cosine(&wide(&pb.codebook), &wide(&pb.w));
            let (el, ew, eb) = (
                (loss - rl).abs() / rl,
                rel_err(&d_w, &rw),
                rel_err(&d_b, &rb),
            );
            eprintln!("cosine vs f64 reference: loss {el:.1e}, d_w {ew:.1e}, d_codebook {eb:.1e}");
            assert!(el < 1e-6 && ew < 1e-5 && eb < 1e-5, "{el} {ew} {eb}");
            for p in (0..pb.pixels).filter(|&p| p % 9 == 4 || pb.mask[p] == 2) {
                assert!(d_w[p * pb.codes..][..pb.codes].iter().all(|&v| v == 0.0));
            }
        }
    }

    #[test]
    fn fused_f32_matches_finite_differences() {
        let pb = problem(6);
        let all = [0, pb.pixels];
        let (_, d_w, d_b) = fused(&pb, &pb.codebook, &pb.w, &all);
        let eps = 1e-3f32;
        let scale = d_w.iter().chain(&d_b).fold(0.0f32, |m, v| m.max(v.abs()));
        let mut worst = 0.0f32;
        for i in (0..pb.w.len())
            .filter(|i| (i / pb.codes) % 9 != 4)
            .step_by(11)
        {
            let (mut wp, mut wm) = (pb.w.clone(), pb.w.clone());
            wp[i] += eps;
            wm[i] -= eps;
            let fd = (fused(&pb, &pb.codebook, &wp, &all).0 - fused(&pb, &pb.codebook, &wm, &all).0)
                as f32;
            worst = worst.max((fd / (wp[i] - wm[i]) - d_w[i]).abs() / scale);
        }
        for i in (0..pb.codebook.len()).step_by(9) {
            let (mut bp, mut bm) = (pb.codebook.clone(), pb.codebook.clone());
            bp[i] += eps;
            bm[i] -= eps;
            let fd = (fused(&pb, &bp, &pb.w, &all).0 - fused(&pb, &bm, &pb.w, &all).0) as f32;
            worst = worst.max((fd / (bp[i] - bm[i]) - d_b[i]).abs() / scale);
        }
        eprintln!("fused f32 vs FD: max err / max |grad| {worst:.1e}");
        assert!(worst < 1e-2, "{worst}");
    }

    #[test]
    fn shape_errors() {
        let pb = problem(9);
        let (codes, rows) = (pb.codes, pb.rows);
        let prep = prepare(&pb.codebook, codes, pb.dim, &pb.table, rows).unwrap();
        let mut acc = CodebookAcc::new(rows, codes);
        let mut d_w = vec![0.0; 10 * codes];
        let mut run =
            |mask: &[u32], range: Range<usize>, n: usize, area: f32, acc: &mut CodebookAcc| {
                cosine_pixels(
                    &prep,
                    codes,
                    &pb.w,
                    mask,
                    range,
                    1.0,
                    area,
                    &mut d_w[..n * codes],
                    acc,
                )
            };
        assert!(run(&pb.mask, 0..10, 10, 64.0, &mut acc).is_ok());
        assert!(matches!(
            run(&pb.mask, 0..10, 9, 64.0, &mut acc),
            Err(Error::Shape { what: "d_w", .. })
        ));
        assert!(matches!(
            run(&pb.mask[1..], 0..10, 10, 64.0, &mut acc),
            Err(Error::Shape { what: "mask", .. })
        ));
        assert!(matches!(
            run(&pb.mask, 35..45, 10, 64.0, &mut acc),
            Err(Error::Range { .. })
        ));
        assert!(matches!(
            run(&pb.mask, 0..10, 10, 0.0, &mut acc),
            Err(Error::Param { what: "area", .. })
        ));
        let mut bad = pb.mask.clone();
        bad[3] = rows as u32;
        assert!(matches!(
            run(&bad, 0..10, 10, 64.0, &mut acc),
            Err(Error::Index { position: 3, .. })
        ));
        assert!(matches!(
            run(
                &pb.mask,
                0..10,
                10,
                64.0,
                &mut CodebookAcc::new(rows + 1, codes)
            ),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            acc.add(&CodebookAcc::new(rows, codes + 1)),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            prepare(&pb.codebook[1..], codes, pb.dim, &pb.table, rows),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            prepare(&pb.codebook, codes, 0, &pb.table, rows),
            Err(Error::Param { .. })
        ));
        let mut d_b = vec![0.0; codes * pb.dim - 1];
        let r = codebook_gradient(&acc, &pb.codebook, &pb.table, rows, codes, pb.dim, &mut d_b);
        assert!(matches!(
            r,
            Err(Error::Shape {
                what: "d_codebook",
                ..
            })
        ));
        acc.clear();
        assert!(acc.u.iter().chain(&acc.s).all(|&v| v == 0.0));
    }
}
