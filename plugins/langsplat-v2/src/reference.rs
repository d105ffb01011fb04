//! Dense float64 reference implementations, for the tests only: they materialise
//! F_p = Bᵀ w_p per pixel and differentiate the losses directly.

use lsplat_core::Rng;

use crate::decode::{CodebookAcc, TINY_NORM_SQ, codebook_gradient, cosine_pixels, prepare};

/// A small random decode problem.
pub(crate) struct Problem {
    pub codes: usize,
    pub dim: usize,
    pub rows: usize,
    pub pixels: usize,
    pub codebook: Vec<f32>,
    pub table: Vec<f32>,
    pub w: Vec<f32>,
    pub mask: Vec<u32>,
    pub weight: f32,
    pub area: f32,
}

/// Pixels with `p % 9 == 4` have all-zero weights; table row 2 is zero.
pub(crate) fn problem(seed: u64) -> Problem {
    let (codes, dim, rows, pixels) = (8, 16, 5, 40);
    let mut rng = Rng::new(seed);
    let codebook = (0..codes * dim).map(|_| rng.normal()).collect();
    let mut table: Vec<f32> = (0..rows * dim).map(|_| rng.normal()).collect();
    table[2 * dim..3 * dim].fill(0.0);
    let mut w = vec![0.0; pixels * codes];
    for p in (0..pixels).filter(|p| p % 9 != 4) {
        for c in 0..codes {
            if rng.f32() < 0.6 {
                w[p * codes + c] = rng.f32();
            }
        }
    }
    let mut mask: Vec<u32> = (0..pixels).map(|_| rng.below(rows as u64) as u32).collect();
    mask[1] = 2;
    Problem {
        codes,
        dim,
        rows,
        pixels,
        codebook,
        table,
        w,
        mask,
        weight: 0.7,
        area: 64.0,
    }
}

/// Widens to f64.
pub(crate) fn wide(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// max |got − want| / max |want|.
pub(crate) fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let err = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    err.fold(0.0, f64::max) / scale.max(1e-300)
}

impl Problem {
    /// Ground truth of pixel `p`.
    fn gt(&self, p: usize) -> Vec<f64> {
        wide(&self.table[self.mask[p] as usize * self.dim..][..self.dim])
    }

    /// F_p = Bᵀ w_p.
    fn decode(&self, b: &[f64], w: &[f64], p: usize) -> Vec<f64> {
        let mut f = vec![0.0; self.dim];
        for c in 0..self.codes {
            for (d, o) in f.iter_mut().enumerate() {
                *o += w[p * self.codes + c] * b[c * self.dim + d];
            }
        }
        f
    }

    /// Loss and gradients (w.r.t. w and B) given dL/dF per pixel.
    fn run(
        &self,
        b: &[f64],
        w: &[f64],
        pixel: impl Fn(&[f64], &[f64]) -> (f64, Vec<f64>),
    ) -> (f64, Vec<f64>, Vec<f64>) {
        let (codes, dim) = (self.codes, self.dim);
        let (mut loss, mut dw, mut db) = (0.0, vec![0.0; w.len()], vec![0.0; b.len()]);
        for p in 0..self.pixels {
            let (l, df) = pixel(&self.decode(b, w, p), &self.gt(p));
            loss += l;
            for c in 0..codes {
                for d in 0..dim {
                    dw[p * codes + c] += b[c * dim + d] * df[d];
                    db[c * dim + d] += w[p * codes + c] * df[d];
                }
            }
        }
        (loss, dw, db)
    }

    /// Cosine loss weight·Σ(1 − cos)/area and its exact gradients.
    pub fn cosine(&self, b: &[f64], w: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
        let s = f64::from(self.weight) / f64::from(self.area);
        self.run(b, w, |f, g| {
            let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
            let (nf2, ng, fg) = (dot(f, f), dot(g, g).sqrt(), dot(f, g));
            if nf2 <= TINY_NORM_SQ || ng == 0.0 {
                return (s, vec![0.0; f.len()]);
            }
            let nf = nf2.sqrt();
            let df = f.iter().zip(g);
            let df = df.map(|(fd, gd)| -s * (gd / (nf * ng) - fg * fd / (nf2 * nf * ng)));
            (s * (1.0 - fg / (nf * ng)), df.collect())
        })
    }

    /// L1 loss weight·Σ|F − g|/area and its gradients.
    pub fn l1(&self, b: &[f64], w: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
        let s = f64::from(self.weight) / f64::from(self.area);
        self.run(b, w, |f, g| {
            let diff: Vec<f64> = f.iter().zip(g).map(|(a, b)| a - b).collect();
            let loss = s * diff.iter().map(|d| d.abs()).sum::<f64>();
            let sign = |d: f64| if d == 0.0 { 0.0 } else { d.signum() };
            (loss, diff.iter().map(|&d| s * sign(d)).collect())
        })
    }
}

/// Loss, d_w and d_codebook through the fused f32 path for pixels split at `cuts`.
pub(crate) fn fused(
    pb: &Problem,
    codebook: &[f32],
    w: &[f32],
    cuts: &[usize],
) -> (f64, Vec<f32>, Vec<f32>) {
    let (codes, dim, rows) = (pb.codes, pb.dim, pb.rows);
    let prep = prepare(codebook, codes, dim, &pb.table, rows).unwrap();
    let mut d_w = vec![f32::NAN; w.len()];
    let (mut loss, mut total) = (0.0, CodebookAcc::new(rows, codes));
    for r in cuts.windows(2) {
        let mut acc = CodebookAcc::new(rows, codes);
        let dw = &mut d_w[r[0] * codes..r[1] * codes];
        loss += cosine_pixels(
            &prep,
            codes,
            w,
            &pb.mask,
            r[0]..r[1],
            pb.weight,
            pb.area,
            dw,
            &mut acc,
        )
        .unwrap();
        total.add(&acc).unwrap();
    }
    let mut d_b = vec![0.0; codes * dim];
    codebook_gradient(&total, codebook, &pb.table, rows, codes, dim, &mut d_b).unwrap();
    (loss, d_w, d_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matches_finite_differences() {
        let pb = problem(5);
        let (b, w) = (wide(&pb.codebook), wide(&pb.w));
        let (_, rw, rb) = pb.cosine(&b, &w);
        let eps = 1e-6;
        let mut worst = 0.0f64;
        let mut check = |x: &[f64], i: usize, grad: f64, on_b: bool| {
            let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
            xp[i] += eps;
            xm[i] -= eps;
            let f = |v: &[f64]| {
                if on_b {
                    pb.cosine(v, &w).0
                } else {
                    pb.cosine(&b, v).0
                }
            };
            let fd = (f(&xp) - f(&xm)) / (2.0 * eps);
            worst = worst.max((fd - grad).abs() / grad.abs().max(1e-3));
        };
        for i in (0..w.len()).filter(|i| (i / pb.codes) % 9 != 4).step_by(7) {
            check(&w, i, rw[i], false);
        }
        for i in (0..b.len()).step_by(5) {
            check(&b, i, rb[i], true);
        }
        eprintln!("f64 reference vs FD: max rel err {worst:.1e}");
        assert!(worst < 1e-6, "{worst}");
    }
}
