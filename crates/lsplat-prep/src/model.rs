//! The neural parts enter through three small traits, so the mask generator and the
//! feature pipeline are plain functions testable with fakes; the ONNX Runtime
//! implementations live beside the command.

use crate::PrepError;
use crate::resize::Image8;
use crate::resize::logits::taps;
use crate::resize::pil::resize_bilinear;

/// An image embedding: whatever the encoder returns, handed back to the decoder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Embedding {
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Values, C order.
    pub data: Vec<f32>,
}

/// How a SAM family turns a crop into its square encoder input, and its mask logits
/// back into a mask at the crop's size (`resize` in a SAM model folder's `sam.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputResize {
    /// SAM (ViT-H/L/B) and MobileSAM: the longest side resized to `S` (Pillow
    /// bilinear) and zero padding ([`encoder_input`]); points scaled by the resize;
    /// logits bilinear to `S`, the padding cut, bilinear to the crop's size.
    #[default]
    LongestSide,
    /// EfficientSAM: the crop stretched to `S × S` ([`stretch_input`]); points scaled
    /// per axis; logits bicubic straight to the crop's size.
    Stretch,
}

/// SAM's image encoder.
pub trait ImageEncoder {
    /// Side `S` of the square input (1024 for SAM).
    fn input_size(&self) -> usize;
    /// How crops become inputs (and logits masks).
    fn resize(&self) -> InputResize {
        InputResize::LongestSide
    }
    /// Encodes one image `[3, S, S]` (channel-major RGB, normalised as the family
    /// does: [`encoder_input`] or [`stretch_input`]).
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

    /// Whether it runs on an accelerator, leaving the CPU free to make one batch's
    /// masks while it decodes the next.
    fn on_accelerator(&self) -> bool {
        false
    }
}

/// CLIP's image tower.
pub trait ClipEncoder {
    /// Feature dimension.
    fn dim(&self) -> usize;
    /// Encodes 224×224 RGB crops; returns `[B, dim]` features (any length: the
    /// pipeline normalises them).
    fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError>;

    /// Whether it runs on an accelerator, leaving the CPU free to cut the next
    /// batch's crops while it encodes one.
    fn on_accelerator(&self) -> bool {
        false
    }
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

/// EfficientSAM's pixel mean and standard deviation (RGB, 0–1 scale).
pub const STRETCH_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// See [`STRETCH_MEAN`].
pub const STRETCH_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// EfficientSAM's encoder input for an RGB crop, as its `preprocess` computes it from
/// `ToTensor()`'s `v / 255` (float32): PyTorch's bilinear `F.interpolate` to
/// `side × side` (`align_corners=False`, no antialiasing, aspect ratio not kept), then
/// `(x − mean) / std`; channel-major `[3, side, side]`.
pub fn stretch_input(crop: &Image8, side: usize) -> Vec<f32> {
    let (w, h) = (crop.width, crop.height);
    let (tx, ty) = (taps(w, side), taps(h, side));
    let mut out = vec![0f32; 3 * side * side];
    let mut rows = vec![0f32; h * side];
    for (c, plane) in out.chunks_exact_mut(side * side).enumerate() {
        for (y, row) in rows.chunks_exact_mut(side).enumerate() {
            let src = crop.row(y);
            let at = |i: u32| src[i as usize * 3 + c] as f32 / 255.0;
            for (v, t) in row.iter_mut().zip(&tx) {
                *v = at(t.i0) * t.l0 + at(t.i1) * t.l1;
            }
        }
        for (dst, t) in plane.chunks_exact_mut(side).zip(&ty) {
            let (r0, r1) = (
                &rows[t.i0 as usize * side..][..side],
                &rows[t.i1 as usize * side..][..side],
            );
            for ((d, a), b) in dst.iter_mut().zip(r0).zip(r1) {
                *d = (a * t.l0 + b * t.l1 - STRETCH_MEAN[c]) / STRETCH_STD[c];
            }
        }
    }
    out
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
