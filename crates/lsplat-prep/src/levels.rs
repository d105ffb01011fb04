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
use crate::mask_nms::{MaskNmsParams, mask_nms};
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
    let p = MaskNmsParams {
        iou_thr: cfg.mask_nms_iou,
        score_thr: cfg.mask_nms_score,
        inner_thr: cfg.mask_nms_inner,
    };
    let out: Vec<Vec<LevelMask>> = lists
        .into_iter()
        .map(|list| {
            let masks: Vec<&BitMask> = list.iter().map(|m| &m.mask).collect();
            let scores: Vec<f64> = list
                .iter()
                .map(|m| {
                    let r = &generated.records[m.record];
                    r.stability as f64 * r.iou as f64
                })
                .collect();
            let keep = mask_nms(&masks, &scores, &p, cfg.nms_max_dim);
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
    masks: &[LevelMask],
    clip: &mut dyn ClipEncoder,
    batch: usize,
    threads: usize,
) -> Result<Vec<f32>, PrepError> {
    let dim = clip.dim();
    let mut out = Vec::with_capacity(masks.len() * dim);
    for chunk in masks.chunks(batch.max(1)) {
        let crops = par::map(chunk, threads, || (), |_, m| clip_crop(image, &m.mask));
        let f = clip.encode(&crops)?;
        if f.len() != chunk.len() * dim {
            return Err(PrepError::model(
                "CLIP image encoder",
                format!(
                    "returned {} values for {} crops of dimension {dim}",
                    f.len(),
                    chunk.len()
                ),
            ));
        }
        for row in f.chunks_exact(dim) {
            let n = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            if !(n.is_finite() && n > 0.0) {
                return Err(PrepError::model(
                    "CLIP image encoder",
                    format!("returned a feature of length {n}"),
                ));
            }
            out.extend(row.iter().map(|v| half::f16::from_f32(v / n).to_f32()));
        }
    }
    Ok(out)
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
    let mut feats = Vec::new();
    for list in lists {
        feats.extend(features(
            image,
            list,
            clip,
            cfg.clip_batch as usize,
            par::workers(cfg.threads),
        )?);
    }
    timings.clip += t.elapsed().as_secs_f64();
    timings.clip_crops += lists.iter().map(|l| l.len() as u64).sum::<u64>();
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
        dim: clip.dim(),
        lengths: std::array::from_fn(|l| lists[l].len()),
        seg,
        width: w,
        height: h,
    })
}
