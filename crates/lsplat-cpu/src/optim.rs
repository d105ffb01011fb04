//! Per-element ops: V1 normalisation and its backward, losses, fused Adam.

use lsplat_core::constants::{COS_EPS, NORM_EPS};
use lsplat_device::AdamParams;

/// `out_i = x_i / (|x_i| + ε)` row by row.
pub fn normalize(x: &[f32], c: usize, out: &mut [f32]) {
    for (xr, or) in x.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
        let n = xr.iter().map(|v| v * v).sum::<f32>().sqrt();
        let inv = 1.0 / (n + NORM_EPS);
        for (o, v) in or.iter_mut().zip(xr) {
            *o = v * inv;
        }
    }
}

/// `d_x = d/(r+ε) − x·(x·d)/(r·(r+ε)²)`, and `d/(r+ε)` at `r = 0`.
pub fn normalize_backward(x: &[f32], d: &[f32], c: usize, d_x: &mut [f32]) {
    for ((xr, dr), gr) in x
        .chunks_exact(c)
        .zip(d.chunks_exact(c))
        .zip(d_x.chunks_exact_mut(c))
    {
        let r = xr.iter().map(|v| v * v).sum::<f32>().sqrt();
        let a = 1.0 / (r + NORM_EPS);
        let b = if r > 0.0 {
            xr.iter().zip(dr).map(|(p, q)| p * q).sum::<f32>() * a * a / r
        } else {
            0.0
        };
        for ((g, xv), dv) in gr.iter_mut().zip(xr).zip(dr) {
            *g = dv * a - xv * b;
        }
    }
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
    let scale = 1.0 / (c as f64 * hw as f64);
    let g_scale = (weight as f64 * scale) as f32;
    let mut sum = 0.0f64;
    for (i, &m) in mask.iter().enumerate() {
        let g = &table[m as usize * c..m as usize * c + c];
        let mut row = 0.0f32;
        for k in 0..c {
            let diff = f[i * c + k] - g[k];
            row += diff.abs();
            d[i * c + k] = if diff > 0.0 {
                g_scale
            } else if diff < 0.0 {
                -g_scale
            } else {
                0.0
            };
        }
        sum += row as f64;
    }
    sum * scale
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
    let scale = 1.0 / hw as f64;
    let mut sum = 0.0f64;
    for (i, &m) in mask.iter().enumerate() {
        let g = &table[m as usize * c..m as usize * c + c];
        let fr = &f[i * c..i * c + c];
        let nf = fr.iter().map(|v| v * v).sum::<f32>().sqrt();
        let ng = g.iter().map(|v| v * v).sum::<f32>().sqrt();
        let dot: f32 = fr.iter().zip(g).map(|(a, b)| a * b).sum();
        let denom = (nf * ng).max(COS_EPS);
        let cos = dot / denom;
        sum += (1.0 - cos) as f64;
        let dr = &mut d[i * c..i * c + c];
        let gs = weight * scale as f32;
        for k in 0..c {
            // ∂(1 − cos)/∂F = −(G/denom − cos·F/|F|²) when |F||G| > ε.
            let grad = if nf * ng > COS_EPS {
                -(g[k] / denom - cos * fr[k] / (nf * nf))
            } else {
                -g[k] / denom
            };
            if add {
                dr[k] += gs * grad;
            } else {
                dr[k] = gs * grad;
            }
        }
    }
    sum * scale
}

/// Fused Adam (PyTorch's formulation) over one buffer.
pub fn adam(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], hp: &AdamParams) {
    let t = hp.step.max(1) as i32;
    let bc1 = 1.0 - (hp.beta1 as f64).powi(t);
    let bc2 = 1.0 - (hp.beta2 as f64).powi(t);
    let step_size = (hp.lr as f64 / bc1) as f32;
    let inv_sqrt_bc2 = (1.0 / bc2.sqrt()) as f32;
    let (b1, b2) = (hp.beta1, hp.beta2);
    for i in 0..p.len() {
        let gi = g[i] * hp.grad_scale;
        let mi = b1 * m[i] + (1.0 - b1) * gi;
        let vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (vi.sqrt() * inv_sqrt_bc2 + hp.eps);
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
        normalize_backward(&x, &d, 3, &mut gx);
        let f = |x: &[f32]| {
            let mut o = [0f32; 3];
            normalize(&x[..3], 3, &mut o);
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
        adam(&mut p, &g, &mut m, &mut v, &hp);
        assert!(
            (p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6 && p[2] == 0.0,
            "{p:?}"
        );
    }
}
