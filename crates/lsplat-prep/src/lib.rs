//! From images to LangSplat language features, natively: SAM's automatic mask
//! generator with LangSplat's settings and its split of SAM's three outputs into the
//! levels s, m, l (and all three pooled as "default"), SAM's small-region clean-up,
//! LangSplat's mask NMS (fast: bit masks, bounded resolution), CLIP crops and
//! features, segmentation maps, and LangSplat's `language_features` files.
//!
//! Every step is a plain function; the neural networks enter through the traits of
//! [`model`], so the whole pipeline is testable with fakes. The arithmetic follows the
//! reference tools where it decides results (see the modules of [`resize`]).

pub mod amg;
pub mod bitmask;
pub mod boxes;
pub mod ccl;
pub mod cleanup;
pub mod crops;
mod error;
pub mod fake;
pub mod grid;
pub mod image;
pub mod levels;
pub mod mask_nms;
pub mod model;
pub mod onnx;
pub mod par;
pub mod resize;
pub mod run;

pub use error::PrepError;

/// Seconds spent per step (summed over calls), and how much work each step had.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// SAM image encoder.
    pub encoder: f64,
    /// SAM prompt decoder.
    pub decoder: f64,
    /// Mask logits to masks: upsampling, thresholds, stability, boxes. With the
    /// decoder on an accelerator they are made while it decodes the next batch, and
    /// this is only the wait for them that the decoder did not hide.
    pub masks: f64,
    /// Box NMS (per crop, between crops) and LangSplat's mask NMS.
    pub nms: f64,
    /// Small-region clean-up and its box NMS.
    pub cleanup: f64,
    /// CLIP crops and features.
    pub clip: f64,
    /// Encoder runs (crops of the image: 5 with LangSplat's one crop layer).
    pub encoder_runs: u64,
    /// Point prompts decoded.
    pub prompts: u64,
    /// Masks whose crops went through CLIP.
    pub clip_crops: u64,
    /// Masks of a later list equal to an earlier list's mask, whose feature was
    /// copied instead of encoded again (their crops would be identical).
    pub clip_reused: u64,
}

impl Timings {
    /// Total seconds.
    pub fn total(&self) -> f64 {
        self.encoder + self.decoder + self.masks + self.nms + self.cleanup + self.clip
    }
}
