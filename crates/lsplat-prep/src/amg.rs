//! SAM's automatic mask generator as LangSplat's fork runs it
//! (`SamAutomaticMaskGenerator` with points_per_side 32, pred_iou_thresh 0.7,
//! stability 0.85, crop_n_layers 1, …): for every crop, encode it, decode batches of
//! single-point prompts, and split each prompt's three masks into the lists `s`, `m`,
//! `l` (output 0, 1, 2) and `default` (all three). Each list is filtered the same way
//! — predicted IoU, stability score, boxes at an inner crop edge — then deduplicated
//! per crop by box NMS on the predicted IoU, and across crops by box NMS preferring
//! smaller crops. [`crate::levels`] does the clean-up and LangSplat's mask NMS.
//! The encoder's input and the logits' upsampling follow the family
//! ([`InputResize`]: SAM's padding and bilinear, or EfficientSAM's stretch and bicubic).

use std::time::Instant;

use lsplat_core::preprocess::PreprocessConfig;

use crate::bitmask::BitMask;
use crate::boxes::{crop_area, near_crop_edge, nms};
use crate::grid::{crop_boxes, crop_points, layer_points, point_grid};
use crate::model::stretch_input;
use crate::model::{Decoded, ImageEncoder, InputResize, MaskDecoder, cut, encoder_input};
use crate::resize::Image8;
use crate::resize::cubic::CubicResize;
use crate::resize::logits::{MaskResize, Thresholded};
use crate::{PrepError, Timings, par};

/// One mask that passed the generator's filters.
#[derive(Clone, Debug)]
pub struct MaskRecord {
    /// The mask in the frame.
    pub mask: BitMask,
    /// The decoder's predicted IoU.
    pub iou: f32,
    /// Stability score (float32, as SAM computes it).
    pub stability: f32,
    /// Index of its crop.
    pub crop: usize,
    /// Which of the three outputs (0 = s, 1 = m, 2 = l).
    pub output: u8,
    /// The prompt point in frame pixels.
    pub point: [f64; 2],
}

/// The generator's output: the records and the four lists (default, s, m, l) of
/// record indices, in SAM's order after the NMS between crops.
#[derive(Clone, Debug, Default)]
pub struct Generated {
    /// Every mask kept by some list.
    pub records: Vec<MaskRecord>,
    /// default, s, m, l.
    pub lists: [Vec<usize>; 4],
}

/// Checks a decoder answer's shapes and values.
fn check(d: &Decoded, batch: usize) -> Result<(), PrepError> {
    let bad = |p: String| Err(PrepError::model("mask decoder", p));
    if d.side == 0 || d.masks.len() != batch * 3 * d.side * d.side {
        return bad(format!(
            "returned {} mask values for {batch} prompts, expected {batch}×3×M×M (M = {})",
            d.masks.len(),
            d.side
        ));
    }
    if d.iou.len() != batch * 3 {
        return bad(format!(
            "returned {} IoU predictions for {batch} prompts, expected {}",
            d.iou.len(),
            batch * 3
        ));
    }
    if d.masks.iter().chain(&d.iou).any(|v| !v.is_finite()) {
        return bad("returned a non-finite mask logit or IoU prediction".into());
    }
    Ok(())
}

/// A family's mask post-processing for one crop (see [`InputResize`]).
enum Post {
    Bilinear(MaskResize),
    Bicubic(CubicResize),
}

impl Post {
    fn low(&self) -> usize {
        match self {
            Post::Bilinear(r) => r.low,
            Post::Bicubic(r) => r.low,
        }
    }

    fn apply(&self, logits: &[f32], offset: f32, scratch: &mut Vec<f32>) -> Thresholded {
        match self {
            Post::Bilinear(r) => r.apply(logits, offset, scratch),
            Post::Bicubic(r) => r.apply(logits, offset, scratch),
        }
    }
}

/// Runs the generator on an RGB image.
pub fn generate(
    image: &Image8,
    cfg: &PreprocessConfig,
    encoder: &mut dyn ImageEncoder,
    decoder: &mut dyn MaskDecoder,
    timings: &mut Timings,
) -> Result<Generated, PrepError> {
    cfg.validate()
        .map_err(|e| PrepError::Config(e.to_string()))?;
    let (fw, fh) = (image.width as u32, image.height as u32);
    let crops = crop_boxes(fw, fh, cfg.crop_n_layers, cfg.crop_overlap_ratio);
    let threads = par::workers(cfg.threads);
    let side = encoder.input_size();
    let mode = encoder.resize();
    let mut out = Generated::default();
    let mut per_list: [Vec<usize>; 4] = Default::default();
    for (ci, crop) in crops.iter().enumerate() {
        let [x0, y0, x1, y1] = crop.bbox;
        let (cw, ch) = ((x1 - x0) as usize, (y1 - y0) as usize);
        let t = Instant::now();
        let pixels = cut(image, crop.bbox);
        let (input, resized) = match mode {
            InputResize::LongestSide => encoder_input(&pixels, side),
            InputResize::Stretch => (stretch_input(&pixels, side), (side, side)),
        };
        let emb = encoder.encode(&input)?;
        timings.encoder += t.elapsed().as_secs_f64();
        timings.encoder_runs += 1;
        let n = layer_points(
            cfg.points_per_side as usize,
            cfg.crop_n_points_downscale_factor as usize,
            crop.layer,
        );
        let (px, enc_pts) = crop_points(&point_grid(n), cw, ch, resized);
        let mut resize: Option<Post> = None;
        let first = out.records.len();
        for (b, pts) in enc_pts.chunks(cfg.points_per_batch as usize).enumerate() {
            let t = Instant::now();
            let d = decoder.decode(&emb, pts)?;
            timings.decoder += t.elapsed().as_secs_f64();
            timings.prompts += pts.len() as u64;
            check(&d, pts.len())?;
            let t = Instant::now();
            let m = d.side;
            let r = match &resize {
                Some(r) if r.low() == m => r,
                _ => resize.insert(match mode {
                    InputResize::LongestSide => Post::Bilinear(MaskResize::new(
                        m,
                        side,
                        resized,
                        (cw, ch),
                        (x0, y0),
                        (fw, fh),
                    )),
                    InputResize::Stretch => {
                        Post::Bicubic(CubicResize::new(m, (cw, ch), (x0, y0), (fw, fh)))
                    }
                }),
            };
            let todo: Vec<usize> = (0..pts.len() * 3)
                .filter(|&i| d.iou[i] > cfg.pred_iou_thresh)
                .collect();
            let done = par::map(&todo, threads, Vec::new, |scratch, &i| {
                let logits = &d.masks[i * m * m..(i + 1) * m * m];
                let th = r.apply(logits, cfg.stability_score_offset, scratch);
                let stability = th.above_hi as f32 / th.above_lo as f32;
                (stability >= cfg.stability_score_thresh
                    && !near_crop_edge(th.mask.bbox(), crop.bbox, (fw, fh)))
                .then_some((th.mask, stability))
            });
            for (&i, res) in todo.iter().zip(done) {
                let Some((mask, stability)) = res else {
                    continue;
                };
                let p = px[b * cfg.points_per_batch as usize + i / 3];
                out.records.push(MaskRecord {
                    mask,
                    iou: d.iou[i],
                    stability,
                    crop: ci,
                    output: (i % 3) as u8,
                    point: [p[0] + x0 as f64, p[1] + y0 as f64],
                });
            }
            timings.masks += t.elapsed().as_secs_f64();
        }
        // Duplicates within the crop, per list.
        let t = Instant::now();
        let recs = first..out.records.len();
        for (l, list) in per_list.iter_mut().enumerate() {
            let ids: Vec<usize> = recs
                .clone()
                .filter(|&i| l == 0 || out.records[i].output as usize == l - 1)
                .collect();
            let boxes: Vec<_> = ids.iter().map(|&i| out.records[i].mask.bbox()).collect();
            let scores: Vec<f32> = ids.iter().map(|&i| out.records[i].iou).collect();
            list.extend(
                nms(&boxes, &scores, cfg.box_nms_thresh)
                    .into_iter()
                    .map(|k| ids[k]),
            );
        }
        timings.nms += t.elapsed().as_secs_f64();
    }
    // Duplicates between crops: smaller crops first.
    let t = Instant::now();
    for (l, ids) in per_list.into_iter().enumerate() {
        out.lists[l] = if crops.len() > 1 {
            let boxes: Vec<_> = ids.iter().map(|&i| out.records[i].mask.bbox()).collect();
            let scores: Vec<f32> = ids
                .iter()
                .map(|&i| 1.0 / crop_area(crops[out.records[i].crop].bbox) as f32)
                .collect();
            nms(&boxes, &scores, cfg.crop_nms_thresh)
                .into_iter()
                .map(|k| ids[k])
                .collect()
        } else {
            ids
        };
    }
    timings.nms += t.elapsed().as_secs_f64();
    Ok(out)
}
