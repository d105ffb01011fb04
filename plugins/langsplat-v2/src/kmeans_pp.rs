//! Helpers of [`crate::kmeans`]: distances, row sampling and greedy k-means++.

use lsplat_core::Rng;

/// Squared Euclidean distance (f32, eight partial sums).
fn dist2(a: &[f32], b: &[f32]) -> f32 {
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| (x - y) * (x - y))
        .sum();
    let mut acc = [0.0f32; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            let d = x[l] - y[l];
            acc[l] += d * d;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Index and squared distance of the centre nearest to `x` (ties: lower index).
pub(crate) fn nearest(x: &[f32], centres: &[f32], dim: usize) -> (usize, f32) {
    let mut best = (0, f32::INFINITY);
    for (j, c) in centres.chunks_exact(dim).enumerate() {
        let d = dist2(x, c);
        if d < best.1 {
            best = (j, d);
        }
    }
    best
}

/// `m` distinct row indices out of `n` (partial Fisher–Yates).
pub(crate) fn sample_rows(rng: &mut Rng, n: usize, m: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    for i in 0..m {
        let j = i + rng.below((n - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(m);
    all
}

/// Greedy k-means++ over the rows `sample` of `data`; returns `[k, dim]` centres.
pub(crate) fn kmeans_pp(
    data: &[f32],
    dim: usize,
    sample: &[usize],
    k: usize,
    rng: &mut Rng,
) -> Vec<f32> {
    let m = sample.len();
    let row = |i: usize| &data[sample[i] * dim..][..dim];
    let trials = 2 + (k as f64).ln() as usize;
    let first = rng.below(m as u64) as usize;
    let mut centres = row(first).to_vec();
    let mut closest: Vec<f64> = (0..m)
        .map(|i| f64::from(dist2(row(i), row(first))))
        .collect();
    let mut cum = vec![0.0f64; m];
    for _ in 1..k {
        let mut pot = 0.0;
        for (c, &d) in cum.iter_mut().zip(&closest) {
            pot += d;
            *c = pot;
        }
        let mut best: Option<(f64, usize, Vec<f64>)> = None;
        for _ in 0..trials {
            let cand = if pot > 0.0 {
                let t = rng.f64() * pot;
                cum.partition_point(|&c| c <= t).min(m - 1)
            } else {
                rng.below(m as u64) as usize
            };
            let d: Vec<f64> = (0..m)
                .map(|i| f64::from(dist2(row(i), row(cand))).min(closest[i]))
                .collect();
            let p: f64 = d.iter().sum();
            if best.as_ref().is_none_or(|b| p < b.0) {
                best = Some((p, cand, d));
            }
        }
        if let Some((_, cand, d)) = best {
            centres.extend_from_slice(row(cand));
            closest = d;
        }
    }
    centres
}
