//! How a level's rendered channels become answers. Every answer the viewer draws
//! (relevancy, segmentation, the PCA picture of the decoded features) needs, per
//! pixel, the dot products `φ·t_j` of the pixel's unit text-space feature φ with a
//! few unit targets t_j (the four canonical phrases, three PCA axes, a query). Only
//! those dot products are computed, never the 512-D features:
//!
//! - [`Linear`]: the pixel feature is a linear map of what is composited, normalised.
//!   A LangSplatV2 run composites code weights w and φ = Bᵀw/|Bᵀw| (codebook B,
//!   `[64, D]`). With G = B·Bᵀ = UΛUᵀ, each Gaussian's weights become
//!   z = Λ^{1/2}Uᵀw (zero-eigenvalue directions dropped), so `|Bᵀw| = |z|` and
//!   `φ·t = z·τ/|z|` with τ = Λ^{−1/2}UᵀB·t: per pixel, K ≤ 64 multiply-adds per target
//!   instead of the 64×64 product `wᵀGw` per pixel. A run of CLIP-width features is the
//!   case B = I (composited f, φ = f/|f|).
//! - [`crate::table::Decoded`]: a LangSplat V1 run composites 3-D codes c and φ is the
//!   autoencoder's decoder at c (about 240 000 multiply-adds per pixel). The dot
//!   products are tabulated on a grid over code space, filled lazily at the vertices
//!   the frame's codes touch, and interpolated trilinearly; or decoded exactly per
//!   pixel on request.

use lsplat_cpu::gemm::{MatRef, gemm};
use lsplat_query::picture::{Colouring, round_u8};

/// Per-Gaussian rows the PCA of decoded features is fitted on (an even stride).
pub const PCA_SAMPLE: usize = 16_384;
/// Relative size below which an eigenvalue of B·Bᵀ is treated as zero.
const EIGEN_FLOOR: f64 = 1e-9;

/// Three principal axes of the decoded per-Gaussian features of a level (fixed once
/// per level, so colours are stable across views): colour k of a pixel is
/// `clamp((a_k·φ − a_k·μ − lo_k)/(hi_k − lo_k), 0, 1)·min(α, 1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pca {
    /// Axes `[3, D]`, unit, orthogonal.
    pub axes: Vec<f32>,
    /// `a_k·μ`.
    pub offset: [f32; 3],
    /// 1st percentile of each projection.
    pub lo: [f32; 3],
    /// 99th percentile of each projection.
    pub hi: [f32; 3],
}

impl Pca {
    /// Fits the axes on unit features `[n, dim]` (a sample of the decoded per-Gaussian
    /// features).
    pub fn fit(unit_rows: &[f32], dim: usize) -> Option<Pca> {
        let Colouring::Pca {
            mean, axes, lo, hi, ..
        } = Colouring::fit(unit_rows, dim)
        else {
            return None;
        };
        let mut offset = [0f32; 3];
        for (k, o) in offset.iter_mut().enumerate() {
            *o = dot(&axes[k * dim..(k + 1) * dim], &mean);
        }
        Some(Pca {
            axes,
            offset,
            lo,
            hi,
        })
    }

    /// The colour of a pixel from its three projections `a_k·φ` and its opacity.
    #[inline]
    pub fn rgb(&self, proj: [f32; 3], alpha: f32) -> [u8; 3] {
        if alpha <= 1e-6 {
            return [0; 3];
        }
        let a = alpha.min(1.0);
        let mut out = [0u8; 3];
        for k in 0..3 {
            let v = (proj[k] - self.offset[k] - self.lo[k]) / (self.hi[k] - self.lo[k]);
            out[k] = round_u8(v.clamp(0.0, 1.0) * a * 255.0);
        }
        out
    }
}

/// A level whose pixel feature is a normalised linear map of what it composites.
#[derive(Clone, Debug)]
pub struct Linear {
    /// What each Gaussian composites, `[N, k]`.
    pub rows: Vec<f32>,
    /// Channels composited (K).
    pub k: usize,
    /// Text-space width D.
    pub dim: usize,
    /// The map of a text-space vector to composited space, `[K, D]` (τ = M·t); `None`
    /// when K = D and the map is the identity.
    map: Option<Vec<f32>>,
}

impl Linear {
    /// Features composited as they are (CLIP-width features, `[N, dim]`).
    pub fn direct(features: &[f32], dim: usize) -> Linear {
        Linear {
            rows: features.to_vec(),
            k: dim,
            dim,
            map: None,
        }
    }

    /// Code weights `[N, c]` decoded through a codebook `[c, D]` (LangSplatV2).
    pub fn codebook(weights: &[f32], codebook: &[f32], c: usize, dim: usize) -> Linear {
        // G = B·Bᵀ in f64, its eigen-decomposition, and the kept directions.
        let mut g = vec![0f64; c * c];
        for i in 0..c {
            for j in 0..=i {
                let v: f64 = codebook[i * dim..(i + 1) * dim]
                    .iter()
                    .zip(&codebook[j * dim..(j + 1) * dim])
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                g[i * c + j] = v;
                g[j * c + i] = v;
            }
        }
        let (vals, vecs) = sym_eigen(&g, c);
        let top = vals.iter().copied().fold(0f64, f64::max);
        let kept: Vec<usize> = (0..c).filter(|&i| vals[i] > EIGEN_FLOOR * top).collect();
        let k = kept.len();
        // z = Λ^{1/2}Uᵀw per Gaussian: P = Λ^{1/2}Uᵀ, `[K, c]`.
        let mut p = vec![0f32; k * c];
        // τ = Λ^{−1/2}UᵀB·t: M = Λ^{−1/2}UᵀB, `[K, D]`.
        let mut m = vec![0f32; k * dim];
        for (r, &i) in kept.iter().enumerate() {
            let (s, inv) = (vals[i].sqrt(), 1.0 / vals[i].sqrt());
            for a in 0..c {
                p[r * c + a] = (s * vecs[a * c + i]) as f32;
            }
            for d in 0..dim {
                let v: f64 = (0..c)
                    .map(|a| vecs[a * c + i] * f64::from(codebook[a * dim + d]))
                    .sum();
                m[r * dim + d] = (inv * v) as f32;
            }
        }
        let n = weights.len() / c;
        let mut rows = vec![0f32; n * k];
        gemm(
            1.0,
            MatRef::new(weights, n, c),
            MatRef::new(&p, k, c).t(),
            0.0,
            &mut rows,
        );
        Linear {
            rows,
            k,
            dim,
            map: Some(m),
        }
    }

    /// Unit text-space targets `[T, D]` mapped to composited space `[T, K]`.
    pub fn targets(&self, unit: &[f32]) -> Vec<f32> {
        match &self.map {
            None => unit.to_vec(),
            Some(m) => {
                let t = unit.len() / self.dim;
                let mut out = vec![0f32; t * self.k];
                gemm(
                    1.0,
                    MatRef::new(unit, t, self.dim),
                    MatRef::new(m, self.k, self.dim).t(),
                    0.0,
                    &mut out,
                );
                out
            }
        }
    }

    /// Unit features of a sample of the Gaussians (for the PCA fit): `[n, D]`.
    pub fn sample_unit_features(&self) -> Vec<f32> {
        // Rebuilt in text space: for a codebook f = Bᵀw = Mᵀz (BᵀU₀ = 0 for the dropped
        // null directions U₀ of G), f itself otherwise.
        let n = self.rows.len() / self.k;
        let stride = n.div_ceil(PCA_SAMPLE).max(1);
        let picked: Vec<f32> = self
            .rows
            .chunks_exact(self.k)
            .step_by(stride)
            .flatten()
            .copied()
            .collect();
        let m = picked.len() / self.k;
        let mut out = match &self.map {
            None => picked,
            Some(map) => {
                let mut f = vec![0f32; m * self.dim];
                gemm(
                    1.0,
                    MatRef::new(&picked, m, self.k),
                    MatRef::new(map, self.k, self.dim),
                    0.0,
                    &mut f,
                );
                f
            }
        };
        lsplat_query::normalize_rows(&mut out, self.dim);
        out
    }

    /// Dot products `[P, T]` of each pixel's unit feature with targets `[T, K]`
    /// (already mapped by [`Self::targets`]), from rendered rows: pixel i's K values
    /// start at `rendered[i·stride + offset]`, on `threads` threads. A pixel whose
    /// composited vector is zero gets zeros.
    pub fn dots(
        &self,
        rendered: &[f32],
        stride: usize,
        offset: usize,
        targets: &[f32],
        threads: usize,
    ) -> Vec<f32> {
        let (k, t) = (self.k, targets.len() / self.k);
        let p = rendered.len() / stride;
        let mut out = vec![0f32; p * t];
        if t == 0 {
            return out;
        }
        let per = p.div_ceil(threads.max(1)).max(4096);
        std::thread::scope(|s| {
            for (src, dst) in rendered.chunks(per * stride).zip(out.chunks_mut(per * t)) {
                s.spawn(move || {
                    for (row, o) in src.chunks_exact(stride).zip(dst.chunks_exact_mut(t)) {
                        let y = &row[offset..offset + k];
                        let n2: f32 = y.iter().map(|v| v * v).sum();
                        if n2 <= 0.0 {
                            continue;
                        }
                        let inv = 1.0 / n2.sqrt();
                        for (s, tau) in o.iter_mut().zip(targets.chunks_exact(k)) {
                            *s = dot(y, tau) * inv;
                        }
                    }
                });
            }
        });
        out
    }
}

/// `a·b` in f32.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Eigenvalues and eigenvectors (columns of `[n, n]`, row-major) of a symmetric
/// `[n, n]` matrix by cyclic Jacobi rotations, in float64.
pub fn sym_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut a = a.to_vec();
    let mut v = vec![0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    let total: f64 = a.iter().map(|x| x * x).sum();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off <= 1e-30 * total.max(1e-300) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

/// LangSplat's relevancy from the dot products with a query and the canonical
/// phrases: `min_j 1/(1 + e^{10(s_j − s_q)})` (as [`lsplat_query::relevancy`]).
#[inline]
pub fn relevancy(query: f32, canonical: &[f32]) -> f32 {
    canonical
        .iter()
        .map(|&sn| 1.0 / (1.0 + (lsplat_query::relevancy::TEMPERATURE * (sn - query)).exp()))
        .fold(f32::INFINITY, f32::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    #[test]
    fn jacobi_diagonalises_a_symmetric_matrix() {
        let mut rng = Rng::new(2);
        let n = 12;
        let b: Vec<f64> = (0..n * 7).map(|_| rng.normal() as f64).collect();
        // A = B·Bᵀ (rank 7): eigenvalues ≥ 0, five of them zero.
        let mut a = vec![0f64; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..7).map(|k| b[i * 7 + k] * b[j * 7 + k]).sum();
            }
        }
        let (vals, vecs) = sym_eigen(&a, n);
        for i in 0..n {
            for j in 0..n {
                let r: f64 = (0..n)
                    .map(|k| vecs[i * n + k] * vals[k] * vecs[j * n + k])
                    .sum();
                assert!((r - a[i * n + j]).abs() < 1e-9, "({i}, {j})");
            }
        }
        assert_eq!(vals.iter().filter(|v| v.abs() < 1e-9).count(), 5);
    }

    /// The codebook path's dot products equal the CLI's lift (w/√(wᵀGw) against B·t),
    /// for composited sums of Gaussians' weights.
    #[test]
    fn codebook_dots_equal_the_lift() {
        let mut rng = Rng::new(9);
        let (n, c, dim) = (50, 16, 40);
        // A rank-deficient codebook: 16 rows in a 12-D subspace.
        let basis: Vec<f32> = (0..12 * dim).map(|_| rng.normal()).collect();
        let mut cb = vec![0f32; c * dim];
        for i in 0..c {
            let coef: Vec<f32> = (0..12).map(|_| rng.normal()).collect();
            for d in 0..dim {
                cb[i * dim + d] = (0..12).map(|k| coef[k] * basis[k * dim + d]).sum();
            }
        }
        let w: Vec<f32> = (0..n * c).map(|_| rng.f32().max(0.0)).collect();
        let lin = Linear::codebook(&w, &cb, c, dim);
        assert_eq!(lin.k, 12, "zero eigen-directions dropped");
        let mut t: Vec<f32> = (0..3 * dim).map(|_| rng.normal()).collect();
        lsplat_query::normalize_rows(&mut t, dim);
        let tau = lin.targets(&t);
        // A pixel = a weighted sum of a few Gaussians' rows (compositing is linear).
        let mix = |rows: &[f32], k: usize| -> Vec<f32> {
            (0..k)
                .map(|j| 0.3 * rows[2 * k + j] + 0.5 * rows[7 * k + j] + 0.1 * rows[11 * k + j])
                .collect()
        };
        let got = lin.dots(&mix(&lin.rows, lin.k), lin.k, 0, &tau, 2);
        let wp = mix(&w, c);
        let f: Vec<f64> = (0..dim)
            .map(|d| (0..c).map(|a| wp[a] as f64 * cb[a * dim + d] as f64).sum())
            .collect();
        let nf = f.iter().map(|x| x * x).sum::<f64>().sqrt();
        for j in 0..3 {
            let want: f64 = (0..dim).map(|d| f[d] * t[j * dim + d] as f64).sum::<f64>() / nf;
            assert!(
                (got[j] as f64 - want).abs() < 1e-5,
                "{j}: {} vs {want}",
                got[j]
            );
        }
        // The sample for the PCA is the unit decoded features.
        let s = lin.sample_unit_features();
        let f0: Vec<f64> = (0..dim)
            .map(|d| (0..c).map(|a| w[a] as f64 * cb[a * dim + d] as f64).sum())
            .collect();
        let n0 = f0.iter().map(|x| x * x).sum::<f64>().sqrt();
        for d in 0..dim {
            assert!((s[d] as f64 - f0[d] / n0).abs() < 1e-5);
        }
    }
}
