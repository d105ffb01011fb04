//! The weighted average (LUDVIG's rule): one feature-only backward walk per fitted
//! camera accumulates, for every level, `Σ w·m·f` and `Σ w·m` per Gaussian.

use lsplat_device::Backend;
use lsplat_render::Scratch;

use crate::{Problem, Result, Visits};

/// The weighted average of every level.
#[derive(Clone, Debug, PartialEq)]
pub struct Average {
    /// `[N, L·C]`: level `l` of Gaussian `g` at `g·L·C + l·C`.
    pub x: Vec<f32>,
    /// `[N, L]`: each Gaussian's total weight `Σ w·m` per level (the denominator).
    pub weight: Vec<f32>,
    /// Per level: Gaussians that received no weight from any valid pixel (their
    /// features stay zero).
    pub unweighted: Vec<usize>,
}

impl Average {
    /// Divides accumulated `[N, L·(C + 1)]` sums (`Σ w·m·f` then `Σ w·m` per level).
    pub(crate) fn from_sums(sums: &[f32], n: usize, levels: usize, c: usize, eps: f32) -> Self {
        let mut x = vec![0f32; n * levels * c];
        let mut weight = vec![0f32; n * levels];
        let mut unweighted = vec![0usize; levels];
        let w = levels * (c + 1);
        for g in 0..n {
            for l in 0..levels {
                let s = &sums[g * w + l * (c + 1)..g * w + (l + 1) * (c + 1)];
                let den = s[c];
                weight[g * levels + l] = den;
                if den == 0.0 {
                    unweighted[l] += 1;
                    continue;
                }
                let inv = 1.0 / (den as f64 + eps as f64);
                for k in 0..c {
                    x[g * levels * c + l * c + k] = (s[k] as f64 * inv) as f32;
                }
            }
        }
        Average {
            x,
            weight,
            unweighted,
        }
    }
}

/// Copies columns `cols` of a row-major `[rows, width]` matrix.
pub(crate) fn columns(m: &[f32], width: usize, cols: std::ops::Range<usize>) -> Vec<f32> {
    if cols.start == 0 && cols.end == width {
        return m.to_vec();
    }
    m.chunks_exact(width)
        .flat_map(|r| r[cols.clone()].iter().copied())
        .collect()
}

/// Writes a `[rows, cols.len()]` block into columns `cols` of a `[rows, width]` matrix.
pub(crate) fn set_columns(
    m: &mut [f32],
    width: usize,
    cols: std::ops::Range<usize>,
    block: &[f32],
) {
    let k = cols.len();
    for (row, src) in m.chunks_exact_mut(width).zip(block.chunks_exact(k)) {
        row[cols.clone()].copy_from_slice(src);
    }
}

/// Weighted average of every level over the fitted cameras: `x = Σ w·m·f / (Σ w·m +
/// ε)` per Gaussian and level. One `rasterize_backward` per camera (per channel chunk
/// when `L·(C + 1)` exceeds the backend's channel limit) over the union of the levels'
/// valid pixels.
pub fn average<B: Backend>(
    dev: &B,
    p: &Problem<'_, B>,
    eps: f32,
    visits: &mut Visits,
) -> Result<Average> {
    p.validate()?;
    let (n, c, levels) = (p.gaussians, p.channels(), p.level_count());
    let chunks = p.level_chunks(dev, c + 1)?;
    let mut sums: Vec<B::Buf<f32>> = chunks
        .iter()
        .map(|ls| dev.alloc::<f32>(n * ls.len() * (c + 1)))
        .collect::<Result<_, _>>()?;
    let mut scratch = Scratch::<B>::default();
    for (done, &cam) in p.fit.iter().enumerate() {
        p.camera_done(done);
        let Some((targets, set)) = p.prepare(dev, cam, &mut scratch)? else {
            continue;
        };
        let labels: Vec<_> = p.levels.iter().map(|l| l[cam]).collect();
        for (ls, acc) in chunks.iter().zip(&mut sums) {
            let d = dev.upload(&targets.masked_targets_with_mask(&labels, ls.clone()))?;
            let ch = ls.len() * (c + 1);
            dev.rasterize_backward(&scratch.projection, &scratch.bins, &set, &d, ch, acc)?;
        }
        visits.walks[cam] += 1;
    }
    p.camera_done(p.fit.len());
    let width = levels * (c + 1);
    let mut all = vec![0f32; n * width];
    for (ls, acc) in chunks.iter().zip(&sums) {
        let cols = ls.start * (c + 1)..ls.end * (c + 1);
        set_columns(&mut all, width, cols, &dev.download(acc)?);
    }
    Ok(Average::from_sums(&all, n, levels, c, eps))
}
