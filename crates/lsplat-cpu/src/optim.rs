//! Per-element ops: V1 normalisation and its backward, losses, fused Adam.

use lsplat_core::config::LossKind;
use lsplat_core::constants::{COS_EPS, NORM_EPS};
use lsplat_device::AdamParams;
use multiversion::multiversion;

use crate::pool::{Workers, even_ranges};

/// Row ranges for a per-row op over `rows` rows (one range when small).
fn row_ranges(workers: &Workers, rows: usize, c: usize) -> Vec<std::ops::Range<usize>> {
    let parts = if rows * c < 1 << 16 {
        1
    } else {
        4 * workers.threads()
    };
    even_ranges(rows, parts)
}

/// `out_i = x_i / (|x_i| + ε)` row by row.
pub fn normalize(workers: &Workers, x: &[f32], c: usize, out: &mut [f32]) {
    let ranges = row_ranges(workers, x.len() / c, c);
    workers.for_ranges(
        &ranges,
        out,
        |r| r * c,
        |rows, out| normalize_rows(&x[rows.start * c..rows.end * c], c, out),
    );
}

/// Rows per batch of the normalisation loops: the square roots and divisions of a
/// batch are independent, so they fill a vector register (the same operations per
/// row as one row at a time, so the same bits).
const NORM_BATCH: usize = 8;

fn normalize_rows(x: &[f32], c: usize, out: &mut [f32]) {
    match c {
        3 => normalize_rows_c::<3>(x, out),
        _ => normalize_rows_dyn(x, c, out),
    }
}

#[multiversion(targets("x86_64+avx2+fma"))]
fn normalize_rows_c<const C: usize>(x: &[f32], out: &mut [f32]) {
    let (xb, xt) = x.split_at(x.len() / (C * NORM_BATCH) * C * NORM_BATCH);
    let (ob, ot) = out.split_at_mut(xb.len());
    for (xr, or) in xb
        .chunks_exact(C * NORM_BATCH)
        .zip(ob.chunks_exact_mut(C * NORM_BATCH))
    {
        let mut inv = [0f32; NORM_BATCH];
        for (i, s) in inv.iter_mut().enumerate() {
            for v in &xr[i * C..i * C + C] {
                *s += v * v;
            }
        }
        for s in &mut inv {
            *s = 1.0 / (s.sqrt() + NORM_EPS);
        }
        for (i, s) in inv.iter().enumerate() {
            for k in 0..C {
                or[i * C + k] = xr[i * C + k] * s;
            }
        }
    }
    normalize_rows_dyn(xt, C, ot);
}

fn normalize_rows_dyn(x: &[f32], c: usize, out: &mut [f32]) {
    for (xr, or) in x.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
        let mut n = 0.0f32;
        for v in xr {
            n += v * v;
        }
        let inv = 1.0 / (n.sqrt() + NORM_EPS);
        for (o, v) in or.iter_mut().zip(xr) {
            *o = v * inv;
        }
    }
}

/// `d_x = d/(r+ε) − x·(x·d)/(r·(r+ε)²)`, and `d/(r+ε)` at `r = 0`.
pub fn normalize_backward(workers: &Workers, x: &[f32], d: &[f32], c: usize, d_x: &mut [f32]) {
    let ranges = row_ranges(workers, x.len() / c, c);
    workers.for_ranges(
        &ranges,
        d_x,
        |r| r * c,
        |rows, out| {
            let span = rows.start * c..rows.end * c;
            normalize_backward_rows(&x[span.clone()], &d[span], c, out)
        },
    );
}

fn normalize_backward_rows(x: &[f32], d: &[f32], c: usize, d_x: &mut [f32]) {
    match c {
        3 => normalize_backward_rows_c::<3>(x, d, d_x),
        _ => normalize_backward_rows_dyn(x, d, c, d_x),
    }
}

#[multiversion(targets("x86_64+avx2+fma"))]
fn normalize_backward_rows_c<const C: usize>(x: &[f32], d: &[f32], d_x: &mut [f32]) {
    let full = x.len() / (C * NORM_BATCH) * C * NORM_BATCH;
    let batches = x[..full]
        .chunks_exact(C * NORM_BATCH)
        .zip(d[..full].chunks_exact(C * NORM_BATCH))
        .zip(d_x[..full].chunks_exact_mut(C * NORM_BATCH));
    for ((xr, dr), gr) in batches {
        let (mut r, mut dot) = ([0f32; NORM_BATCH], [0f32; NORM_BATCH]);
        for i in 0..NORM_BATCH {
            for k in i * C..i * C + C {
                r[i] += xr[k] * xr[k];
                dot[i] += xr[k] * dr[k];
            }
        }
        let (mut a, mut b) = ([0f32; NORM_BATCH], [0f32; NORM_BATCH]);
        for i in 0..NORM_BATCH {
            let ri = r[i].sqrt();
            a[i] = 1.0 / (ri + NORM_EPS);
            let bi = dot[i] * a[i] * a[i] / ri;
            b[i] = if ri > 0.0 { bi } else { 0.0 };
        }
        for i in 0..NORM_BATCH {
            for k in i * C..i * C + C {
                gr[k] = dr[k] * a[i] - xr[k] * b[i];
            }
        }
    }
    normalize_backward_rows_dyn(&x[full..], &d[full..], C, &mut d_x[full..]);
}

fn normalize_backward_rows_dyn(x: &[f32], d: &[f32], c: usize, d_x: &mut [f32]) {
    for ((xr, dr), gr) in x
        .chunks_exact(c)
        .zip(d.chunks_exact(c))
        .zip(d_x.chunks_exact_mut(c))
    {
        let (mut r, mut dot) = (0.0f32, 0.0f32);
        for (p, q) in xr.iter().zip(dr) {
            r += p * p;
            dot += p * q;
        }
        let r = r.sqrt();
        let a = 1.0 / (r + NORM_EPS);
        let b = if r > 0.0 { dot * a * a / r } else { 0.0 };
        for ((g, xv), dv) in gr.iter_mut().zip(xr).zip(dr) {
            *g = dv * a - xv * b;
        }
    }
}

/// The gradient scales of a per-pixel loss for one camera, formed exactly as
/// [`masked_l1`] and [`cosine`] form them.
#[derive(Clone, Copy, Debug)]
pub struct LossScales {
    /// Which terms.
    pub kind: LossKind,
    /// `1 / (C·H·W)`.
    pub l1: f64,
    /// `1 / (H·W)`.
    pub cos: f64,
    /// `weight · l1` as f32 (the L1 gradient magnitude).
    pub l1_grad: f32,
    /// `weight · cos` (the cosine gradient scale).
    pub cos_grad: f32,
}

impl LossScales {
    /// Scales for `c` channels over an image of `hw` pixels.
    pub fn new(kind: LossKind, c: usize, hw: usize, weight: f32) -> Self {
        let l1 = 1.0 / (c as f64 * hw as f64);
        let cos = 1.0 / hw as f64;
        LossScales {
            kind,
            l1,
            cos,
            l1_grad: (weight as f64 * l1) as f32,
            cos_grad: weight * cos as f32,
        }
    }

    /// The loss of one pixel row `f` against its target `g`: writes `d` (the
    /// weighted gradient) and adds the row's terms to `sums` (L1, 1 − cos).
    #[inline(always)]
    pub fn row(&self, f: &[f32], g: &[f32], d: &mut [f32], sums: &mut (f64, f64)) {
        match self.kind {
            LossKind::MaskedL1 => sums.0 += l1_row(f, g, self.l1_grad, d) as f64,
            LossKind::Cosine => sums.1 += cosine_row(f, g, self.cos_grad, d, false) as f64,
            LossKind::L1Cosine => {
                sums.0 += l1_row(f, g, self.l1_grad, d) as f64;
                sums.1 += cosine_row(f, g, self.cos_grad, d, true) as f64;
            }
        }
    }

    /// `weight · L` from the summed terms.
    pub fn value(&self, sums: (f64, f64), weight: f32) -> f64 {
        (sums.0 * self.l1 + sums.1 * self.cos) * weight as f64
    }
}

/// One row of the masked L1: `Σ|f − g|`, and `d = g_scale·sign(f − g)` (sign(0) = 0).
#[inline(always)]
pub fn l1_row(f: &[f32], g: &[f32], g_scale: f32, d: &mut [f32]) -> f32 {
    let mut row = 0.0f32;
    for ((fv, gv), dv) in f.iter().zip(g).zip(d.iter_mut()) {
        let diff = fv - gv;
        row += diff.abs();
        *dv = if diff > 0.0 {
            g_scale
        } else if diff < 0.0 {
            -g_scale
        } else {
            0.0
        };
    }
    row
}

/// One row of the cosine loss: `1 − cos(f, g)`, and `d (+)= gs·∂(1 − cos)/∂f`.
#[inline(always)]
pub fn cosine_row(f: &[f32], g: &[f32], gs: f32, d: &mut [f32], add: bool) -> f32 {
    let nf = f.iter().map(|v| v * v).sum::<f32>().sqrt();
    let ng = g.iter().map(|v| v * v).sum::<f32>().sqrt();
    let dot: f32 = f.iter().zip(g).map(|(a, b)| a * b).sum();
    let denom = (nf * ng).max(COS_EPS);
    let cos = dot / denom;
    for ((dv, fv), gv) in d.iter_mut().zip(f).zip(g) {
        // ∂(1 − cos)/∂F = −(G/denom − cos·F/|F|²) when |F||G| > ε.
        let grad = if nf * ng > COS_EPS {
            -(gv / denom - cos * fv / (nf * nf))
        } else {
            -gv / denom
        };
        if add {
            *dv += gs * grad;
        } else {
            *dv = gs * grad;
        }
    }
    1.0 - cos
}

/// Masked L1 over valid pixels, normalised by `C·H·W`. Returns the loss; writes
/// `weight · ∂L/∂F` into `d` (sign(0) = 0).
pub fn masked_l1(
    f: &[f32],
    mask: &[u32],
    table: &[f32],
    c: usize,
    hw: usize,
    weight: f32,
    d: &mut [f32],
) -> f64 {
    let s = LossScales::new(LossKind::MaskedL1, c, hw, weight);
    let mut sum = 0.0f64;
    for (i, &m) in mask.iter().enumerate() {
        let g = &table[m as usize * c..m as usize * c + c];
        sum += l1_row(&f[i * c..i * c + c], g, s.l1_grad, &mut d[i * c..i * c + c]) as f64;
    }
    sum * s.l1
}

/// Σ_valid (1 − cos(F, G)) / (H·W); writes (or, with `add`, adds) `weight · ∂L/∂F`.
pub fn cosine(
    f: &[f32],
    mask: &[u32],
    table: &[f32],
    c: usize,
    hw: usize,
    weight: f32,
    d: &mut [f32],
    add: bool,
) -> f64 {
    let s = LossScales::new(LossKind::Cosine, c, hw, weight);
    let mut sum = 0.0f64;
    for (i, &m) in mask.iter().enumerate() {
        let g = &table[m as usize * c..m as usize * c + c];
        let fr = &f[i * c..i * c + c];
        sum += cosine_row(fr, g, s.cos_grad, &mut d[i * c..i * c + c], add) as f64;
    }
    sum * s.cos
}

/// Fused Adam (PyTorch's formulation) over one buffer, split over the workers.
pub fn adam(
    workers: &Workers,
    p: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    hp: &AdamParams,
) {
    let n = p.len();
    let ranges = row_ranges(workers, n, 1);
    let m_parts = crate::pool::split_mut(&ranges, m, |i| i);
    let v_parts = crate::pool::split_mut(&ranges, v, |i| i);
    let jobs: Vec<_> = crate::pool::split_mut(&ranges, p, |i| i)
        .into_iter()
        .zip(m_parts)
        .zip(v_parts)
        .collect();
    workers.run_jobs(jobs, |(((r, p), (_, m)), (_, v))| {
        adam_span(p, &g[r], m, v, hp)
    });
}

fn adam_span(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], hp: &AdamParams) {
    let t = hp.step.max(1) as i32;
    let bc1 = 1.0 - (hp.beta1 as f64).powi(t);
    let bc2 = 1.0 - (hp.beta2 as f64).powi(t);
    let step_size = (hp.lr as f64 / bc1) as f32;
    let inv_sqrt_bc2 = (1.0 / bc2.sqrt()) as f32;
    let k = [
        hp.beta1,
        hp.beta2,
        hp.grad_scale,
        step_size,
        inv_sqrt_bc2,
        hp.eps,
    ];
    adam_elems(p, g, m, v, k);
}

/// The Adam update of each element, `k` = [β1, β2, gradient scale, step size,
/// 1/√(1 − β2ᵗ), ε]. Compiled for the CPU's widest vector unit as well (the same
/// operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn adam_elems(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], k: [f32; 6]) {
    let [b1, b2, scale, step_size, inv_sqrt_bc2, eps] = k;
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    for (((p, g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        let gi = g * scale;
        let mi = b1 * *m + (1.0 - b1) * gi;
        let vi = b2 * *v + (1.0 - b2) * gi * gi;
        *m = mi;
        *v = vi;
        *p -= step_size * mi / (vi.sqrt() * inv_sqrt_bc2 + eps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_backward_matches_finite_differences() {
        let x = [0.3f32, -1.2, 0.7, 0.0, 0.0, 0.0];
        let d = [0.5f32, 0.25, -1.0, 1.0, -2.0, 0.5];
        let mut gx = [0f32; 6];
        let w = Workers::new(1);
        normalize_backward(&w, &x, &d, 3, &mut gx);
        let f = |x: &[f32]| {
            let mut o = [0f32; 3];
            normalize(&w, &x[..3], 3, &mut o);
            o.iter()
                .zip(&d[..3])
                .map(|(a, b)| (a * b) as f64)
                .sum::<f64>()
        };
        for k in 0..3 {
            let mut xp = x;
            let mut xm = x;
            xp[k] += 1e-3;
            xm[k] -= 1e-3;
            let fd = (f(&xp) - f(&xm)) / 2e-3;
            assert!(
                (fd - gx[k] as f64).abs() < 1e-3,
                "{k}: fd {fd} vs {}",
                gx[k]
            );
        }
        // At zero the gradient is d / ε (LangSplat's 1e9 scale).
        assert!((gx[3] - 1e9).abs() < 1e3);
    }

    /// The batched loops (and their AVX2 clones, when the CPU has AVX2) give bitwise
    /// the one-row-at-a-time results, for row counts around the batch size, zero rows
    /// and rows of huge and tiny norms; and equal a float64 reference to rounding.
    #[test]
    fn batched_normalisation_equals_one_row_at_a_time() {
        let mut rng = lsplat_core::Rng::new(7);
        for rows in [1usize, 7, 8, 9, 16, 61] {
            let mut x: Vec<f32> = (0..rows * 3).map(|_| rng.range(-2.0, 2.0)).collect();
            let d: Vec<f32> = (0..rows * 3).map(|_| rng.range(-1.0, 1.0)).collect();
            x[..3].fill(0.0);
            if rows > 9 {
                x[24..27].copy_from_slice(&[3e18, -1e18, 2e18]);
                x[27..30].copy_from_slice(&[1e-20, 0.0, -3e-21]);
            }
            let (mut a, mut b) = (vec![0f32; rows * 3], vec![0f32; rows * 3]);
            normalize_rows(&x, 3, &mut a);
            normalize_rows_dyn(&x, 3, &mut b);
            assert_eq!(bits(&a), bits(&b), "{rows} rows: normalise");
            for (r, (xr, ar)) in x.chunks(3).zip(a.chunks(3)).enumerate() {
                let n = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
                for (v, o) in xr.iter().zip(ar) {
                    let want = *v as f64 / (n + NORM_EPS as f64);
                    assert!(
                        (*o as f64 - want).abs() <= 1e-6 * want.abs().max(1e-30),
                        "row {r}"
                    );
                }
            }
            normalize_backward_rows(&x, &d, 3, &mut a);
            normalize_backward_rows_dyn(&x, &d, 3, &mut b);
            assert_eq!(bits(&a), bits(&b), "{rows} rows: backward");
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    #[test]
    fn adam_first_step_moves_by_lr() {
        let mut p = [1.0f32, -1.0, 0.0];
        let g = [3.0f32, -0.5, 0.0];
        let (mut m, mut v) = ([0f32; 3], [0f32; 3]);
        let hp = AdamParams {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-15,
            step: 1,
            grad_scale: 1.0,
        };
        adam(&Workers::new(1), &mut p, &g, &mut m, &mut v, &hp);
        assert!(
            (p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6 && p[2] == 0.0,
            "{p:?}"
        );
    }
}
