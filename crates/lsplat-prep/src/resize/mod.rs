//! Image resampling exactly as the reference tools do it, so crops, encoder inputs and
//! mask logits agree bit for bit with LangSplat's Python pipeline:
//!
//! - [`cv`]: OpenCV's `cv2.resize(..., INTER_LINEAR)` on `uint8` images (fixed-point
//!   bilinear; an exact 2× reduction becomes OpenCV's `INTER_AREA` fast path). Used for
//!   LangSplat's image resolution rule and for the 224×224 CLIP crops.
//! - [`pil`]: Pillow's `Image.resize(..., BILINEAR)` (antialiased, fixed-point), which
//!   SAM's `ResizeLongestSide.apply_image` uses for the encoder input.
//! - [`logits`]: PyTorch's `F.interpolate(mode="bilinear", align_corners=False)` in
//!   float32, which SAM's `postprocess_masks` applies to the low-resolution mask logits,
//!   and the same on images in `0..1` (EfficientSAM's encoder input, [`logits::stretch`]).
//! - [`cubic`]: PyTorch's `F.interpolate(mode="bicubic", align_corners=False)` in
//!   float32, which EfficientSAM's predictor applies to its mask logits.

pub mod cubic;
pub mod cv;
pub mod logits;
pub mod pil;

/// An 8-bit image with interleaved channels, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image8 {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Channels per pixel.
    pub channels: usize,
    /// `height * width * channels` values.
    pub data: Vec<u8>,
}

impl Image8 {
    /// A black image.
    pub fn zeros(width: usize, height: usize, channels: usize) -> Image8 {
        Image8 {
            width,
            height,
            channels,
            data: vec![0; width * height * channels],
        }
    }

    /// The values of row `y`.
    pub fn row(&self, y: usize) -> &[u8] {
        let n = self.width * self.channels;
        &self.data[y * n..(y + 1) * n]
    }
}
