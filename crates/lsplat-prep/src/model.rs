//! The neural parts enter through three small traits, so the mask generator and the
//! feature pipeline are plain functions testable with fakes; the ONNX Runtime
//! implementations live beside the command.

use crate::PrepError;
use crate::resize::Image8;
use crate::resize::pil::resize_bilinear;

/// An image embedding: whatever the encoder returns, handed back to the decoder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Embedding {
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Values, C order.
    pub data: Vec<f32>,
}

/// SAM's image encoder.
pub trait ImageEncoder {
    /// Side `S` of the square input (1024 for SAM).
    fn input_size(&self) -> usize;
    /// Encodes one image `[3, S, S]` (channel-major RGB, normalised as SAM does, zero
    /// beyond the resized image).
    fn encode(&mut self, image: &[f32]) -> Result<Embedding, PrepError>;
}

/// The decoder's answer for a batch of `B` single-point prompts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decoded {
    /// Low-resolution mask logits `[B, 3, M, M]` covering the padded `S × S` input.
    pub masks: Vec<f32>,
    /// Side `M` of the low-resolution masks.
    pub side: usize,
    /// Predicted IoU of each mask `[B, 3]`.
    pub iou: Vec<f32>,
}

/// SAM's prompt decoder with multimask output.
pub trait MaskDecoder {
    /// Decodes one single-point (foreground) prompt per entry of `points`, given in
    /// pixels of the encoder's `S × S` input.
    fn decode(&mut self, embedding: &Embedding, points: &[[f32; 2]]) -> Result<Decoded, PrepError>;
}

/// CLIP's image tower.
pub trait ClipEncoder {
    /// Feature dimension.
    fn dim(&self) -> usize;
    /// Encodes 224×224 RGB crops; returns `[B, dim]` features (any length: the
    /// pipeline normalises them).
    fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError>;
}

/// SAM's pixel mean and standard deviation (RGB, 0–255 scale).
pub const PIXEL_MEAN: [f32; 3] = [123.675, 116.28, 103.53];
/// See [`PIXEL_MEAN`].
pub const PIXEL_STD: [f32; 3] = [58.395, 57.12, 57.375];

/// SAM's encoder input for an RGB crop: its longest side resized to `side` (Pillow
/// bilinear), `(v − mean) / std` per channel in float32, zero padding to `side × side`;
/// channel-major `[3, side, side]`. Also returns the resized (width, height).
pub fn encoder_input(crop: &Image8, side: usize) -> (Vec<f32>, (usize, usize)) {
    let (w, h) = crate::grid::preprocess_shape(crop.width, crop.height, side);
    let r = resize_bilinear(crop, w, h);
    let mut out = vec![0f32; 3 * side * side];
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let v = r.data[(y * w + x) * 3 + c] as f32;
                out[c * side * side + y * side + x] = (v - PIXEL_MEAN[c]) / PIXEL_STD[c];
            }
        }
    }
    (out, (w, h))
}

/// The pixels of `bbox` (`[x0, y0, x1, y1]`, exclusive ends) of an image.
pub fn cut(image: &Image8, bbox: [u32; 4]) -> Image8 {
    let [x0, y0, x1, y1] = bbox.map(|v| v as usize);
    let cn = image.channels;
    let mut out = Image8::zeros(x1 - x0, y1 - y0, cn);
    for y in y0..y1 {
        out.data[(y - y0) * (x1 - x0) * cn..(y - y0 + 1) * (x1 - x0) * cn]
            .copy_from_slice(&image.row(y)[x0 * cn..x1 * cn]);
    }
    out
}
