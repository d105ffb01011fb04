//! open_clip's evaluation transform for CLIP images: resize the shortest side to 224
//! with Pillow's bicubic filter, centre crop 224×224, scale to [0, 1], normalise with
//! OpenAI's mean and standard deviation; channels first.
//!
//! The resize reproduces Pillow's `Image.resize(size, BICUBIC)` on 8-bit RGB exactly
//! (what torchvision's `Resize` does with a PIL image): a separable convolution,
//! horizontal pass first into an 8-bit image, then vertical; the cubic kernel
//! (a = −0.5) is widened by the scale factor when shrinking (antialiasing); each
//! output's weights are normalised in float64, then rounded to 22-bit fixed point, and
//! sums are rounded and clamped to 0..=255 after each pass.

use std::path::Path;

use crate::ModelError;

/// CLIP's input edge.
pub const SIZE: usize = 224;
/// OpenAI CLIP's per-channel mean (RGB).
pub const MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
/// OpenAI CLIP's per-channel standard deviation (RGB), as published (rounded to f32
/// here as torch rounds it).
#[allow(clippy::excessive_precision)]
pub const STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

/// An 8-bit RGB image, row-major, 3 bytes per pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `[height, width, 3]` bytes.
    pub data: Vec<u8>,
}

impl RgbImage {
    /// Wraps `data` (`[height, width, 3]`); the length must match.
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Result<RgbImage, ModelError> {
        if data.len() != width * height * 3 || width == 0 || height == 0 {
            return Err(ModelError::Shape(format!(
                "an RGB image of {width}×{height} needs {} bytes, got {}",
                width * height * 3,
                data.len()
            )));
        }
        Ok(RgbImage {
            width,
            height,
            data,
        })
    }

    /// Decodes a PNG or JPEG file (as RGB; grey and alpha are converted the way
    /// Pillow's `convert("RGB")` does for opaque images).
    pub fn open(path: &Path) -> Result<RgbImage, ModelError> {
        let img = image::ImageReader::open(path)
            .map_err(|e| ModelError::io(path, e))?
            .with_guessed_format()
            .map_err(|e| ModelError::io(path, e))?
            .decode()
            .map_err(|e| ModelError::image(path, format!("cannot decode the image: {e}")))?;
        let rgb = img.into_rgb8();
        let (w, h) = (rgb.width() as usize, rgb.height() as usize);
        RgbImage::new(w, h, rgb.into_raw()).map_err(|e| ModelError::image(path, e.to_string()))
    }

    /// The `w`×`h` region at (`left`, `top`), which must lie inside the image.
    pub fn crop(&self, left: usize, top: usize, w: usize, h: usize) -> RgbImage {
        assert!(
            left + w <= self.width && top + h <= self.height,
            "crop inside the image"
        );
        let mut data = Vec::with_capacity(w * h * 3);
        for y in top..top + h {
            let row = (y * self.width + left) * 3;
            data.extend_from_slice(&self.data[row..row + w * 3]);
        }
        RgbImage {
            width: w,
            height: h,
            data,
        }
    }
}

/// Pillow's bicubic kernel (a = −0.5).
fn bicubic(x: f64) -> f64 {
    let a = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * a
    } else {
        0.0
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Per output pixel: the first input pixel and the 22-bit fixed-point weights.
struct Coeffs {
    first: Vec<usize>,
    weights: Vec<Vec<i32>>,
}

/// Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for `in_size` → `out_size`.
fn coeffs(in_size: usize, out_size: usize) -> Coeffs {
    let support_base = 2.0;
    let scale = in_size as f32 as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = support_base * filterscale;
    let mut first = Vec::with_capacity(out_size);
    let mut weights = Vec::with_capacity(out_size);
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's (int) truncates towards zero.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let n = xmax.saturating_sub(xmin);
        let mut k: Vec<f64> = (0..n)
            .map(|x| bicubic((x as f64 + xmin as f64 - center + 0.5) * ss))
            .collect();
        let ww: f64 = k.iter().sum();
        if ww != 0.0 {
            k.iter_mut().for_each(|v| *v /= ww);
        }
        let one = (1u32 << PRECISION_BITS) as f64;
        let fixed = k
            .iter()
            .map(|&v| {
                if v < 0.0 {
                    (-0.5 + v * one) as i32
                } else {
                    (0.5 + v * one) as i32
                }
            })
            .collect();
        first.push(xmin);
        weights.push(fixed);
    }
    Coeffs { first, weights }
}

fn clip8(v: i64) -> u8 {
    if v >= (1i64 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// Pillow's `Image.resize((width, height), Image.BICUBIC)` of an 8-bit RGB image.
pub fn resize_bicubic(src: &RgbImage, width: usize, height: usize) -> RgbImage {
    assert!(width > 0 && height > 0, "resize to an empty image");
    let horizontal = width != src.width;
    let vertical = height != src.height;
    let cv = coeffs(src.height, height);
    let mut img = src.clone();
    let mut row_offset = 0usize;
    if horizontal {
        // Only the rows the vertical pass reads are resampled.
        let (y0, y1) = if vertical {
            let last = height - 1;
            (cv.first[0], cv.first[last] + cv.weights[last].len())
        } else {
            (0, src.height)
        };
        let ch = coeffs(src.width, width);
        let mut data = vec![0u8; (y1 - y0) * width * 3];
        let half = 1i64 << (PRECISION_BITS - 1);
        for y in y0..y1 {
            let row = &src.data[y * src.width * 3..(y + 1) * src.width * 3];
            for xx in 0..width {
                let (x0, k) = (ch.first[xx], &ch.weights[xx]);
                let mut s = [half; 3];
                for (i, &w) in k.iter().enumerate() {
                    let p = &row[(x0 + i) * 3..(x0 + i) * 3 + 3];
                    for (acc, &v) in s.iter_mut().zip(p) {
                        *acc += v as i64 * w as i64;
                    }
                }
                let o = ((y - y0) * width + xx) * 3;
                for (d, &acc) in data[o..o + 3].iter_mut().zip(&s) {
                    *d = clip8(acc);
                }
            }
        }
        img = RgbImage {
            width,
            height: y1 - y0,
            data,
        };
        row_offset = y0;
    }
    if !vertical {
        return img;
    }
    let mut data = vec![0u8; height * width * 3];
    let half = 1i64 << (PRECISION_BITS - 1);
    for yy in 0..height {
        let (y0, k) = (cv.first[yy] - row_offset, &cv.weights[yy]);
        for xx in 0..width {
            let mut s = [half; 3];
            for (i, &w) in k.iter().enumerate() {
                let o = ((y0 + i) * width + xx) * 3;
                for (acc, &v) in s.iter_mut().zip(&img.data[o..o + 3]) {
                    *acc += v as i64 * w as i64;
                }
            }
            let o = (yy * width + xx) * 3;
            for (d, &acc) in data[o..o + 3].iter_mut().zip(&s) {
                *d = clip8(acc);
            }
        }
    }
    RgbImage {
        width,
        height,
        data,
    }
}

/// torchvision's `Resize(224)` size: the shortest side becomes `size`, the other
/// `int(size · long / short)`.
pub fn shortest_side_size(width: usize, height: usize, size: usize) -> (usize, usize) {
    let (short, long) = if width <= height {
        (width, height)
    } else {
        (height, width)
    };
    let new_long = (size as f64 * long as f64 / short as f64) as usize;
    if width <= height {
        (size, new_long)
    } else {
        (new_long, size)
    }
}

/// torchvision's `CenterCrop` offset: `int(round((len − size) / 2))`, Python's round
/// (halves to even).
fn centre_offset(len: usize, size: usize) -> usize {
    ((len as f64 - size as f64) / 2.0)
        .round_ties_even()
        .max(0.0) as usize
}

/// `[3, 224, 224]` floats of a 224×224 RGB image: /255, minus mean, over std
/// (float32 arithmetic, as torchvision's `ToTensor` and `Normalize`).
pub fn normalize(img: &RgbImage) -> Vec<f32> {
    let n = img.width * img.height;
    let mut out = vec![0f32; 3 * n];
    for (i, px) in img.data.chunks_exact(3).enumerate() {
        for (c, &v) in px.iter().enumerate() {
            out[c * n + i] = (v as f32 / 255.0 - MEAN[c]) / STD[c];
        }
    }
    out
}

/// open_clip's evaluation transform: `[3, 224, 224]` floats for `img`.
pub fn clip_pixels(img: &RgbImage) -> Vec<f32> {
    let (w, h) = shortest_side_size(img.width, img.height, SIZE);
    let resized = resize_bicubic(img, w, h);
    let (left, top) = (centre_offset(w, SIZE), centre_offset(h, SIZE));
    normalize(&resized.crop(left, top, SIZE, SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_rounding_of_the_crop_offset() {
        assert_eq!(centre_offset(224, 224), 0);
        assert_eq!(centre_offset(229, 224), 2); // 2.5 → 2
        assert_eq!(centre_offset(231, 224), 4); // 3.5 → 4
        assert_eq!(centre_offset(298, 224), 37);
        assert_eq!(shortest_side_size(504, 378, 224), (298, 224));
    }

    #[test]
    fn a_constant_image_stays_constant_and_weights_sum_to_one() {
        let img = RgbImage::new(37, 23, vec![200; 37 * 23 * 3]).unwrap();
        let r = resize_bicubic(&img, 11, 50);
        assert!(r.data.iter().all(|&v| v == 200));
        for (n, m) in [(504, 298), (378, 224), (100, 224)] {
            let c = coeffs(n, m);
            for w in &c.weights {
                let s: i64 = w.iter().map(|&v| v as i64).sum();
                assert!((s - (1 << PRECISION_BITS)).abs() <= w.len() as i64, "{s}");
            }
        }
    }
}
