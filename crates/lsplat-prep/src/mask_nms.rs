//! LangSplat's `mask_nms` (its `masks_update` step, iou 0.8, score 0.7, inner 0.5):
//! masks sorted by score (stability × predicted IoU); a mask is dropped when a
//! higher-scored mask overlaps it with IoU above `iou_thr`, when its score is at most
//! `score_thr`, or when it takes part in a containment pair (one mask ≥ 85 % inside
//! another that it covers < 50 % of), keeping the original's index quirks (the
//! "lower" containment maximum includes the first superdiagonal; a criterion that
//! keeps nothing keeps the three best-scored masks, with the fix the fVDB port made).
//!
//! The fast version works on bit masks: pairs whose boxes do not meet are skipped and
//! an intersection is a popcount over the boxes' common words. When the frame's
//! longest side exceeds `max_dim` (> 0) the overlaps are measured on masks
//! downsampled to that longest side by area averaging (`F.interpolate(mode="area")`,
//! then > 0.5), one mask at a time, as the fVDB port does; `max_dim = 0` measures at
//! full resolution, exactly the original. Ratios are float32 with denominators
//! clamped to at least 1, comparisons as PyTorch makes them (float32 thresholds).

use crate::bitmask::{BitMask, words_per_row};
use crate::boxes::order_desc;
use crate::par;

/// Thresholds of [`mask_nms`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskNmsParams {
    /// IoU above which the lower-scored mask of a pair is dropped.
    pub iou_thr: f64,
    /// Scores at or below this are dropped.
    pub score_thr: f64,
    /// Containment threshold: pairs with `1 − R_ij·R_ji > 1 − inner_thr` drop.
    pub inner_thr: f64,
}

impl MaskNmsParams {
    /// LangSplat's values (0.8, 0.7, 0.5).
    pub const LANGSPLAT: MaskNmsParams = MaskNmsParams {
        iou_thr: 0.8,
        score_thr: 0.7,
        inner_thr: 0.5,
    };
}

/// The pairwise quantities of one ordered pair (float32, as the original).
struct Pair {
    iou: f32,
    /// `1 − R_ij·R_ji` if i contains j (R_ij < 0.5, R_ji ≥ 0.85), else 0.
    inner_ij: f32,
    /// The same for j containing i, stored at [j, i].
    inner_ji: f32,
}

fn pair(inter: u64, ai: f32, aj: f32) -> Pair {
    let inter = inter as f32;
    let union = (ai + aj - inter).max(1.0);
    let (rij, rji) = (inter / ai, inter / aj);
    let v = 1.0 - rij * rji;
    Pair {
        iou: inter / union,
        inner_ij: if rij < 0.5 && rji >= 0.85 { v } else { 0.0 },
        inner_ji: if rji < 0.5 && rij >= 0.85 { v } else { 0.0 },
    }
}

/// The non-zero intersections of each sorted position `i` with the later ones, as
/// `(j, |i ∩ j|)` with `j > i` ascending.
type PairRows = Vec<Vec<(u32, u64)>>;

/// [`PairRows`] from an intersection function, rows computed on `threads` threads.
fn pair_rows(m: usize, threads: usize, inter: impl Fn(usize, usize) -> u64 + Sync) -> PairRows {
    let rows: Vec<usize> = (0..m).collect();
    par::map(
        &rows,
        threads,
        || (),
        |_, &i| {
            (i + 1..m)
                .filter_map(|j| {
                    let n = inter(i, j);
                    (n > 0).then_some((j as u32, n))
                })
                .collect()
        },
    )
}

/// Decides which sorted positions survive, given the pairwise intersections and the
/// areas (sorted order). Only maxima are taken, so the result does not depend on how
/// the rows were computed.
fn decide(scores_sorted: &[f64], areas: &[u64], p: &MaskNmsParams, rows: &PairRows) -> Vec<bool> {
    let m = areas.len();
    let a: Vec<f32> = areas.iter().map(|&v| (v as f32).max(1.0)).collect();
    let mut iou_max = vec![0f32; m];
    let mut inner_u = vec![0f32; m];
    let mut inner_l = vec![0f32; m];
    for (i, row) in rows.iter().enumerate() {
        for &(j, n) in row {
            let j = j as usize;
            let q = pair(n, a[i], a[j]);
            iou_max[j] = iou_max[j].max(q.iou);
            inner_u[j] = inner_u[j].max(q.inner_ij);
            // [j, i] lies below the diagonal: column i's lower maximum.
            inner_l[i] = inner_l[i].max(q.inner_ji);
            // The original's tril(diagonal=1) also reads [i, i+1].
            if j == i + 1 {
                inner_l[j] = inner_l[j].max(q.inner_ij);
            }
        }
    }
    let iou_thr = p.iou_thr as f32;
    let inner_max = (1.0 - p.inner_thr) as f32;
    let keep_iou: Vec<bool> = iou_max.iter().map(|&v| v <= iou_thr).collect();
    let with_fallback = |mut k: Vec<bool>| {
        if !k.iter().any(|&v| v) {
            k.iter_mut().take(3).for_each(|v| *v = true);
        }
        k
    };
    let conf = with_fallback(scores_sorted.iter().map(|&s| s > p.score_thr).collect());
    let u = with_fallback(inner_u.iter().map(|&v| v <= inner_max).collect());
    let l = with_fallback(inner_l.iter().map(|&v| v <= inner_max).collect());
    (0..m)
        .map(|k| keep_iou[k] && conf[k] && u[k] && l[k])
        .collect()
}

/// Sorted positions kept → original indices, ascending (the caller keeps list order).
fn kept(order: &[usize], keep: &[bool]) -> Vec<usize> {
    let mut out: Vec<usize> = order
        .iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(&i, _)| i)
        .collect();
    out.sort_unstable();
    out
}

/// The size masks are measured at: the frame's, or its longest side capped at
/// `max_dim` (rounded half to even, as Python's `round`).
pub fn work_size(width: u32, height: u32, max_dim: u32) -> (u32, u32) {
    let longest = width.max(height);
    if max_dim == 0 || longest <= max_dim {
        return (width, height);
    }
    let s = max_dim as f64 / longest as f64;
    let r = |v: u32| ((v as f64 * s).round_ties_even() as u32).max(1);
    (r(width), r(height))
}

/// Area-averaging downsample to `w × h` followed by `> 0.5`.
pub fn downsample(mask: &BitMask, w: u32, h: u32) -> BitMask {
    let (fw, fh) = (mask.width() as u64, mask.height() as u64);
    if mask.area() == 0 {
        return BitMask::empty(w, h);
    }
    let win = |i: u64, n_in: u64, n_out: u64| (i * n_in / n_out, ((i + 1) * n_in).div_ceil(n_out));
    let [x0, y0, x1, y1] = mask.bbox().map(|v| v as u64);
    // Output rows/columns whose windows meet the box.
    let (oya, oyb) = (
        (y0 * h as u64 / fh).saturating_sub(1),
        ((y1 + 1) * h as u64).div_ceil(fh).min(h as u64),
    );
    let (oxa, oxb) = (
        (x0 * w as u64 / fw).saturating_sub(1),
        ((x1 + 1) * w as u64).div_ceil(fw).min(w as u64),
    );
    let wpr = words_per_row(w);
    let ny = (oyb - oya) as usize;
    let mut rows = vec![0u64; wpr * ny];
    let mut col = vec![0u32; (x1 - x0 + 1) as usize];
    for oy in oya..oyb {
        let (ra, rb) = win(oy, fh, h as u64);
        col.iter_mut().for_each(|c| *c = 0);
        // Each window row's set pixels, found a word at a time.
        let w0 = mask.first_word() as u64 * 64;
        for y in ra.max(y0)..rb.min(y1 + 1) {
            for (k, &word) in mask.row_words(y as u32).iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let x = w0 + k as u64 * 64 + bits.trailing_zeros() as u64;
                    col[(x - x0) as usize] += 1;
                    bits &= bits - 1;
                }
            }
        }
        for ox in oxa..oxb {
            let (ca, cb) = win(ox, fw, w as u64);
            let n: u64 = (ca.max(x0)..cb.min(x1 + 1))
                .map(|x| col[(x - x0) as usize] as u64)
                .sum();
            if 2 * n > (rb - ra) * (cb - ca) {
                rows[(oy - oya) as usize * wpr + (ox / 64) as usize] |= 1 << (ox % 64);
            }
        }
    }
    BitMask::from_frame_rows(w, h, oya as u32, &rows)
}

/// The fast `mask_nms`: indices of the kept masks, ascending. The downsampling and
/// the pairs' intersections run on `threads` threads (the result does not depend on
/// how many).
pub fn mask_nms(
    masks: &[&BitMask],
    scores: &[f64],
    p: &MaskNmsParams,
    max_dim: u32,
    threads: usize,
) -> Vec<usize> {
    assert_eq!(masks.len(), scores.len());
    let Some(first) = masks.first() else {
        return Vec::new();
    };
    let (fw, fh) = (first.width(), first.height());
    let (w, h) = work_size(fw, fh, max_dim);
    if (w, h) == (fw, fh) {
        return mask_nms_at_work_size(masks, scores, p, threads);
    }
    let small = par::map(masks, threads, || (), |_, m| downsample(m, w, h));
    let refs: Vec<&BitMask> = small.iter().collect();
    mask_nms_at_work_size(&refs, scores, p, threads)
}

/// [`mask_nms`] of masks already at the size they are measured at
/// ([`work_size`], [`downsample`]): a caller whose lists share masks downsamples each
/// once.
pub fn mask_nms_at_work_size(
    work: &[&BitMask],
    scores: &[f64],
    p: &MaskNmsParams,
    threads: usize,
) -> Vec<usize> {
    assert_eq!(work.len(), scores.len());
    if work.is_empty() {
        return Vec::new();
    }
    let order = order_desc(scores);
    let work: Vec<&BitMask> = order.iter().map(|&i| work[i]).collect();
    let areas: Vec<u64> = work.iter().map(|m| m.area()).collect();
    let sorted: Vec<f64> = order.iter().map(|&i| scores[i]).collect();
    let rows = pair_rows(work.len(), threads, |i, j| work[i].intersection(work[j]));
    let keep = decide(&sorted, &areas, p, &rows);
    kept(&order, &keep)
}

/// The straightforward version: full-frame byte masks, every pair's intersection and
/// union by a scan of the frame (the original loop). For tests and the benchmark.
pub fn mask_nms_reference(masks: &[Vec<u8>], scores: &[f64], p: &MaskNmsParams) -> Vec<usize> {
    if masks.is_empty() {
        return Vec::new();
    }
    let order = order_desc(scores);
    let ord: Vec<&Vec<u8>> = order.iter().map(|&i| &masks[i]).collect();
    let areas: Vec<u64> = ord
        .iter()
        .map(|m| m.iter().map(|&v| v as u64).sum())
        .collect();
    let sorted: Vec<f64> = order.iter().map(|&i| scores[i]).collect();
    let rows = pair_rows(ord.len(), 1, |i, j| {
        ord[i]
            .iter()
            .zip(ord[j])
            .filter(|(a, b)| **a != 0 && **b != 0)
            .count() as u64
    });
    let keep = decide(&sorted, &areas, p, &rows);
    kept(&order, &keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disc(w: u32, h: u32, cx: f32, cy: f32, r: f32) -> Vec<u8> {
        (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2) < r * r) as u8)
            .collect()
    }

    #[test]
    fn duplicates_contained_masks_and_low_scores_drop() {
        let (w, h) = (80, 60);
        let masks = vec![
            disc(w, h, 30.0, 30.0, 20.0), // big, best score
            disc(w, h, 31.0, 30.0, 20.0), // near duplicate of 0: IoU > 0.8
            disc(w, h, 30.0, 30.0, 6.0),  // inside 0: containment drops it
            disc(w, h, 70.0, 10.0, 6.0),  // apart, low score
            disc(w, h, 70.0, 50.0, 6.0),  // apart, good score
        ];
        let scores = [0.95, 0.9, 0.92, 0.6, 0.8];
        let p = MaskNmsParams::LANGSPLAT;
        let r = mask_nms_reference(&masks, &scores, &p);
        assert_eq!(r, vec![0, 4]);
        let bits: Vec<BitMask> = masks.iter().map(|m| BitMask::from_bytes(w, h, m)).collect();
        let refs: Vec<&BitMask> = bits.iter().collect();
        assert_eq!(mask_nms(&refs, &scores, &p, 0, 1), r);
        assert_eq!(mask_nms(&refs, &scores, &p, 0, 3), r);
    }

    /// Many overlapping masks: the threaded pairs and downsampling give what one
    /// thread gives, and at full resolution what the reference gives.
    #[test]
    fn threads_do_not_change_the_kept_masks() {
        let (w, h) = (96, 64);
        let mut rng = lsplat_core::Rng::new(7);
        let mut masks = Vec::new();
        let mut scores = Vec::new();
        for _ in 0..60 {
            let (cx, cy, r) = (
                rng.range(0.0, 96.0),
                rng.range(0.0, 64.0),
                rng.range(3.0, 28.0),
            );
            masks.push(disc(w, h, cx, cy, r));
            scores.push(rng.range(0.6, 1.0) as f64);
        }
        let bits: Vec<BitMask> = masks.iter().map(|m| BitMask::from_bytes(w, h, m)).collect();
        let refs: Vec<&BitMask> = bits.iter().collect();
        let p = MaskNmsParams::LANGSPLAT;
        let r = mask_nms_reference(&masks, &scores, &p);
        assert!(r.len() > 3 && r.len() < 60, "{r:?}");
        for threads in [1, 2, 5] {
            assert_eq!(mask_nms(&refs, &scores, &p, 0, threads), r);
        }
        let small = mask_nms(&refs, &scores, &p, 40, 1);
        for threads in [2, 5] {
            assert_eq!(mask_nms(&refs, &scores, &p, 40, threads), small);
        }
    }

    /// Discs of many sizes and places (edges included), in frames wider and narrower
    /// than 64-bit words, at several output sizes: every output pixel is the area
    /// mean of its window > 0.5.
    #[test]
    fn downsampling_matches_area_pooling() {
        let mut rng = lsplat_core::Rng::new(3);
        for (w, h, max_dim) in [(37, 23, 16), (200, 131, 97), (150, 301, 128), (64, 64, 33)] {
            for _ in 0..6 {
                let (cx, cy) = (
                    rng.range(-5.0, w as f32 + 5.0),
                    rng.range(-5.0, h as f32 + 5.0),
                );
                let m = disc(w, h, cx, cy, rng.range(1.0, 60.0));
                let b = BitMask::from_bytes(w, h, &m);
                let (dw, dh) = work_size(w, h, max_dim);
                let d = downsample(&b, dw, dh);
                let (w, h) = (w as usize, h as usize);
                for oy in 0..dh as usize {
                    for ox in 0..dw as usize {
                        let (ya, yb) = (oy * h / dh as usize, ((oy + 1) * h).div_ceil(dh as usize));
                        let (xa, xb) = (ox * w / dw as usize, ((ox + 1) * w).div_ceil(dw as usize));
                        let n: usize = (ya..yb)
                            .flat_map(|y| (xa..xb).map(move |x| (x, y)))
                            .map(|(x, y)| m[y * w + x] as usize)
                            .sum();
                        let want = n as f32 / ((yb - ya) * (xb - xa)) as f32 > 0.5;
                        assert_eq!(d.get(ox as u32, oy as u32), want, "{w}x{h}: {ox},{oy}");
                    }
                }
            }
        }
        assert_eq!(work_size(37, 23, 16), (16, 10));
    }
}
