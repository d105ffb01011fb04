//! LERF-OVS's 3D protocol (docs/evaluation.md): a query selects Gaussians by their own
//! relevancy, and the selected set's rendered opacity is the predicted mask.
//!
//! Per query, on every level run's per-Gaussian relevancy r (each Gaussian's decoded
//! unit feature against the text and the canonical phrases, [`crate::relevancy`]):
//! - smoothing (optional, `k > 0`): `r′ᵢ = ½(rᵢ + mean of r over the k nearest
//!   Gaussian centres, i itself included)`, the 3D counterpart of the 2D protocol's
//!   box blend, as the Dr. Splat-style evaluation does it (k = 10 there); without it
//!   `r′ = r`;
//! - level: the level with the largest `max r′` (first on ties), as in 2D;
//! - selection: LangSplat's normalisation on the Gaussians instead of the pixels,
//!   `n = (r′ − min)/(max(r′ − min) + 1e-9)`, and the Gaussians with
//!   `clip(2n − 1, 0, 1) > threshold` (0.4, LangSplat's `mask_thresh`; i.e. n > 0.7).
//!   Equal relevancies everywhere give n = 0: an empty selection.
//!
//! The caller renders the selected Gaussians alone (the others removed, as
//! OpenGaussian renders a query's Gaussians) and binarises their accumulated opacity
//! with [`binarize`] (`> 0.7` in OpenGaussian's `render_lerf_by_text.py`).

use crate::knn::KdTree;
use crate::lerf;

/// Threshold on `clip(2n − 1, 0, 1)` (LangSplat's `mask_thresh`).
pub const SELECT_THRESHOLD: f32 = 0.4;
/// Threshold on the selected set's accumulated opacity (OpenGaussian's silhouette
/// threshold).
pub const ALPHA_THRESHOLD: f32 = 0.7;

/// The `k` nearest Gaussians of every Gaussian (itself first when no other centre
/// coincides), `[N, k]` row-major; `k` is capped at N.
pub fn neighbours(centres: &[[f32; 3]], k: usize) -> Vec<u32> {
    let k = k.min(centres.len());
    let tree = KdTree::new(centres);
    centres
        .iter()
        .flat_map(|&c| tree.k_nearest(c, k).into_iter().map(|i| i as u32))
        .collect()
}

/// `½(rᵢ + mean of r over row i of `nb`)` (rows of `k` indices), in float64.
pub fn blend_neighbours(r: &[f32], nb: &[u32], k: usize) -> Vec<f32> {
    if k == 0 {
        return r.to_vec();
    }
    r.iter()
        .zip(nb.chunks_exact(k))
        .map(|(&v, row)| {
            let mean = row.iter().map(|&j| f64::from(r[j as usize])).sum::<f64>() / k as f64;
            (0.5 * (f64::from(v) + mean)) as f32
        })
        .collect()
}

/// The Gaussians of one query.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Chosen level (index into the levels given).
    pub level: usize,
    /// `max r′` of every level.
    pub scores: Vec<f32>,
    /// Indices of the selected Gaussians, ascending.
    pub gaussians: Vec<u32>,
}

/// Selects the Gaussians of one query from each level's per-Gaussian relevancy
/// (`levels[l][i]`), smoothed over `nb` (rows of `k` neighbours; `k = 0`: none).
pub fn select(levels: &[Vec<f32>], nb: &[u32], k: usize, threshold: f32) -> Selection {
    let smoothed: Vec<Vec<f32>> = levels.iter().map(|r| blend_neighbours(r, nb, k)).collect();
    let scores: Vec<f32> = smoothed
        .iter()
        .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .collect();
    let level = lerf::first_max(&scores);
    let gaussians = smoothed
        .get(level)
        .map(|r| lerf::threshold(r, threshold))
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, m)| **m != 0)
        .map(|(i, _)| i as u32)
        .collect();
    Selection {
        level,
        scores,
        gaussians,
    }
}

/// The mask `alpha > threshold` (0/1).
pub fn binarize(alpha: &[f32], threshold: f32) -> Vec<u8> {
    alpha.iter().map(|&a| u8::from(a > threshold)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers: the top of a two-object relevancy, ties at the top, all equal
    /// (empty), the level choice, and smoothing that pulls an outlier out.
    #[test]
    fn selections_with_known_answers() {
        // Object A (0..3) at 0.9, object B (3..6) at 0.5, background at 0.45:
        // n = 1 for A, 0.111 for B → only A.
        let r = vec![0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.45, 0.45];
        let s = select(std::slice::from_ref(&r), &[], 0, SELECT_THRESHOLD);
        assert_eq!(s.gaussians, [0, 1, 2]);
        assert_eq!((s.level, s.scores.clone()), (0, vec![0.9]));
        // n just above and below 0.7: (0.72 − 0.45)/(0.9 − 0.45) = 0.6 < 0.7,
        // (0.80 − 0.45)/0.45 = 0.778 > 0.7.
        let r2 = vec![0.9, 0.72, 0.80, 0.45];
        assert_eq!(select(&[r2], &[], 0, 0.4).gaussians, [0, 2]);
        // Every relevancy equal: nothing is selected (n = 0/1e-9 = 0).
        assert!(select(&[vec![0.5; 6]], &[], 0, 0.4).gaussians.is_empty());
        // Two levels: the second has the larger maximum; ties go to the first.
        let hi = vec![0.1, 0.95, 0.1];
        let s = select(&[r.clone(), hi.clone()], &[], 0, 0.4);
        assert_eq!((s.level, s.gaussians), (1, vec![1]));
        let s = select(&[hi.clone(), hi], &[], 0, 0.4);
        assert_eq!(s.level, 0);
        // Smoothing over 3 neighbours (itself included): a lone high Gaussian (5)
        // among low ones drops below a high group (0, 1, 2): r′₅ = ½(0.9 + 1.1/3),
        // n₅ = 0.667 < 0.7.
        let r = vec![0.9, 0.9, 0.9, 0.1, 0.1, 0.9, 0.1];
        let nb = [
            0, 1, 2, 1, 0, 2, 2, 0, 1, 3, 4, 6, 4, 3, 6, 5, 6, 4, 6, 5, 4,
        ];
        let sm = blend_neighbours(&r, &nb, 3);
        assert!((sm[5] - 0.633_333).abs() < 1e-6 && (sm[0] - 0.9).abs() < 1e-6);
        assert_eq!(
            select(std::slice::from_ref(&r), &nb, 3, 0.4).gaussians,
            [0, 1, 2]
        );
        assert_eq!(select(&[r], &[], 0, 0.4).gaussians, [0, 1, 2, 5]);
        assert_eq!(binarize(&[0.7, 0.71, 0.0], ALPHA_THRESHOLD), [0, 1, 0]);
    }

    #[test]
    fn neighbours_include_themselves() {
        let c = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [5.0, 0.0, 0.0]];
        assert_eq!(neighbours(&c, 2), [0, 1, 1, 0, 2, 1]);
        assert_eq!(neighbours(&c, 9).len(), 9, "k capped at N");
    }
}
