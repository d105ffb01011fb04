//! The codebook gradient of the cosine loss, from per-pixel pieces.
//!
//! dL/dB = Σ_p w_p ⊗ dL/dF_p with dL/dF_p = c1·g_p + c2·F_p (see [`crate::decode`]).
//! [`crate::decode::cosine_pixels`] collects `u[r] = Σ_{p: mask[p]=r} c1 w_p` and
//! `s = Σ_p c2 w_p w_pᵀ` into a [`CodebookAcc`]; [`codebook_gradient`] then forms
//! dL/dB = uᵀ·table + s·B in O(codes·(rows + codes)·dim).

use crate::check::{expect_len, positive, product};
use crate::error::Result;

/// Accumulated pieces of the codebook gradient (see the module docs); sum per-thread
/// accumulators with [`CodebookAcc::add`] in a fixed order for reproducible results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodebookAcc {
    /// `[rows, codes]`: Σ over the pixels of each ground-truth row of c1·w_p.
    pub u: Vec<f32>,
    /// `[codes, codes]`: Σ_p c2·w_p w_pᵀ.
    pub s: Vec<f32>,
}

impl CodebookAcc {
    /// A zeroed accumulator for `rows` ground-truth rows and `codes` codes.
    ///
    /// # Panics
    /// Only if `rows·codes` or `codes²` overflows memory (allocation failure).
    pub fn new(rows: usize, codes: usize) -> Self {
        CodebookAcc {
            u: vec![0.0; rows.saturating_mul(codes)],
            s: vec![0.0; codes.saturating_mul(codes)],
        }
    }

    /// Adds `other` (of the same shape) into `self`.
    pub fn add(&mut self, other: &CodebookAcc) -> Result<()> {
        expect_len("other.u", self.u.len(), other.u.len())?;
        expect_len("other.s", self.s.len(), other.s.len())?;
        for (a, b) in self.u.iter_mut().zip(&other.u) {
            *a += b;
        }
        for (a, b) in self.s.iter_mut().zip(&other.s) {
            *a += b;
        }
        Ok(())
    }

    /// Zeroes both matrices.
    pub fn clear(&mut self) {
        self.u.fill(0.0);
        self.s.fill(0.0);
    }
}

/// Adds the codebook gradient `uᵀ·table + s·B` (`[codes, dim]`) into `d_codebook`,
/// summing in f64.
pub fn codebook_gradient(
    acc: &CodebookAcc,
    codebook: &[f32],
    table: &[f32],
    rows: usize,
    codes: usize,
    dim: usize,
    d_codebook: &mut [f32],
) -> Result<()> {
    positive("codes", codes)?;
    positive("dim", dim)?;
    let cd = product("codebook", codes, dim)?;
    expect_len("codebook", cd, codebook.len())?;
    expect_len("d_codebook", cd, d_codebook.len())?;
    expect_len("table", product("table", rows, dim)?, table.len())?;
    expect_len("acc.u", product("acc.u", rows, codes)?, acc.u.len())?;
    expect_len("acc.s", product("acc.s", codes, codes)?, acc.s.len())?;
    let mut tmp = vec![0.0f64; dim];
    for (c, out) in d_codebook.chunks_exact_mut(dim).enumerate() {
        tmp.fill(0.0);
        let u_col = acc.u.iter().skip(c).step_by(codes);
        let s_row = acc.s[c * codes..][..codes].iter();
        let terms = u_col.zip(table.chunks_exact(dim));
        for (&coef, row) in terms.chain(s_row.zip(codebook.chunks_exact(dim))) {
            if coef != 0.0 {
                let coef = f64::from(coef);
                for (t, &x) in tmp.iter_mut().zip(row) {
                    *t += coef * f64::from(x);
                }
            }
        }
        for (o, t) in out.iter_mut().zip(&tmp) {
            *o = (f64::from(*o) + t) as f32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::reference::{fused, problem, rel_err, wide};

    #[test]
    fn split_ranges_match_one_range() {
        let pb = problem(8);
        let one = fused(&pb, &pb.codebook, &pb.w, &[0, pb.pixels]);
        let split = fused(&pb, &pb.codebook, &pb.w, &[0, 17, 17, pb.pixels]);
        assert!((one.0 - split.0).abs() < 1e-12 * one.0);
        assert_eq!(one.1, split.1);
        assert!(rel_err(&split.2, &wide(&one.2)) < 1e-6);
    }

    #[test]
    fn accumulator_add_clear_and_shapes() {
        let mut a = CodebookAcc::new(2, 3);
        let mut b = CodebookAcc::new(2, 3);
        (b.u[1], b.s[8]) = (2.0, -1.0);
        a.add(&b).unwrap();
        a.add(&b).unwrap();
        assert_eq!((a.u[1], a.s[8]), (4.0, -2.0));
        assert!(matches!(
            a.add(&CodebookAcc::new(2, 4)),
            Err(Error::Shape { .. })
        ));
        let mut d_b = vec![0.0; 3 * 4];
        let table = [1.0; 2 * 4];
        assert!(codebook_gradient(&a, &[0.5; 12], &table, 2, 3, 4, &mut d_b).is_ok());
        // uᵀ·table: code 1 gets 4 · (1, 1, 1, 1); s·B: code 2 gets −2 · (0.5, …).
        assert_eq!(&d_b[4..], [4.0, 4.0, 4.0, 4.0, -1.0, -1.0, -1.0, -1.0]);
        let r = codebook_gradient(&a, &[0.5; 12], &table, 2, 3, 4, &mut d_b[1..]);
        assert!(matches!(
            r,
            Err(Error::Shape {
                what: "d_codebook",
                ..
            })
        ));
        let r = codebook_gradient(&a, &[0.5; 12], &table, 3, 3, 4, &mut d_b);
        assert!(matches!(r, Err(Error::Shape { what: "table", .. })));
        a.clear();
        assert!(a.u.iter().chain(&a.s).all(|&v| v == 0.0));
    }
}
