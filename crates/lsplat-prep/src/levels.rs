//! From the generator's four lists to LangSplat's arrays: SAM's small-region clean-up
//! per list, LangSplat's `masks_update` (mask NMS) per list, then per level the CLIP
//! features of the masks' crops (unit length, float16 precision) and the segmentation
//! map (−1 where no mask, later masks over earlier ones, rows numbered across levels
//! in the order default | s | m | l).

use std::collections::HashMap;
use std::time::Instant;

use lsplat_core::preprocess::PreprocessConfig;

use crate::amg::Generated;
use crate::bitmask::BitMask;
use crate::cleanup::{Cleaned, clean_mask, postprocess_small_regions};
use crate::crops::clip_crop;
use crate::mask_nms::{MaskNmsParams, downsample, mask_nms_at_work_size, work_size};
use crate::model::ClipEncoder;
use crate::resize::Image8;
use crate::{PrepError, Timings, par};

/// A mask of a final level list.
#[derive(Clone, Debug)]
pub struct LevelMask {
    /// The cleaned mask.
    pub mask: BitMask,
    /// Index of its generator record.
    pub record: usize,
}

/// Cleans each list and applies LangSplat's mask NMS; returns default, s, m, l.
pub fn finish_lists(
    generated: &Generated,
    cfg: &PreprocessConfig,
    timings: &mut Timings,
) -> [Vec<LevelMask>; 4] {
    let lists = clean_lists(generated, cfg, timings);
    nms_lists(generated, lists, cfg, timings)
}

/// SAM's small-region clean-up of each list (nothing when `min_mask_region_area` is 0).
pub fn clean_lists(
    generated: &Generated,
    cfg: &PreprocessConfig,
    timings: &mut Timings,
) -> [Vec<LevelMask>; 4] {
    let t = Instant::now();
    let threads = par::workers(cfg.threads);
    // Clean every record some list holds once (lists share records).
    let mut ids: Vec<usize> = generated.lists.iter().flatten().copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let min_area = cfg.min_mask_region_area as u64;
    let cleaned: HashMap<usize, Cleaned> = if min_area > 0 {
        let done = par::map(
            &ids,
            threads,
            || (),
            |_, &i| clean_mask(&generated.records[i].mask, min_area),
        );
        ids.iter().copied().zip(done).collect()
    } else {
        HashMap::new()
    };
    let nms_thresh = cfg.box_nms_thresh.max(cfg.crop_nms_thresh);
    let lists: Vec<Vec<LevelMask>> = generated
        .lists
        .iter()
        .map(|list| {
            if min_area == 0 {
                return list
                    .iter()
                    .map(|&r| LevelMask {
                        mask: generated.records[r].mask.clone(),
                        record: r,
                    })
                    .collect();
            }
            let masks: Vec<&BitMask> = list.iter().map(|&r| &generated.records[r].mask).collect();
            postprocess_small_regions(&masks, nms_thresh, |k| cleaned[&list[k]].clone())
                .into_iter()
                .map(|(k, mask)| LevelMask {
                    mask,
                    record: list[k],
                })
                .collect()
        })
        .collect();
    timings.cleanup += t.elapsed().as_secs_f64();
    let mut it = lists.into_iter();
    std::array::from_fn(|_| it.next().unwrap_or_default())
}

/// LangSplat's `masks_update`: [`mask_nms`] on each list, list order kept.
pub fn nms_lists(
    generated: &Generated,
    lists: [Vec<LevelMask>; 4],
    cfg: &PreprocessConfig,
    timings: &mut Timings,
) -> [Vec<LevelMask>; 4] {
    let t = Instant::now();
    let threads = par::workers(cfg.threads);
    let p = MaskNmsParams {
        iou_thr: cfg.mask_nms_iou,
        score_thr: cfg.mask_nms_score,
        inner_thr: cfg.mask_nms_inner,
    };
    // A mask kept by several lists (the default list and one of s/m/l) is the same
    // record's mask in each: downsampled once.
    let mut records: Vec<&LevelMask> = lists.iter().flatten().collect();
    records.sort_unstable_by_key(|m| m.record);
    records.dedup_by_key(|m| m.record);
    let small: Option<HashMap<usize, BitMask>> = records.first().and_then(|m| {
        let (fw, fh) = (m.mask.width(), m.mask.height());
        let (w, h) = work_size(fw, fh, cfg.nms_max_dim);
        ((w, h) != (fw, fh)).then(|| {
            let done = par::map(&records, threads, || (), |_, m| downsample(&m.mask, w, h));
            records.iter().map(|m| m.record).zip(done).collect()
        })
    });
    let out: Vec<Vec<LevelMask>> = lists
        .into_iter()
        .map(|list| {
            let masks: Vec<&BitMask> = list
                .iter()
                .map(|m| small.as_ref().map_or(&m.mask, |s| &s[&m.record]))
                .collect();
            let scores: Vec<f64> = list
                .iter()
                .map(|m| {
                    let r = &generated.records[m.record];
                    r.stability as f64 * r.iou as f64
                })
                .collect();
            let keep = mask_nms_at_work_size(&masks, &scores, &p, threads);
            let mut list: Vec<Option<LevelMask>> = list.into_iter().map(Some).collect();
            keep.into_iter().filter_map(|k| list[k].take()).collect()
        })
        .collect();
    timings.nms += t.elapsed().as_secs_f64();
    let mut it = out.into_iter();
    std::array::from_fn(|_| it.next().unwrap_or_default())
}

/// LangSplat's arrays of one image.
#[derive(Clone, Debug, PartialEq)]
pub struct LangSplatArrays {
    /// `[rows, dim]` unit features (float16 precision), rows default | s | m | l.
    pub features: Vec<f32>,
    /// Feature dimension.
    pub dim: usize,
    /// Rows per level (default, s, m, l).
    pub lengths: [usize; 4],
    /// `[4, height, width]`: −1 or a row of `features`.
    pub seg: Vec<f32>,
    /// Image size.
    pub width: usize,
    /// Image size.
    pub height: usize,
}

/// The segmentation map of one level: −1, then each mask's index painted in order.
pub fn seg_map(masks: &[LevelMask], width: usize, height: usize) -> Vec<i32> {
    let mut map = vec![-1i32; width * height];
    for (i, m) in masks.iter().enumerate() {
        let first = m.mask.first_word() as usize;
        for y in m.mask.rows() {
            for (k, &w) in m.mask.row_words(y).iter().enumerate() {
                let mut bits = w;
                while bits != 0 {
                    let x = (first + k) * 64 + bits.trailing_zeros() as usize;
                    map[y as usize * width + x] = i as i32;
                    bits &= bits - 1;
                }
            }
        }
    }
    map
}

/// CLIP features of the crops of `masks`, `clip_batch` crops per call; unit length,
/// rounded to float16 precision as LangSplat stores them.
pub fn features(
    image: &Image8,
    masks: &[&BitMask],
    clip: &mut dyn ClipEncoder,
    cfg: &PreprocessConfig,
) -> Result<Vec<f32>, PrepError> {
    let dim = clip.dim();
    let threads = par::workers(cfg.threads);
    let mut out = Vec::with_capacity(masks.len() * dim);
    let chunks: Vec<&[&BitMask]> = masks.chunks(cfg.clip_batch.max(1) as usize).collect();
    let cut = |chunk: &[&BitMask]| par::map(chunk, threads, || (), |_, m| clip_crop(image, m));
    // With CLIP on an accelerator, the next batch's crops are cut while it encodes.
    let overlap = cfg.overlap && clip.on_accelerator();
    std::thread::scope(|scope| -> Result<(), PrepError> {
        let mut next = None;
        for (k, chunk) in chunks.iter().enumerate() {
            let crops = match next.take() {
                Some(h) => par::joined(h),
                None => cut(chunk),
            };
            if let Some(&later) = chunks.get(k + 1).filter(|_| overlap) {
                next = Some(scope.spawn(move || cut(later)));
            }
            out.extend(unit_rows(clip.encode(&crops)?, chunk.len(), dim)?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// CLIP's `[n, dim]` answer as unit rows of float16 precision.
fn unit_rows(f: Vec<f32>, n: usize, dim: usize) -> Result<Vec<f32>, PrepError> {
    if f.len() != n * dim {
        return Err(PrepError::model(
            "CLIP image encoder",
            format!(
                "returned {} values for {n} crops of dimension {dim}",
                f.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(f.len());
    for row in f.chunks_exact(dim) {
        let len = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if !(len.is_finite() && len > 0.0) {
            return Err(PrepError::model(
                "CLIP image encoder",
                format!("returned a feature of length {len}"),
            ));
        }
        out.extend(row.iter().map(|v| half::f16::from_f32(v / len).to_f32()));
    }
    Ok(out)
}

/// The distinct masks of the four lists, in order of first appearance, and for every
/// mask of every list (lists one after the other) the index of its distinct mask.
/// A mask kept by `default` is usually kept by its own level too (the lists share the
/// generator's records), and equal masks give equal crops, so each is encoded once.
pub fn distinct_masks(lists: &[Vec<LevelMask>; 4]) -> (Vec<&BitMask>, Vec<usize>) {
    let mut seen: HashMap<&BitMask, usize> = HashMap::new();
    let mut unique = Vec::new();
    let slot = lists
        .iter()
        .flatten()
        .map(|m| {
            *seen.entry(&m.mask).or_insert_with(|| {
                unique.push(&m.mask);
                unique.len() - 1
            })
        })
        .collect();
    (unique, slot)
}

/// The arrays of one image from its four final lists.
pub fn arrays(
    image: &Image8,
    lists: &[Vec<LevelMask>; 4],
    clip: &mut dyn ClipEncoder,
    cfg: &PreprocessConfig,
    timings: &mut Timings,
) -> Result<LangSplatArrays, PrepError> {
    let (w, h) = (image.width, image.height);
    let t = Instant::now();
    let (unique, slot) = distinct_masks(lists);
    let encoded = features(image, &unique, clip, cfg)?;
    let dim = clip.dim();
    let mut feats = Vec::with_capacity(slot.len() * dim);
    for &u in &slot {
        feats.extend_from_slice(&encoded[u * dim..(u + 1) * dim]);
    }
    timings.clip += t.elapsed().as_secs_f64();
    timings.clip_crops += unique.len() as u64;
    timings.clip_reused += (slot.len() - unique.len()) as u64;
    let mut seg = Vec::with_capacity(4 * w * h);
    let mut offset = 0i32;
    for list in lists {
        seg.extend(
            seg_map(list, w, h)
                .into_iter()
                .map(|v| if v < 0 { -1.0 } else { (v + offset) as f32 }),
        );
        offset += list.len() as i32;
    }
    Ok(LangSplatArrays {
        features: feats,
        dim,
        lengths: std::array::from_fn(|l| lists[l].len()),
        seg,
        width: w,
        height: h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeClip;

    /// A CLIP that counts the crops it is given (and may claim an accelerator).
    struct Counting(FakeClip, usize, bool);

    impl ClipEncoder for Counting {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError> {
            self.1 += crops.len();
            self.0.encode(crops)
        }
        fn on_accelerator(&self) -> bool {
            self.2
        }
    }

    fn rect(w: u32, h: u32, [x0, y0, x1, y1]: [u32; 4]) -> BitMask {
        let px: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x0..x1).contains(&x) && (y0..y1).contains(&y)))
            .map(u8::from)
            .collect();
        BitMask::from_bytes(w, h, &px)
    }

    /// Masks shared between lists are encoded once, and every row gets the feature
    /// its own crop would have given (each list's crops encoded alone).
    #[test]
    fn equal_masks_of_different_lists_are_encoded_once() {
        let (w, h) = (40u32, 30u32);
        let mut img = Image8::zeros(w as usize, h as usize, 3);
        for (i, v) in img.data.iter_mut().enumerate() {
            *v = (i * 37 % 251) as u8;
        }
        let m = |b: [u32; 4], record: usize| LevelMask {
            mask: rect(w, h, b),
            record,
        };
        let (a, b, c, d) = (
            [1, 1, 9, 7],
            [5, 3, 30, 20],
            [0, 10, 40, 30],
            [12, 2, 14, 25],
        );
        // default keeps a, b, c; s keeps a and d; m keeps b; l keeps c and b again.
        let lists = [
            vec![m(a, 0), m(b, 1), m(c, 2)],
            vec![m(a, 0), m(d, 3)],
            vec![m(b, 1)],
            vec![m(c, 2), m(b, 4)],
        ];
        let (unique, slot) = distinct_masks(&lists);
        assert_eq!(unique.len(), 4);
        assert_eq!(slot, vec![0, 1, 2, 0, 3, 1, 2, 1]);

        let cfg = PreprocessConfig::default();
        let mut clip = Counting(FakeClip { dim: 8 }, 0, false);
        let mut t = Timings::default();
        let got = arrays(&img, &lists, &mut clip, &cfg, &mut t).unwrap();
        assert_eq!(clip.1, 4, "crops encoded");
        assert_eq!((t.clip_crops, t.clip_reused), (4, 4));
        assert_eq!(got.lengths, [3, 2, 1, 2]);
        let mut want = Vec::new();
        for list in &lists {
            let masks: Vec<&BitMask> = list.iter().map(|m| &m.mask).collect();
            let one = PreprocessConfig {
                clip_batch: 1,
                threads: 1,
                ..PreprocessConfig::default()
            };
            want.extend(features(&img, &masks, &mut FakeClip { dim: 8 }, &one).unwrap());
        }
        assert_eq!(got.features, want);
        // On an accelerator the next batch's crops are cut while one is encoded: the
        // same features, each crop encoded once.
        for (batch, overlap) in [(1, true), (2, true), (3, true), (2, false)] {
            let cfg = PreprocessConfig {
                clip_batch: batch,
                overlap,
                ..PreprocessConfig::default()
            };
            let mut clip = Counting(FakeClip { dim: 8 }, 0, true);
            let overlapped = arrays(&img, &lists, &mut clip, &cfg, &mut t).unwrap();
            assert_eq!((overlapped.features, clip.1), (want.clone(), 4));
        }
        // The rows of equal masks are equal, those of different masks are not.
        let row = |i: usize| &got.features[i * 8..(i + 1) * 8];
        assert_eq!(row(0), row(3));
        assert_ne!(row(0), row(1));
    }
}
