//! LangSplat's LERF-OVS protocol (workload.md §4; LangSplat's eval/evaluate_iou_loc.py),
//! and LangSplatV2's variant of it ([`Protocol`]).
//!
//! Per query and level, on the relevancy map r (`[h, w]`, row-major):
//! - smoothing: `f = box(r)`, a 30×30 mean (OpenCV `filter2D` with anchor (15, 15) and
//!   its default reflect-101 border), blended `r′ = 0.5·(f + r)`;
//! - segmentation: `n = (r′ − min)/(max(r′ − min) + 1e-9)`, `2n − 1` clipped to [0, 1],
//!   pixels `> 0.4`, then a 7×7 majority vote whose windows end at `min(i + 4, h − 1)`
//!   (LangSplat's clipped last row and column); the level with the largest `max r′`
//!   is chosen (first on ties) and scored by IoU against the ground-truth mask;
//! - localization: the level with the largest `max f` (first on ties); every pixel of
//!   that level equal to its maximum is a candidate; a hit is any candidate inside any
//!   ground-truth box, bounds inclusive.
//!
//! LangSplatV2 (its eval_lerf.py) smooths with a 29×29 mean over the part of the window
//! inside the image (PyTorch's `AvgPool2d(29, stride 1, padding 14,
//! count_include_pad=False)`) instead of the box, and cleans the mask by keeping the
//! pixels whose 7×7 window (inside the image) is more than half ones instead of the
//! vote; the rest is the same.
//!
//! Box sums are computed in float64 and stored as float32 (OpenCV filters float32
//! images in float32, through a DFT for kernels this large), so exact ties on plateaus
//! are kept here where OpenCV's rounding may break them.

use crate::QueryError;

/// Edge of the smoothing box.
pub const BOX_SIZE: usize = 30;
/// Threshold on `2n − 1` (LangSplat's `mask_thresh`).
pub const MASK_THRESHOLD: f32 = 0.4;
/// Half-width of the majority-vote window (7×7).
pub const VOTE_RADIUS: usize = 3;
/// Edge of LangSplatV2's smoothing window.
pub const POOL_SIZE: usize = 29;
/// Edge of LangSplatV2's clean-up window.
pub const CLEAN_SIZE: usize = 7;

/// Whose smoothing and clean-up [`segment`] and [`localize`] use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// LangSplat's: 30×30 box (reflect-101), 7×7 majority vote.
    #[default]
    LangSplat,
    /// LangSplatV2's: 29×29 in-image mean, 7×7 in-image mean above ½.
    LangSplatV2,
}

impl Protocol {
    /// The script it follows (for reports).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::LangSplat => "LangSplat LERF-OVS (eval/evaluate_iou_loc.py)",
            Protocol::LangSplatV2 => "LangSplatV2 LERF-OVS (eval_lerf.py)",
        }
    }

    /// The smoothed map f of a relevancy map.
    pub fn smooth(self, r: &[f32], w: usize, h: usize) -> Vec<f32> {
        self.smooth_on(r, w, h, 1)
    }

    /// [`Protocol::smooth`] on `threads` threads (LangSplat's box; the same bits
    /// whatever the count).
    pub fn smooth_on(self, r: &[f32], w: usize, h: usize, threads: usize) -> Vec<f32> {
        match self {
            Protocol::LangSplat => box_filter_threads(r, w, h, BOX_SIZE, threads),
            Protocol::LangSplatV2 => pool_mean(r, w, h, POOL_SIZE),
        }
    }

    /// The cleaned-up mask.
    pub fn clean(self, mask: &[u8], w: usize, h: usize) -> Vec<u8> {
        self.clean_on(mask, w, h, 1)
    }

    /// [`Protocol::clean`] on `threads` threads (LangSplat's vote; the same result
    /// whatever the count).
    pub fn clean_on(self, mask: &[u8], w: usize, h: usize, threads: usize) -> Vec<u8> {
        match self {
            Protocol::LangSplat => majority_vote_threads(mask, w, h, threads),
            Protocol::LangSplatV2 => {
                let m: Vec<f32> = mask.iter().map(|&v| f32::from(v != 0)).collect();
                pool_mean(&m, w, h, CLEAN_SIZE)
                    .iter()
                    .map(|&v| u8::from(v > 0.5))
                    .collect()
            }
        }
    }
}

/// Mean over the part inside the image of the `k × k` window centred on each pixel
/// (`k` odd), as PyTorch's `AvgPool2d(k, stride=1, padding=k/2,
/// count_include_pad=False)`; sums in float64.
pub fn pool_mean(r: &[f32], w: usize, h: usize, k: usize) -> Vec<f32> {
    let a = k / 2;
    let span = |i: usize, len: usize| i.saturating_sub(a)..(i + a + 1).min(len);
    let mut hsum = vec![0f64; w * h];
    for y in 0..h {
        let row = &r[y * w..(y + 1) * w];
        for x in 0..w {
            hsum[y * w + x] = row[span(x, w)].iter().map(|&v| f64::from(v)).sum();
        }
    }
    let mut out = vec![0f32; w * h];
    for y in 0..h {
        let rows = span(y, h);
        for x in 0..w {
            let cols = span(x, w).len();
            let s: f64 = rows.clone().map(|q| hsum[q * w + x]).sum();
            out[y * w + x] = (s / (rows.len() * cols) as f64) as f32;
        }
    }
    out
}

/// Runs `f(i, item)` for every item, the last on this thread and the others on
/// scoped threads of their own (one item: no thread is started).
fn par_each<T: Send>(items: Vec<T>, f: impl Fn(usize, T) + Sync) {
    let f = &f;
    std::thread::scope(|sc| {
        let n = items.len();
        let mut last = None;
        for (i, item) in items.into_iter().enumerate() {
            if i + 1 == n {
                last = Some((i, item));
            } else {
                sc.spawn(move || f(i, item));
            }
        }
        if let Some((i, item)) = last {
            f(i, item);
        }
    });
}

/// OpenCV's `BORDER_REFLECT_101` index (`gfedcb|abcdefgh|gfedcba`), repeated for
/// offsets larger than the image.
pub fn reflect101(mut p: isize, len: usize) -> usize {
    let n = len as isize;
    if n == 1 {
        return 0;
    }
    while p < 0 || p >= n {
        p = if p < 0 { -p } else { 2 * (n - 1) - p };
    }
    p as usize
}

/// Mean over a `k × k` box anchored at `(k/2, k/2)` (window offsets `−k/2 ..
/// k − 1 − k/2`), reflect-101 border, as `cv2.filter2D(r, -1, ones((k, k))/k²)`.
/// Running window sums in float64 (horizontal, then vertical over whole rows): O(1)
/// per pixel whatever `k`; the running sums differ from a direct sum only by float64
/// rounding (the tests compare with a direct float64 sum).
pub fn box_filter(r: &[f32], w: usize, h: usize, k: usize) -> Vec<f32> {
    box_filter_threads(r, w, h, k, 1)
}

/// [`box_filter`] on `threads` threads (rows for the horizontal sums, column strips
/// for the vertical ones), with the same bits whatever the thread count.
pub fn box_filter_threads(r: &[f32], w: usize, h: usize, k: usize, threads: usize) -> Vec<f32> {
    if w == 0 || h == 0 || k == 0 {
        return vec![0.0; w * h];
    }
    let a = (k / 2) as isize;
    // The reflected source index of each window slot: window x covers ext[x .. x + k].
    let ext = |len: usize| -> Vec<usize> {
        (0..(len + k - 1) as isize)
            .map(|j| reflect101(j - a, len))
            .collect()
    };
    let (ex, ey) = (ext(w), ext(h));
    let threads = threads.clamp(1, w.min(h));
    let mut hsum = vec![0f64; w * h];
    let rows_per = h.div_ceil(threads);
    let rows: Vec<_> = r
        .chunks(rows_per * w)
        .zip(hsum.chunks_mut(rows_per * w))
        .collect();
    par_each(rows, |_, (src, dst)| {
        for (row, out) in src.chunks_exact(w).zip(dst.chunks_exact_mut(w)) {
            let mut s: f64 = ex[..k].iter().map(|&c| f64::from(row[c])).sum();
            for x in 0..w {
                out[x] = s;
                if x + 1 < w {
                    s += f64::from(row[ex[x + k]]) - f64::from(row[ex[x]]);
                }
            }
        }
    });
    // Vertical running sums per column strip: each strip's slices of every row.
    let norm = (k * k) as f64;
    let cols_per = w.div_ceil(threads);
    let mut out = vec![0f32; w * h];
    let mut strips: Vec<Vec<&mut [f32]>> = (0..w.div_ceil(cols_per)).map(|_| Vec::new()).collect();
    for row in out.chunks_mut(w) {
        for (strip, part) in strips.iter_mut().zip(row.chunks_mut(cols_per)) {
            strip.push(part);
        }
    }
    par_each(strips, |j, mut rows| {
        let x0 = j * cols_per;
        let width = rows[0].len();
        let mut acc = vec![0f64; width];
        for &q in &ey[..k] {
            for (a, v) in acc.iter_mut().zip(&hsum[q * w + x0..q * w + x0 + width]) {
                *a += v;
            }
        }
        for (y, o) in rows.iter_mut().enumerate() {
            for (o, a) in o.iter_mut().zip(&acc) {
                *o = (a / norm) as f32;
            }
            if y + 1 < h {
                let (add, sub) = (ey[y + k] * w + x0, ey[y] * w + x0);
                for (x, a) in acc.iter_mut().enumerate() {
                    *a += hsum[add + x] - hsum[sub + x];
                }
            }
        }
    });
    out
}

/// `0.5·(filtered + r)`.
pub fn blend(r: &[f32], filtered: &[f32]) -> Vec<f32> {
    r.iter().zip(filtered).map(|(a, b)| 0.5 * (b + a)).collect()
}

/// The normalised map `clip(2·(r′ − min)/(max(r′ − min) + 1e-9) − 1, 0, 1)` and its
/// pixels above `threshold`.
pub fn threshold(blended: &[f32], threshold: f32) -> Vec<u8> {
    let min = blended.iter().copied().fold(f32::INFINITY, f32::min);
    let shifted: Vec<f32> = blended.iter().map(|v| v - min).collect();
    let max = shifted.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    shifted
        .iter()
        .map(|v| {
            let n = (v / (max + 1e-9)) * 2.0 - 1.0;
            (n.clamp(0.0, 1.0) > threshold) as u8
        })
        .collect()
}

/// LangSplat's `smooth`: each pixel becomes the majority value (0 on a tie) of the
/// window rows `max(0, i−3) .. min(i+4, h−1)` and columns likewise (ends exclusive, so
/// the last row and column only count in their neighbours' windows). An empty window
/// (an image 1 pixel high or wide) gives 0.
pub fn majority_vote(mask: &[u8], w: usize, h: usize) -> Vec<u8> {
    majority_vote_threads(mask, w, h, 1)
}

/// [`majority_vote`] with the votes on `threads` threads (integer counts: the same
/// result whatever the thread count).
pub fn majority_vote_threads(mask: &[u8], w: usize, h: usize, threads: usize) -> Vec<u8> {
    // Integral image of the ones.
    let mut ii = vec![0u32; (w + 1) * (h + 1)];
    for y in 0..h {
        for x in 0..w {
            ii[(y + 1) * (w + 1) + x + 1] =
                mask[y * w + x] as u32 + ii[y * (w + 1) + x + 1] + ii[(y + 1) * (w + 1) + x]
                    - ii[y * (w + 1) + x];
        }
    }
    let r = VOTE_RADIUS;
    let mut out = vec![0u8; w * h];
    if w == 0 || h == 0 {
        return out;
    }
    let rows_per = h.div_ceil(threads.clamp(1, h));
    let chunks: Vec<_> = out.chunks_mut(rows_per * w).collect();
    par_each(chunks, |c, chunk| {
        for (dy, row) in chunk.chunks_exact_mut(w).enumerate() {
            let y = c * rows_per + dy;
            let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h.saturating_sub(1)));
            for (x, o) in row.iter_mut().enumerate() {
                let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(w.saturating_sub(1)));
                if y1 <= y0 || x1 <= x0 {
                    continue;
                }
                let ones = ii[y1 * (w + 1) + x1] + ii[y0 * (w + 1) + x0]
                    - ii[y0 * (w + 1) + x1]
                    - ii[y1 * (w + 1) + x0];
                let area = ((y1 - y0) * (x1 - x0)) as u32;
                *o = (ones > area - ones) as u8;
            }
        }
    });
    out
}

/// Intersection over union of two masks (0 when both are empty).
pub fn iou(pred: &[u8], gt: &[u8]) -> f64 {
    let (mut i, mut u) = (0u64, 0u64);
    for (a, b) in pred.iter().zip(gt) {
        let (a, b) = (*a != 0, *b != 0);
        i += (a && b) as u64;
        u += (a || b) as u64;
    }
    if u == 0 { 0.0 } else { i as f64 / u as f64 }
}

/// Index of the first maximum.
pub fn first_max(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// The segmentation of one query across levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Segmentation {
    /// Chosen level (index into the levels given).
    pub level: usize,
    /// `max r′` of every level.
    pub scores: Vec<f32>,
    /// The chosen level's cleaned mask (`[h, w]`, 0/1).
    pub mask: Vec<u8>,
    /// The chosen level's blended map r′.
    pub blended: Vec<f32>,
}

/// The localization of one query across levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Localization {
    /// Chosen level.
    pub level: usize,
    /// `max f` of every level.
    pub scores: Vec<f32>,
    /// Every pixel `(x, y)` of the chosen level at its maximum.
    pub candidates: Vec<(u32, u32)>,
}

fn check(levels: &[Vec<f32>], w: usize, h: usize) -> Result<(), QueryError> {
    if levels.is_empty() || w == 0 || h == 0 || levels.iter().any(|l| l.len() != w * h) {
        return Err(QueryError::Shape(format!(
            "LERF protocol: {} relevancy maps for a {w}x{h} image (each needs {} values)",
            levels.len(),
            w * h
        )));
    }
    Ok(())
}

/// The smoothed map of every level (what both [`segment_filtered`] and
/// [`localize_filtered`] start from).
pub fn smooth_levels(
    protocol: Protocol,
    levels: &[Vec<f32>],
    w: usize,
    h: usize,
) -> Result<Vec<Vec<f32>>, QueryError> {
    check(levels, w, h)?;
    Ok(levels.iter().map(|r| protocol.smooth(r, w, h)).collect())
}

/// Smoothing, threshold and clean-up of every level; chooses the level by `max r′`.
pub fn segment(
    protocol: Protocol,
    levels: &[Vec<f32>],
    w: usize,
    h: usize,
) -> Result<Segmentation, QueryError> {
    let filtered = smooth_levels(protocol, levels, w, h)?;
    Ok(segment_filtered(protocol, levels, &filtered, w, h))
}

/// [`segment`] from the levels' maps and their smoothed versions.
pub fn segment_filtered(
    protocol: Protocol,
    levels: &[Vec<f32>],
    filtered: &[Vec<f32>],
    w: usize,
    h: usize,
) -> Segmentation {
    let blended: Vec<Vec<f32>> = levels
        .iter()
        .zip(filtered)
        .map(|(r, f)| blend(r, f))
        .collect();
    let scores: Vec<f32> = blended
        .iter()
        .map(|b| b.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .collect();
    let level = first_max(&scores);
    let mask = protocol.clean(&threshold(&blended[level], MASK_THRESHOLD), w, h);
    Segmentation {
        level,
        scores,
        mask,
        blended: blended.into_iter().nth(level).unwrap_or_default(),
    }
}

/// Localization: the level with the largest smoothed maximum and every pixel at it.
pub fn localize(
    protocol: Protocol,
    levels: &[Vec<f32>],
    w: usize,
    h: usize,
) -> Result<Localization, QueryError> {
    Ok(localize_filtered(
        &smooth_levels(protocol, levels, w, h)?,
        w,
    ))
}

/// [`localize`] from the levels' smoothed maps.
pub fn localize_filtered(filtered: &[Vec<f32>], w: usize) -> Localization {
    let scores: Vec<f32> = filtered
        .iter()
        .map(|f| f.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .collect();
    let level = first_max(&scores);
    let best = scores[level];
    let candidates = filtered[level]
        .iter()
        .enumerate()
        .filter(|(_, v)| **v == best)
        .map(|(i, _)| ((i % w) as u32, (i / w) as u32))
        .collect();
    Localization {
        level,
        scores,
        candidates,
    }
}

/// True when any candidate lies inside any box `[x1, y1, x2, y2]` (corners in either
/// order, bounds inclusive).
pub fn hit(candidates: &[(u32, u32)], boxes: &[[f64; 4]]) -> bool {
    boxes.iter().any(|b| {
        let (x0, x1) = (b[0].min(b[2]), b[0].max(b[2]));
        let (y0, y1) = (b[1].min(b[3]), b[1].max(b[3]));
        candidates.iter().any(|&(x, y)| {
            let (x, y) = (x as f64, y as f64);
            x >= x0 && x <= x1 && y >= y0 && y <= y1
        })
    })
}

#[cfg(test)]
mod tests;
