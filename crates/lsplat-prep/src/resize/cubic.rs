//! EfficientSAM's mask post-processing: its predictor upsamples the decoder's
//! `M×M` logits straight to the crop's size with PyTorch's
//! `F.interpolate(mode="bicubic", align_corners=False)` (the logits cover the whole
//! stretched input, so there is no padding to cut), then SAM's generator thresholds
//! at 0 and counts the pixels above `±offset`.
//!
//! Every value is the float32 sum ATen's CPU kernel (`upsample_generic_Nd_kernel_impl`
//! with `HelperInterpCubic`) evaluates, left to right: `Σⱼ wyⱼ·(Σᵢ wxᵢ·s[yⱼ][xᵢ])`,
//! no fused multiply-add. Taps: source `scale·(dst + 0.5) − 0.5` (no clamp at 0 for
//! cubic), base `min(⌊src⌋, n − 1)`, `t = clamp(src − base, 0, 1)`, indices
//! `base − 1 … base + 2` clamped to the input, weights Keys' cubic with `A = −0.75`.
//!
//! Only a box of the output is evaluated. Bicubic weights have negative lobes (their
//! absolute sum is at most [`NEGATIVE_LOBES`] beyond 1 in 2-D), so a value is at most
//! `max + N·(max − min)` of its 16 taps, and a pixel whose taps give less than
//! `−offset − margin` counts nowhere. First a coarse box: with `G` the smallest logit,
//! taps all below `L = (−offset − margin + N·G) / (1 + N)` cannot reach it, so only
//! windows near a logit ≥ `L` are looked at; then the bound of each 4×4 window there
//! (one per pair of bases) keeps the box to the windows that can count.

use crate::bitmask::{BitMask, words_per_row};
use crate::resize::logits::Thresholded;

/// ATen's cubic convolution coefficient.
const A: f32 = -0.75;

/// A bound on the sum of the negative 2-D bicubic weights' magnitudes (the true
/// maximum, at `t = 0.5` on both axes, is `2 · 1.1875 · 0.1875 ≈ 0.4453`).
pub const NEGATIVE_LOBES: f32 = 0.5;

/// One output position of a 1-D bicubic resize: four source indices and weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicTap {
    /// `⌊src⌋` capped at `n − 1` (−1 before the first sample's centre).
    pub base: i64,
    /// Source indices `base − 1 … base + 2`, clamped to the input.
    pub i: [u32; 4],
    /// Their weights.
    pub w: [f32; 4],
}

/// Keys' cubic for `|x| ≤ 1`, as ATen's `cubic_convolution1` evaluates it.
fn near(x: f32) -> f32 {
    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
}

/// Keys' cubic for `1 < |x| < 2`, as ATen's `cubic_convolution2` evaluates it.
fn far(x: f32) -> f32 {
    ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
}

/// The taps of a 1-D bicubic resize from `n_in` to `n_out` samples.
pub fn cubic_taps(n_in: usize, n_out: usize) -> Vec<CubicTap> {
    let scale = n_in as f32 / n_out as f32;
    let last = n_in as i64 - 1;
    (0..n_out)
        .map(|d| {
            // The source index as `logits::taps` computes it, without the clamp at 0.
            let src = (scale as f64 * (d as f64 + 0.5) - 0.5) as f32;
            let base = (src.floor() as i64).min(last);
            let t = (src - base as f32).clamp(0.0, 1.0);
            let u = 1.0 - t;
            CubicTap {
                base,
                i: [-1, 0, 1, 2].map(|j| (base + j).clamp(0, last) as u32),
                w: [far(t + 1.0), near(t), near(u), far(u + 1.0)],
            }
        })
        .collect()
}

/// The value ATen computes from four samples and their weights.
#[inline]
fn dot4(s: [f32; 4], w: [f32; 4]) -> f32 {
    let mut v = s[0] * w[0];
    v += s[1] * w[1];
    v += s[2] * w[2];
    v += s[3] * w[3];
    v
}

fn larger(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

fn smaller(a: f32, b: f32) -> f32 {
    if a < b { a } else { b }
}

/// `out[k] = pick(v[k], …, v[k + 3])` for `v` of `out.len() + 3` values (`pair` is
/// scratch of at least `out.len() + 2`).
fn quad(v: &[f32], pair: &mut [f32], out: &mut [f32], pick: fn(f32, f32) -> f32) {
    let n = out.len();
    for (p, w) in pair[..n + 2].iter_mut().zip(v.windows(2)) {
        *p = pick(w[0], w[1]);
    }
    for (k, o) in out.iter_mut().enumerate() {
        *o = pick(pair[k], pair[k + 2]);
    }
}

/// The geometry of EfficientSAM's mask post-processing for one crop.
#[derive(Clone, Debug)]
pub struct CubicResize {
    /// Low-resolution side `M`.
    pub low: usize,
    /// Crop size (width, height): the output.
    pub out: (usize, usize),
    /// Offset of the crop in the frame.
    pub offset: (u32, u32),
    /// Frame (width, height).
    pub frame: (u32, u32),
    tx: Vec<CubicTap>,
    ty: Vec<CubicTap>,
}

impl CubicResize {
    /// Post-processing of `M×M` logits for a crop of `out` = (w, h) at `offset` in a
    /// `frame`.
    pub fn new(low: usize, out: (usize, usize), offset: (u32, u32), frame: (u32, u32)) -> Self {
        CubicResize {
            low,
            out,
            offset,
            frame,
            tx: cubic_taps(low, out.0),
            ty: cubic_taps(low, out.1),
        }
    }

    /// The output rows `[ya, yb]` and columns `[xa, xb]` whose 4×4 windows may reach
    /// `level`, given the low-resolution rows `q` and columns `p` that hold every logit
    /// at or above the coarse floor.
    fn live_box(
        &self,
        logits: &[f32],
        q: (usize, usize),
        p: (usize, usize),
        level: f32,
        scratch: &mut Vec<f32>,
    ) -> Option<([usize; 2], [usize; 2])> {
        let m = self.low as i64;
        // Bases whose window [b − 1, b + 2] meets the coarse box. A window's samples
        // are those of the edge-replicated extension at b − 1 … b + 2 (clamping only
        // repeats edge values), so every window has four and the passes are plain
        // sliding extrema.
        let bases =
            |(lo, hi): (usize, usize)| ((lo as i64 - 2).max(-1), (hi as i64 + 1).min(m - 1));
        let ((by0, by1), (bx0, bx1)) = (bases(q), bases(p));
        let (nbx, nby) = ((bx1 - bx0 + 1) as usize, (by1 - by0 + 1) as usize);
        let nr = nby + 3;
        let clamp = |v: i64| v.clamp(0, m - 1) as usize;
        scratch.clear();
        scratch.resize(2 * nr * nbx + 2 * (nbx + 3) + 2 * nbx, 0.0);
        let (hi, rest) = scratch.split_at_mut(nr * nbx);
        let (lo, rest) = rest.split_at_mut(nr * nbx);
        let (ext, rest) = rest.split_at_mut(nbx + 3);
        let (pair, rest) = rest.split_at_mut(nbx + 3);
        let (top, bottom) = rest.split_at_mut(nbx);
        // Row pass: each extended row's max and min over every column window.
        for j in 0..nr {
            let src = &logits[clamp(by0 - 1 + j as i64) * self.low..][..self.low];
            for (c, e) in ext.iter_mut().enumerate() {
                *e = src[clamp(bx0 - 1 + c as i64)];
            }
            quad(ext, pair, &mut hi[j * nbx..][..nbx], larger);
            quad(ext, pair, &mut lo[j * nbx..][..nbx], smaller);
        }
        // Column pass: the windows' extrema, and which windows may reach the level.
        let (mut fy, mut fx) = ((i64::MAX, i64::MIN), (i64::MAX, i64::MIN));
        for j in 0..nby {
            let (h, l) = (&hi[j * nbx..][..4 * nbx], &lo[j * nbx..][..4 * nbx]);
            for k in 0..nbx {
                top[k] = larger(
                    larger(h[k], h[nbx + k]),
                    larger(h[2 * nbx + k], h[3 * nbx + k]),
                );
                bottom[k] = smaller(
                    smaller(l[k], l[nbx + k]),
                    smaller(l[2 * nbx + k], l[3 * nbx + k]),
                );
            }
            let live = |k: &usize| top[*k] + NEGATIVE_LOBES * (top[*k] - bottom[*k]) >= level;
            if let (Some(a), Some(b)) = ((0..nbx).find(live), (0..nbx).rfind(live)) {
                let by = by0 + j as i64;
                fy = (fy.0.min(by), fy.1.max(by));
                fx = (fx.0.min(bx0 + a as i64), fx.1.max(bx0 + b as i64));
            }
        }
        if fy.0 > fy.1 {
            return None;
        }
        let span = |taps: &[CubicTap], (b0, b1): (i64, i64)| {
            let inside = |t: &CubicTap| (b0..=b1).contains(&t.base);
            Some([
                taps.iter().position(inside)?,
                taps.iter().rposition(inside)?,
            ])
        };
        Some((span(&self.ty, fy)?, span(&self.tx, fx)?))
    }

    /// Thresholds one mask's logits (`M×M`, row-major) at 0 and counts the pixels above
    /// `±offset`. `scratch` is reused between calls.
    pub fn apply(&self, logits: &[f32], offset: f32, scratch: &mut Vec<f32>) -> Thresholded {
        let m = self.low;
        assert_eq!(logits.len(), m * m);
        let empty = || Thresholded::empty(self.frame);
        let lowest = logits.iter().copied().fold(f32::INFINITY, f32::min);
        let margin = 0.01 + 1e-5 * lowest.abs();
        let floor = (-offset - margin + NEGATIVE_LOBES * lowest) / (1.0 + NEGATIVE_LOBES);
        // Low-resolution box of the logits at or above the floor.
        let (mut qa, mut qb, mut pa, mut pb) = (usize::MAX, 0, usize::MAX, 0);
        for (q, row) in logits.chunks_exact(m).enumerate() {
            for (p, _) in row.iter().enumerate().filter(|(_, v)| **v >= floor) {
                (qa, qb, pa, pb) = (qa.min(q), qb.max(q), pa.min(p), pb.max(p));
            }
        }
        if qa == usize::MAX {
            return empty();
        }
        let Some(([ya, yb], [xa, xb])) =
            self.live_box(logits, (qa, qb), (pa, pb), -offset - margin, scratch)
        else {
            return empty();
        };
        let (nx, ny) = (xb - xa + 1, yb - ya + 1);
        // Low-resolution rows under the box, interpolated to the box's columns.
        let (la, lb) = (self.ty[ya].i[0] as usize, self.ty[yb].i[3] as usize);
        let nl = lb - la + 1;
        scratch.clear();
        scratch.resize(nl * nx + nx, 0.0);
        let (hr, row) = scratch.split_at_mut(nl * nx);
        for q in 0..nl {
            let src = &logits[(la + q) * m..(la + q + 1) * m];
            for (v, t) in hr[q * nx..(q + 1) * nx].iter_mut().zip(&self.tx[xa..=xb]) {
                *v = dot4(t.i.map(|i| src[i as usize]), t.w);
            }
        }
        // Output rows: the vertical sums, thresholds and counts (the loop of
        // `MaskResize::apply`, kept apart: shared, it ran up to twice as slow in one
        // caller or the other, `benches/benches/prep_logits.rs`).
        let wpr = words_per_row(self.frame.0);
        let mut rows = vec![0u64; wpr * ny];
        let (mut hi, mut lo) = (0u32, 0u32);
        let gx = self.offset.0 as usize + xa;
        for y in 0..ny {
            let t = self.ty[ya + y];
            let r = t.i.map(|i| &hr[(i as usize - la) * nx..][..nx]);
            for (x, v) in row.iter_mut().enumerate() {
                *v = dot4([r[0][x], r[1][x], r[2][x], r[3][x]], t.w);
            }
            let bits = &mut rows[y * wpr..(y + 1) * wpr];
            for (x, &v) in row.iter().enumerate() {
                hi += (v > offset) as u32;
                lo += (v > -offset) as u32;
                if v > 0.0 {
                    let fx = gx + x;
                    bits[fx / 64] |= 1 << (fx % 64);
                }
            }
        }
        Thresholded {
            above_hi: hi,
            above_lo: lo,
            mask: BitMask::from_frame_rows(
                self.frame.0,
                self.frame.1,
                self.offset.1 + ya as u32,
                &rows,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every output pixel evaluated (ATen's sum for each, no box).
    fn full(r: &CubicResize, logits: &[f32]) -> Vec<f32> {
        let m = r.low;
        let mut out = Vec::with_capacity(r.out.0 * r.out.1);
        for ty in &r.ty {
            for tx in &r.tx {
                let rows =
                    ty.i.map(|q| dot4(tx.i.map(|p| logits[q as usize * m + p as usize]), tx.w));
                out.push(dot4(rows, ty.w));
            }
        }
        out
    }

    #[test]
    fn weights_are_keys_cubic_and_sum_to_one() {
        let t = cubic_taps(256, 1024);
        // dst 0: src = −0.375, base −1, t = 0.625; indices clamp at 0.
        assert_eq!(t[0].i, [0, 0, 0, 1]);
        let k = |x: f64| {
            let (x, a) = (x.abs(), -0.75);
            if x <= 1.0 {
                ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
            } else {
                ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
            }
        };
        for (d, tap) in t.iter().enumerate() {
            let src = 0.25 * (d as f64 + 0.5) - 0.5;
            let base = src.floor();
            for j in 0..4 {
                let want = k(src - (base + j as f64 - 1.0));
                assert!((tap.w[j] as f64 - want).abs() < 1e-6, "{d} {j}");
            }
            let s: f32 = tap.w.iter().sum();
            assert!((s - 1.0).abs() < 1e-6);
        }
        // Same size: the identity.
        for (d, tap) in cubic_taps(7, 7).iter().enumerate() {
            assert_eq!(tap.w, [0.0, 1.0, 0.0, 0.0]);
            assert_eq!(tap.i[1] as usize, d);
        }
        // The bound on the negative lobes: in 2-D they sum to px·ny + nx·py, at most
        // 2·max p·max n over the 1-D positive (p) and negative (n) sums.
        let (mut p, mut n) = (0f32, 0f32);
        for k in 0..=1000 {
            let t = k as f32 / 1000.0;
            let w = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)];
            p = p.max(w.iter().filter(|v| **v > 0.0).sum());
            n = n.max(-w.iter().filter(|v| **v < 0.0).sum::<f32>());
        }
        assert!((n - 0.1875).abs() < 1e-6, "{n}");
        assert!(2.0 * p * n <= NEGATIVE_LOBES);
    }

    #[test]
    fn the_box_equals_the_full_evaluation() {
        let m = 16;
        for (out, offset) in [((50, 30), (5, 7)), ((100, 140), (0, 0)), ((16, 16), (3, 0))] {
            let r = CubicResize::new(m, out, offset, (120, 160));
            for seed in 0..9u32 {
                let (cx, cy) = ((seed * 5 % 16) as f32, (seed * 3 % 16) as f32);
                // Blobs, some over a steep, very negative background; and (seed 8) no
                // logit above −1 at all, but a cliff from −3 to −60 whose negative
                // lobes lift pixels above 0.
                let logits: Vec<f32> = (0..m * m)
                    .map(|i| {
                        let (x, y) = ((i % m) as f32, (i / m) as f32);
                        let d = (x - cx).powi(2) + (y - cy).powi(2);
                        let v = 4.0 - d * (0.2 + seed as f32 * 0.1);
                        match seed {
                            8 if x < 7.0 => -3.0,
                            8 => -60.0,
                            _ if seed % 2 == 1 && v < -1.5 => -60.0,
                            _ => v,
                        }
                    })
                    .collect();
                let v = full(&r, &logits);
                let t = r.apply(&logits, 1.0, &mut Vec::new());
                assert_eq!(t.above_hi, v.iter().filter(|&&v| v > 1.0).count() as u32);
                assert_eq!(t.above_lo, v.iter().filter(|&&v| v > -1.0).count() as u32);
                for (i, &v) in v.iter().enumerate() {
                    let (x, y) = ((i % out.0) as u32 + offset.0, (i / out.0) as u32 + offset.1);
                    assert_eq!(t.mask.get(x, y), v > 0.0, "{out:?} seed {seed} at {x},{y}");
                }
            }
        }
    }
}
