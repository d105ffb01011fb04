//! Settings of `lsplat-engine preprocess` (the `[preprocess]` section): SAM's
//! automatic mask generator with LangSplat's values, LangSplat's mask NMS, the fast
//! NMS resolution and batch sizes.

use lsplat_config_derive::Describe;
use serde::{Deserialize, Serialize};

use crate::CoreError;

/// From images to LangSplat language features (`lsplat-engine preprocess`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct PreprocessConfig {
    /// Prompt points per side of each crop's regular grid (LangSplat: 32).
    #[config(range = ">= 1")]
    pub points_per_side: u32,
    /// Point prompts per decoder call (SAM: 64).
    #[config(range = ">= 1")]
    pub points_per_batch: u32,
    /// Masks whose predicted IoU is at or below this are dropped (LangSplat: 0.7).
    #[config(range = "[0, 1]")]
    pub pred_iou_thresh: f32,
    /// Masks whose stability score is below this are dropped (LangSplat: 0.85).
    #[config(range = "[0, 1]")]
    pub stability_score_thresh: f32,
    /// Logit offset of the stability score (SAM: 1.0).
    #[config(range = ">= 0")]
    pub stability_score_offset: f32,
    /// Box IoU above which a crop's lower-IoU duplicate is dropped (LangSplat: 0.7).
    #[config(range = "[0, 1]")]
    pub box_nms_thresh: f64,
    /// Crop layers beyond the whole image (LangSplat: 1, i.e. 2×2 crops).
    #[config(range = "[0, 4]")]
    pub crop_n_layers: u32,
    /// Box IoU of the NMS between crops, which prefers smaller crops (SAM: 0.7).
    #[config(range = "[0, 1]")]
    pub crop_nms_thresh: f64,
    /// Overlap of neighbouring crops as a fraction of the short side (SAM: 512/1500).
    #[config(range = "[0, 1)")]
    pub crop_overlap_ratio: f64,
    /// Points per side shrink by this factor per crop layer (LangSplat: 1).
    #[config(range = ">= 1")]
    pub crop_n_points_downscale_factor: u32,
    /// Holes and islands smaller than this many pixels are removed (LangSplat: 100;
    /// 0 disables the clean-up).
    pub min_mask_region_area: u32,
    /// LangSplat's `mask_nms` IoU threshold (0.8).
    #[config(range = "[0, 1]")]
    pub mask_nms_iou: f64,
    /// LangSplat's `mask_nms` score threshold (0.7): score = stability × predicted IoU.
    #[config(range = "[0, 1]")]
    pub mask_nms_score: f64,
    /// LangSplat's `mask_nms` containment threshold (0.5).
    #[config(range = "[0, 1]")]
    pub mask_nms_inner: f64,
    /// Longest side at which `mask_nms` measures overlaps (masks are area-downsampled
    /// to it); 0 = full resolution, exactly the original.
    pub nms_max_dim: u32,
    /// Crops per CLIP call.
    #[config(range = ">= 1")]
    pub clip_batch: u32,
    /// The CLIP image encoder's file in the CLIP folder: `image.onnx` (float32, the
    /// default), or an opt-in variant such as `image.int8.onnx` from
    /// scripts/quantize_clip.py (ONNX Runtime's dynamic int8 quantisation: features within
    /// cosine 0.9986 of float32 on ViT-B/16 with random weights, less CPU time — it
    /// changes the features; docs/PERFORMANCE.md).
    pub clip_image_file: String,
    /// Worker threads of the mask post-processing (0 = all hardware threads).
    pub threads: u32,
    /// With SAM's decoder or CLIP on an accelerator, make one batch's masks (cut the
    /// next batch's crops) on the CPU while the accelerator runs the next (this) one.
    /// No effect on the CPU, whose cores both would share; the output is the same.
    pub overlap: bool,
}

impl Default for PreprocessConfig {
    fn default() -> Self {
        PreprocessConfig {
            points_per_side: 32,
            points_per_batch: 64,
            pred_iou_thresh: 0.7,
            stability_score_thresh: 0.85,
            stability_score_offset: 1.0,
            box_nms_thresh: 0.7,
            crop_n_layers: 1,
            crop_nms_thresh: 0.7,
            crop_overlap_ratio: 512.0 / 1500.0,
            crop_n_points_downscale_factor: 1,
            min_mask_region_area: 100,
            mask_nms_iou: 0.8,
            mask_nms_score: 0.7,
            mask_nms_inner: 0.5,
            nms_max_dim: 1024,
            clip_batch: 64,
            clip_image_file: "image.onnx".into(),
            threads: 0,
            overlap: true,
        }
    }
}

impl PreprocessConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), CoreError> {
        let bad = |key: &str, problem: String| {
            Err(CoreError::BadValue {
                key: format!("preprocess.{key}"),
                problem,
            })
        };
        for (key, v) in [
            ("points_per_side", self.points_per_side),
            ("points_per_batch", self.points_per_batch),
            (
                "crop_n_points_downscale_factor",
                self.crop_n_points_downscale_factor,
            ),
            ("clip_batch", self.clip_batch),
        ] {
            if v == 0 {
                return bad(key, "must be at least 1".into());
            }
        }
        if self.crop_n_layers > 4 {
            return bad("crop_n_layers", format!("{} exceeds 4", self.crop_n_layers));
        }
        let layers = self
            .crop_n_points_downscale_factor
            .checked_pow(self.crop_n_layers);
        if layers.is_none_or(|f| self.points_per_side / f == 0) {
            return bad(
                "points_per_side",
                format!(
                    "{} leaves no point in crop layer {} (downscale factor {})",
                    self.points_per_side, self.crop_n_layers, self.crop_n_points_downscale_factor
                ),
            );
        }
        for (key, v) in [
            ("pred_iou_thresh", self.pred_iou_thresh as f64),
            ("stability_score_thresh", self.stability_score_thresh as f64),
            ("box_nms_thresh", self.box_nms_thresh),
            ("crop_nms_thresh", self.crop_nms_thresh),
            ("mask_nms_iou", self.mask_nms_iou),
            ("mask_nms_score", self.mask_nms_score),
            ("mask_nms_inner", self.mask_nms_inner),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(key, format!("{v} is not in [0, 1]"));
            }
        }
        if !(0.0..1.0).contains(&self.crop_overlap_ratio) {
            return bad(
                "crop_overlap_ratio",
                format!("{} is not in [0, 1)", self.crop_overlap_ratio),
            );
        }
        if !(self.stability_score_offset.is_finite() && self.stability_score_offset >= 0.0) {
            return bad(
                "stability_score_offset",
                format!("{} must be finite and ≥ 0", self.stability_score_offset),
            );
        }
        if self.clip_image_file.trim().is_empty() {
            return bad(
                "clip_image_file",
                "is empty (the default is image.onnx)".into(),
            );
        }
        if self.nms_max_dim != 0 && self.nms_max_dim < 16 {
            return bad(
                "nms_max_dim",
                format!("{} is below 16 (0 = full resolution)", self.nms_max_dim),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_langsplats_and_bad_values_are_named() {
        let c = PreprocessConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(
            (c.points_per_side, c.crop_n_layers, c.min_mask_region_area),
            (32, 1, 100)
        );
        let e = PreprocessConfig {
            pred_iou_thresh: 1.5,
            ..c.clone()
        };
        assert!(
            e.validate()
                .unwrap_err()
                .to_string()
                .contains("preprocess.pred_iou_thresh")
        );
        let e = PreprocessConfig {
            points_per_side: 2,
            crop_n_points_downscale_factor: 4,
            ..c
        };
        assert!(e.validate().is_err());
    }
}
