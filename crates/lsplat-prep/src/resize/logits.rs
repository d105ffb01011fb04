//! From a decoder's low-resolution mask logits to a binary mask at the crop's size,
//! as SAM's `postprocess_masks` does: bilinear (`align_corners=False`) from `M×M` to
//! the encoder's `S×S` frame, keep the `input_h × input_w` corner the resized crop
//! occupied, bilinear again to the crop's size; then threshold at 0 and count the
//! pixels above `+offset` and `-offset` for the stability score.
//!
//! Every value is the float32 expression PyTorch's CPU kernel evaluates,
//! `h0·(w0·a + w1·b) + h1·(w0·c + w1·d)` (no fused multiply-add), with its source
//! indices (`scale·(dst + 0.5) − 0.5` in double, as float, clamped at 0) and weights.
//! Only the pixels whose taps reach a low-resolution logit above `−offset − 0.001`
//! are evaluated: elsewhere every tap is at most that, so the value is at most
//! `−offset` and the pixel counts nowhere (exactly what the full evaluation gives).

use crate::bitmask::{BitMask, words_per_row};

/// One output position of a 1-D bilinear resize: two source indices and weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    /// First source index.
    pub i0: u32,
    /// Second source index (`i0` or `i0 + 1`).
    pub i1: u32,
    /// Weight of `i0`.
    pub l0: f32,
    /// Weight of `i1`.
    pub l1: f32,
}

/// The taps of a 1-D bilinear resize from `n_in` to `n_out` samples.
pub fn taps(n_in: usize, n_out: usize) -> Vec<Tap> {
    if n_in == n_out {
        return (0..n_in as u32)
            .map(|i| Tap {
                i0: i,
                i1: i,
                l0: 1.0,
                l1: 0.0,
            })
            .collect();
    }
    let scale = n_in as f32 / n_out as f32;
    (0..n_out)
        .map(|d| {
            let src = (scale as f64 * (d as f64 + 0.5) - 0.5) as f32;
            let src = if src < 0.0 { 0.0 } else { src };
            let i0 = (src.floor() as i64).min(n_in as i64 - 1);
            let l1 = (src - i0 as f32).clamp(0.0, 1.0);
            let i1 = i0 + (i0 < n_in as i64 - 1) as i64;
            Tap {
                i0: i0 as u32,
                i1: i1 as u32,
                l0: 1.0 - l1,
                l1,
            }
        })
        .collect()
}

/// The geometry of SAM's mask post-processing for one crop.
#[derive(Clone, Debug)]
pub struct MaskResize {
    /// Low-resolution side `M`.
    pub low: usize,
    /// Crop size (width, height): the output.
    pub out: (usize, usize),
    /// Offset of the crop in the frame, and the frame size.
    pub offset: (u32, u32),
    /// Frame (width, height).
    pub frame: (u32, u32),
    /// Stage 1 taps (`M → S`), rows and columns alike, first `input` entries kept.
    s1_x: Vec<Tap>,
    s1_y: Vec<Tap>,
    /// Stage 2 taps (input size → crop size).
    s2_x: Vec<Tap>,
    s2_y: Vec<Tap>,
}

/// What one mask's post-processing yields.
#[derive(Clone, Debug)]
pub struct Thresholded {
    /// Pixels with logit > `+offset` (`threshold + offset`).
    pub above_hi: u32,
    /// Pixels with logit > `−offset`.
    pub above_lo: u32,
    /// Pixels with logit > 0, placed in the frame.
    pub mask: BitMask,
}

impl Thresholded {
    /// No pixel above either level: an empty mask in a `frame`.
    pub fn empty(frame: (u32, u32)) -> Thresholded {
        Thresholded {
            above_hi: 0,
            above_lo: 0,
            mask: BitMask::empty(frame.0, frame.1),
        }
    }
}

impl MaskResize {
    /// Post-processing of `M×M` logits for a crop of `out` = (w, h) at `offset` in a
    /// `frame`, encoded at side `s` where it filled `input` = (w, h).
    pub fn new(
        low: usize,
        s: usize,
        input: (usize, usize),
        out: (usize, usize),
        offset: (u32, u32),
        frame: (u32, u32),
    ) -> MaskResize {
        let s1 = taps(low, s);
        MaskResize {
            low,
            out,
            offset,
            frame,
            s1_x: s1[..input.0].to_vec(),
            s1_y: s1[..input.1].to_vec(),
            s2_x: taps(input.0, out.0),
            s2_y: taps(input.1, out.1),
        }
    }

    /// Thresholds one mask's logits (`M×M`, row-major) at 0 and counts the pixels above
    /// `±offset`. `scratch` is reused between calls.
    pub fn apply(&self, logits: &[f32], offset: f32, scratch: &mut Vec<f32>) -> Thresholded {
        let m = self.low;
        assert_eq!(logits.len(), m * m);
        let floor = -offset - 0.001;
        let empty = || Thresholded::empty(self.frame);
        // Low-resolution box of the logits that can reach above −offset.
        let (mut qa, mut qb, mut pa, mut pb) = (usize::MAX, 0, usize::MAX, 0);
        for (q, row) in logits.chunks_exact(m).enumerate() {
            for (p, _) in row.iter().enumerate().filter(|(_, v)| **v > floor) {
                (qa, qb, pa, pb) = (qa.min(q), qb.max(q), pa.min(p), pb.max(p));
            }
        }
        if qa == usize::MAX {
            return empty();
        }
        let live = |t: &Tap, lo: usize, hi: usize| {
            (lo..=hi).contains(&(t.i0 as usize)) || (lo..=hi).contains(&(t.i1 as usize))
        };
        let span = |s2: &[Tap], s1: &[Tap], lo: usize, hi: usize| {
            let ok = |t: &Tap| live(&s1[t.i0 as usize], lo, hi) || live(&s1[t.i1 as usize], lo, hi);
            let a = s2.iter().position(ok)?;
            let b = s2.iter().rposition(ok)?;
            Some((a, b))
        };
        let (Some((xa, xb)), Some((ya, yb))) = (
            span(&self.s2_x, &self.s1_x, pa, pb),
            span(&self.s2_y, &self.s1_y, qa, qb),
        ) else {
            return empty();
        };
        let (nx, ny) = (xb - xa + 1, yb - ya + 1);
        // Stage-1 columns and rows needed, and the low-resolution ones under them.
        let (ca, cb) = (self.s2_x[xa].i0 as usize, self.s2_x[xb].i1 as usize);
        let (ra, rb) = (self.s2_y[ya].i0 as usize, self.s2_y[yb].i1 as usize);
        let (nc, nr) = (cb - ca + 1, rb - ra + 1);
        let (la, lb) = (self.s1_y[ra].i0 as usize, self.s1_y[rb].i1 as usize);
        let nl = lb - la + 1;
        scratch.clear();
        scratch.resize(nl * nc + nc + nr * nx, 0.0);
        let (hl, rest) = scratch.split_at_mut(nl * nc);
        let (ir, g) = rest.split_at_mut(nc);
        // Low-resolution rows interpolated to the stage-1 columns.
        for q in 0..nl {
            let src = &logits[(la + q) * m..(la + q + 1) * m];
            for (c, v) in hl[q * nc..(q + 1) * nc].iter_mut().enumerate() {
                let t = self.s1_x[ca + c];
                *v = t.l0 * src[t.i0 as usize] + t.l1 * src[t.i1 as usize];
            }
        }
        // Stage-1 rows, then the same rows interpolated to the output columns.
        for r in 0..nr {
            let t = self.s1_y[ra + r];
            let (h0, h1) = (
                &hl[(t.i0 as usize - la) * nc..][..nc],
                &hl[(t.i1 as usize - la) * nc..][..nc],
            );
            for c in 0..nc {
                ir[c] = t.l0 * h0[c] + t.l1 * h1[c];
            }
            for (x, v) in g[r * nx..(r + 1) * nx].iter_mut().enumerate() {
                let u = self.s2_x[xa + x];
                *v = u.l0 * ir[u.i0 as usize - ca] + u.l1 * ir[u.i1 as usize - ca];
            }
        }
        // Output rows: threshold and count.
        let wpr = words_per_row(self.frame.0);
        let mut rows = vec![0u64; wpr * ny];
        let (mut hi, mut lo) = (0u32, 0u32);
        let gx = self.offset.0 as usize + xa;
        for y in 0..ny {
            let t = self.s2_y[ya + y];
            let g0 = &g[(t.i0 as usize - ra) * nx..][..nx];
            let g1 = &g[(t.i1 as usize - ra) * nx..][..nx];
            let row = &mut rows[y * wpr..(y + 1) * wpr];
            for x in 0..nx {
                let v = t.l0 * g0[x] + t.l1 * g1[x];
                hi += (v > offset) as u32;
                lo += (v > -offset) as u32;
                if v > 0.0 {
                    let fx = gx + x;
                    row[fx / 64] |= 1 << (fx % 64);
                }
            }
        }
        let y0 = self.offset.1 + ya as u32;
        Thresholded {
            above_hi: hi,
            above_lo: lo,
            mask: BitMask::from_frame_rows(self.frame.0, self.frame.1, y0, &rows),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain evaluation of every output pixel (both stages in full).
    fn full(r: &MaskResize, logits: &[f32]) -> Vec<f32> {
        let m = r.low;
        let (iw, ih) = (r.s1_x.len(), r.s1_y.len());
        let mut s1 = vec![0f32; iw * ih];
        for (y, ty) in r.s1_y.iter().enumerate() {
            for (x, tx) in r.s1_x.iter().enumerate() {
                let at = |q: u32, p: u32| logits[q as usize * m + p as usize];
                s1[y * iw + x] = ty.l0 * (tx.l0 * at(ty.i0, tx.i0) + tx.l1 * at(ty.i0, tx.i1))
                    + ty.l1 * (tx.l0 * at(ty.i1, tx.i0) + tx.l1 * at(ty.i1, tx.i1));
            }
        }
        let (ow, oh) = r.out;
        let mut out = vec![0f32; ow * oh];
        for (y, ty) in r.s2_y.iter().enumerate() {
            for (x, tx) in r.s2_x.iter().enumerate() {
                let at = |q: u32, p: u32| s1[q as usize * iw + p as usize];
                out[y * ow + x] = ty.l0 * (tx.l0 * at(ty.i0, tx.i0) + tx.l1 * at(ty.i0, tx.i1))
                    + ty.l1 * (tx.l0 * at(ty.i1, tx.i0) + tx.l1 * at(ty.i1, tx.i1));
            }
        }
        out
    }

    #[test]
    fn restricted_evaluation_equals_the_full_one() {
        let m = 16;
        for (out, input, offset) in [
            ((50, 30), (64, 38), (5, 7)),
            ((100, 140), (46, 64), (0, 0)),
            ((64, 64), (64, 64), (3, 0)),
        ] {
            let r = MaskResize::new(m, 64, input, out, offset, (120, 160));
            for seed in 0..6u32 {
                let (cx, cy) = ((seed * 5 % 16) as f32, (seed * 3 % 16) as f32);
                let logits: Vec<f32> = (0..m * m)
                    .map(|i| {
                        let (x, y) = ((i % m) as f32, (i / m) as f32);
                        4.0 - ((x - cx).powi(2) + (y - cy).powi(2)) * (0.2 + seed as f32 * 0.1)
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

    #[test]
    fn taps_match_align_corners_false() {
        let t = taps(256, 1024);
        assert_eq!((t[0].i0, t[0].i1, t[0].l1), (0, 1, 0.0));
        assert_eq!((t[2].i0, t[2].l1), (0, 0.125));
        assert_eq!((t[1023].i0, t[1023].i1, t[1023].l1), (255, 255, 0.375));
        let d = taps(10, 4);
        assert_eq!((d[1].i0, d[1].l1), (3, 0.25));
    }
}
