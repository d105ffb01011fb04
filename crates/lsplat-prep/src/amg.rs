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

use std::sync::Arc;
use std::thread::ScopedJoinHandle;
use std::time::Instant;

use lsplat_core::preprocess::PreprocessConfig;

use crate::bitmask::BitMask;
use crate::boxes::{crop_area, near_crop_edge, nms};
use crate::grid::{Crop, crop_boxes, crop_points, layer_points, point_grid};
use crate::model::stretch_input;
use crate::model::{Decoded, ImageEncoder, InputResize, MaskDecoder, cut, encoder_input};
use crate::resize::Image8;
use crate::resize::cubic::CubicResize;
use crate::resize::logits::{MaskResize, Thresholded};
use crate::{PrepError, Timings, par};

/// One mask that passed the generator's filters.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// The post-processing of `crop`'s `m × m` logits for an encoder input of side
    /// `side` holding the crop at `resized`.
    fn new(
        mode: InputResize,
        m: usize,
        side: usize,
        resized: (usize, usize),
        crop: Crop,
        frame: (u32, u32),
    ) -> Post {
        let [x0, y0, x1, y1] = crop.bbox;
        let size = ((x1 - x0) as usize, (y1 - y0) as usize);
        match mode {
            InputResize::LongestSide => {
                Post::Bilinear(MaskResize::new(m, side, resized, size, (x0, y0), frame))
            }
            InputResize::Stretch => Post::Bicubic(CubicResize::new(m, size, (x0, y0), frame)),
        }
    }

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

/// One decoded batch of a crop, to be made into masks.
struct Batch<'a> {
    d: Decoded,
    post: Arc<Post>,
    /// The batch's prompt points in crop pixels.
    px: &'a [[f64; 2]],
    crop: usize,
    bbox: [u32; 4],
    frame: (u32, u32),
}

impl Batch<'_> {
    /// Thresholds each mask whose predicted IoU passes, and keeps the stable ones that
    /// do not touch an inner crop edge.
    fn masks(&self, cfg: &PreprocessConfig, threads: usize) -> Vec<MaskRecord> {
        let (d, m) = (&self.d, self.d.side);
        let todo: Vec<usize> = (0..self.px.len() * 3)
            .filter(|&i| d.iou[i] > cfg.pred_iou_thresh)
            .collect();
        let done = par::map(&todo, threads, Vec::new, |scratch, &i| {
            let logits = &d.masks[i * m * m..(i + 1) * m * m];
            let th = self.post.apply(logits, cfg.stability_score_offset, scratch);
            let stability = th.above_hi as f32 / th.above_lo as f32;
            (stability >= cfg.stability_score_thresh
                && !near_crop_edge(th.mask.bbox(), self.bbox, self.frame))
            .then_some((th.mask, stability))
        });
        let [x0, y0, ..] = self.bbox;
        todo.iter()
            .zip(done)
            .filter_map(|(&i, res)| {
                let (mask, stability) = res?;
                let p = self.px[i / 3];
                Some(MaskRecord {
                    mask,
                    iou: d.iou[i],
                    stability,
                    crop: self.crop,
                    output: (i % 3) as u8,
                    point: [p[0] + x0 as f64, p[1] + y0 as f64],
                })
            })
            .collect()
    }
}

/// Appends the masks `f` gives, adding the time it took to `timings.masks`.
fn take(out: &mut Generated, timings: &mut Timings, f: impl FnOnce() -> Vec<MaskRecord>) {
    let t = Instant::now();
    out.records.extend(f());
    timings.masks += t.elapsed().as_secs_f64();
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
        let per = cfg.points_per_batch as usize;
        let mut resize: Option<Arc<Post>> = None;
        let first = out.records.len();
        // With the decoder on an accelerator, batch b's masks are made on the CPU while
        // the accelerator decodes batch b + 1 (on the CPU they would share its cores);
        // `timings.masks` is then the wait for them that the decoder did not hide.
        let overlap = cfg.overlap && decoder.on_accelerator();
        std::thread::scope(|scope| -> Result<(), PrepError> {
            let mut pending: Option<ScopedJoinHandle<'_, Vec<MaskRecord>>> = None;
            for (b, pts) in enc_pts.chunks(per).enumerate() {
                let t = Instant::now();
                let d = decoder.decode(&emb, pts)?;
                timings.decoder += t.elapsed().as_secs_f64();
                timings.prompts += pts.len() as u64;
                check(&d, pts.len())?;
                let post = match &resize {
                    Some(r) if r.low() == d.side => r.clone(),
                    _ => resize
                        .insert(Arc::new(Post::new(
                            mode,
                            d.side,
                            side,
                            resized,
                            *crop,
                            (fw, fh),
                        )))
                        .clone(),
                };
                let batch = Batch {
                    d,
                    post,
                    px: &px[b * per..b * per + pts.len()],
                    crop: ci,
                    bbox: crop.bbox,
                    frame: (fw, fh),
                };
                if let Some(h) = pending.take() {
                    take(&mut out, timings, || par::joined(h));
                }
                if overlap {
                    pending = Some(scope.spawn(move || batch.masks(cfg, threads)));
                } else {
                    take(&mut out, timings, || batch.masks(cfg, threads));
                }
            }
            if let Some(h) = pending.take() {
                take(&mut out, timings, || par::joined(h));
            }
            Ok(())
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeSam;

    /// A decoder on an accelerator has each batch's masks made while it decodes the
    /// next: the same records in the same order, and a failing call still ends the
    /// run with its error.
    #[test]
    fn overlapped_batches_give_the_same_masks() {
        let (w, h) = (160usize, 112usize);
        let data = (0..w * h * 3)
            .map(|i| ((i / 3 % w) * 3 + (i / 3 / w) * 2 + i % 3 * 50) as u8)
            .collect();
        let image = Image8 {
            width: w,
            height: h,
            channels: 3,
            data,
        };
        let cfg = PreprocessConfig {
            points_per_side: 8,
            points_per_batch: 7,
            threads: 2,
            ..PreprocessConfig::default()
        };
        let run = |sam: FakeSam| {
            let (mut enc, mut dec) = (sam.clone(), sam);
            let mut t = Timings::default();
            let g = generate(&image, &cfg, &mut enc, &mut dec, &mut t);
            (g, t, dec.calls.1)
        };
        let (plain, t0, calls) = run(FakeSam::default());
        let plain = plain.unwrap();
        let accelerated = FakeSam {
            accelerated: true,
            ..FakeSam::default()
        };
        let (overlapped, t1, _) = run(accelerated.clone());
        let off = PreprocessConfig {
            overlap: false,
            ..cfg.clone()
        };
        let mut t = Timings::default();
        let (mut enc, mut dec) = (accelerated.clone(), accelerated.clone());
        assert_eq!(
            generate(&image, &off, &mut enc, &mut dec, &mut t).unwrap(),
            plain
        );
        assert!(
            calls > 10 && plain.records.len() > 50,
            "{calls} calls, {} masks",
            plain.records.len()
        );
        assert_eq!(overlapped.unwrap(), plain);
        assert_eq!((t1.prompts, t1.encoder_runs), (t0.prompts, t0.encoder_runs));
        let failing = FakeSam {
            fail_at: Some(calls / 2),
            ..accelerated
        };
        let e = run(failing).0.unwrap_err().to_string();
        assert!(e.contains("asked to fail"), "{e}");
    }
}
