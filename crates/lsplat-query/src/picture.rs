//! Pictures a person can look at: feature images as RGB (3-D codes directly, a shared
//! PCA projection for more channels), relevancy heat maps (turbo), and PNG encoding.
//!
//! Rendered features are premultiplied by the pixel's opacity α (compositing has no
//! background), so a pixel's colour is computed from `f/α` and multiplied by α again:
//! empty space is black and edges fade as they do in the render.

use lsplat_core::Rng;
use lsplat_cpu::gemm::{MatRef, gemm};

use crate::QueryError;

/// Largest number of rows a PCA is fitted on (an even stride through the data).
pub const PCA_SAMPLE: usize = 65_536;
/// Opacity below which a pixel is drawn black.
const ALPHA_MIN: f32 = 1e-6;

/// How features become colours.
#[derive(Clone, Debug, PartialEq)]
pub enum Colouring {
    /// Up to 3 channels in [−1, 1] shown as RGB `0.5·f + 0.5` (missing channels 0.5).
    Codes {
        /// Channels.
        dim: usize,
    },
    /// Three principal axes; each projection mapped from [lo, hi] to [0, 1].
    Pca {
        /// Channels.
        dim: usize,
        /// Mean of the fitted rows.
        mean: Vec<f32>,
        /// Axes `[3, dim]`, unit, orthogonal.
        axes: Vec<f32>,
        /// 1st percentile of each projection.
        lo: [f32; 3],
        /// 99th percentile of each projection.
        hi: [f32; 3],
    },
}

impl Colouring {
    /// Codes for `dim ≤ 3`; otherwise a PCA fitted on `rows` (`[n, dim]`, e.g. the
    /// per-Gaussian features, so every camera shares one projection).
    pub fn fit(rows: &[f32], dim: usize) -> Colouring {
        if dim <= 3 {
            return Colouring::Codes { dim };
        }
        let n = rows.len() / dim;
        let stride = n.div_ceil(PCA_SAMPLE).max(1);
        let sample: Vec<f32> = rows
            .chunks_exact(dim)
            .step_by(stride)
            .flatten()
            .copied()
            .collect();
        let m = sample.len() / dim;
        let mut mean = vec![0f64; dim];
        for r in sample.chunks_exact(dim) {
            for (a, v) in mean.iter_mut().zip(r) {
                *a += *v as f64;
            }
        }
        let mean: Vec<f32> = mean.iter().map(|v| (v / m.max(1) as f64) as f32).collect();
        let centred: Vec<f32> = sample
            .chunks_exact(dim)
            .flat_map(|r| r.iter().zip(&mean).map(|(v, mu)| v - mu))
            .collect();
        let mut cov = vec![0f32; dim * dim];
        let x = MatRef::new(&centred, m, dim);
        gemm(1.0, x.t(), x, 0.0, &mut cov);
        let axes = top_axes(&cov, dim, 3);
        let mut proj = vec![0f32; m * 3];
        gemm(1.0, x, MatRef::new(&axes, 3, dim).t(), 0.0, &mut proj);
        let (mut lo, mut hi) = ([0f32; 3], [1f32; 3]);
        for k in 0..3 {
            let mut v: Vec<f32> = proj.iter().skip(k).step_by(3).copied().collect();
            v.sort_by(f32::total_cmp);
            let at = |q: f64| v[((v.len().saturating_sub(1)) as f64 * q).round() as usize];
            if !v.is_empty() {
                lo[k] = at(0.01);
                hi[k] = at(0.99).max(lo[k] + 1e-6);
            }
        }
        Colouring::Pca {
            dim,
            mean,
            axes,
            lo,
            hi,
        }
    }

    /// Channels expected.
    pub fn dim(&self) -> usize {
        match self {
            Colouring::Codes { dim } | Colouring::Pca { dim, .. } => *dim,
        }
    }

    /// RGB8 of `[pixels, dim]` premultiplied features with their opacities.
    pub fn rgb(&self, features: &[f32], alpha: &[f32]) -> Vec<u8> {
        let dim = self.dim();
        let mut out = Vec::with_capacity(alpha.len() * 3);
        for (f, &a) in features.chunks_exact(dim).zip(alpha) {
            if a <= ALPHA_MIN {
                out.extend([0, 0, 0]);
                continue;
            }
            let c: [f32; 3] = match self {
                Colouring::Codes { .. } => {
                    let mut c = [0.5f32; 3];
                    for (k, v) in f.iter().take(3).enumerate() {
                        c[k] = 0.5 * v / a + 0.5;
                    }
                    c
                }
                Colouring::Pca {
                    mean, axes, lo, hi, ..
                } => {
                    let mut c = [0f32; 3];
                    for k in 0..3 {
                        let ax = &axes[k * dim..(k + 1) * dim];
                        let p: f32 = f
                            .iter()
                            .zip(mean)
                            .zip(ax)
                            .map(|((v, mu), w)| (v / a - mu) * w)
                            .sum();
                        c[k] = (p - lo[k]) / (hi[k] - lo[k]);
                    }
                    c
                }
            };
            let a = a.min(1.0);
            out.extend(c.map(|v| round_u8(v.clamp(0.0, 1.0) * a * 255.0)));
        }
        out
    }
}

/// The `k` leading eigenvectors (`[k, dim]`) of a symmetric `[dim, dim]` matrix by
/// seeded subspace iteration; each is signed so its largest component is positive.
pub fn top_axes(sym: &[f32], dim: usize, k: usize) -> Vec<f32> {
    let mut rng = Rng::new(0x9ca);
    let mut q: Vec<f64> = (0..k * dim).map(|_| rng.normal() as f64).collect();
    orthonormalize(&mut q, dim);
    for _ in 0..300 {
        let mut z = vec![0f64; k * dim];
        for a in 0..k {
            for i in 0..dim {
                let row = &sym[i * dim..(i + 1) * dim];
                z[a * dim + i] = row
                    .iter()
                    .zip(&q[a * dim..(a + 1) * dim])
                    .map(|(s, v)| *s as f64 * v)
                    .sum();
            }
        }
        orthonormalize(&mut z, dim);
        q = z;
    }
    for a in q.chunks_exact_mut(dim) {
        let big = a
            .iter()
            .copied()
            .fold(0f64, |m, v| if v.abs() > m.abs() { v } else { m });
        if big < 0.0 {
            a.iter_mut().for_each(|v| *v = -*v);
        }
    }
    q.into_iter().map(|v| v as f32).collect()
}

/// Gram–Schmidt on the rows of `[k, dim]` (a row that vanishes becomes a unit vector
/// orthogonal to the earlier ones where possible).
fn orthonormalize(q: &mut [f64], dim: usize) {
    let k = q.len() / dim;
    for a in 0..k {
        for b in 0..a {
            let (head, tail) = q.split_at_mut(a * dim);
            let qb = &head[b * dim..(b + 1) * dim];
            let qa = &mut tail[..dim];
            let d: f64 = qa.iter().zip(qb).map(|(x, y)| x * y).sum();
            qa.iter_mut().zip(qb).for_each(|(x, y)| *x -= d * y);
        }
        let row = &mut q[a * dim..(a + 1) * dim];
        let n = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        if n > 1e-300 {
            row.iter_mut().for_each(|v| *v /= n);
        } else {
            row.iter_mut().for_each(|v| *v = 0.0);
            row[a % dim] = 1.0;
        }
    }
}

/// `v.round() as u8` (nearest, ties away from zero, saturating, NaN → 0) without a
/// call to libm's `roundf`, which a picture would make three times per pixel.
#[inline(always)]
pub fn round_u8(v: f32) -> u8 {
    // Past 256 every value saturates; below 0 every value gives 0 (the casts saturate
    // and NaN casts to 0, whose fraction is NaN and so not ≥ 0.5).
    let c = if v >= 256.0 { 256.0 } else { v };
    let i = c as u32;
    let r = i + (c - i as f32 >= 0.5) as u32;
    r.min(255) as u8
}

/// The turbo colour map (Google's polynomial approximation), `t` in [0, 1].
pub fn turbo(t: f32) -> [u8; 3] {
    let x = t.clamp(0.0, 1.0) as f64;
    let (x2, x3) = (x * x, x * x * x);
    let (x4, x5) = (x2 * x2, x2 * x3);
    let r = 0.135_721_38 + 4.615_392_6 * x - 42.660_322_58 * x2 + 132.131_082_34 * x3
        - 152.942_393_96 * x4
        + 59.286_379_43 * x5;
    let g = 0.091_402_61 + 2.194_188_39 * x + 4.842_966_58 * x2 - 14.185_033_33 * x3
        + 4.277_298_57 * x4
        + 2.829_566_04 * x5;
    let b = 0.106_673_3 + 12.641_946_08 * x - 60.582_048_36 * x2 + 110.362_767_71 * x3
        - 89.903_109_12 * x4
        + 27.348_249_73 * x5;
    [r, g, b].map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8)
}

/// A heat map of `values` mapped from [lo, hi] through turbo, dimmed where `alpha`
/// (the render's opacity) is low, so empty space stays dark.
pub fn heat_map(values: &[f32], alpha: &[f32], (lo, hi): (f32, f32)) -> Vec<u8> {
    let span = (hi - lo).max(1e-12);
    let mut out = Vec::with_capacity(values.len() * 3);
    for (v, a) in values.iter().zip(alpha) {
        let c = turbo((v - lo) / span);
        let a = a.clamp(0.0, 1.0);
        out.extend(c.map(|x| round_u8(x as f32 * a)));
    }
    out
}

/// LangSplat's picture of a relevancy map: where `r > 0.5` (more relevant than a
/// canonical phrase), turbo of `(r − 0.5)/(max − 0.5)`; elsewhere the feature picture
/// at 30%.
pub fn heat_over(map: &[f32], rgb: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; rgb.len()];
    heat_over_into(map, rgb, heat_top(map), &mut out);
    out
}

/// The top of [`heat_over`]'s colour scale: the map's maximum, at least 0.5.
pub fn heat_top(map: &[f32]) -> f32 {
    map.iter().copied().fold(0.5f32, f32::max)
}

/// [`heat_over`] of a part of the picture, with the scale's top of the whole map
/// ([`heat_top`]), into `out` (`3 × map.len()` bytes).
pub fn heat_over_into(map: &[f32], rgb: &[u8], top: f32, out: &mut [u8]) {
    for ((r, px), o) in map
        .iter()
        .zip(rgb.chunks_exact(3))
        .zip(out.chunks_exact_mut(3))
    {
        if *r > 0.5 {
            o.copy_from_slice(&turbo((r - 0.5) / (top - 0.5).max(1e-6)));
        } else {
            for (o, v) in o.iter_mut().zip(px) {
                *o = round_u8(*v as f32 * 0.3);
            }
        }
    }
}

/// PNG bytes of an RGB8 image.
pub fn png_rgb(width: u32, height: u32, rgb: &[u8]) -> Result<Vec<u8>, QueryError> {
    if rgb.len() != width as usize * height as usize * 3 {
        return Err(QueryError::Shape(format!(
            "{} RGB bytes for a {width}x{height} image",
            rgb.len()
        )));
    }
    let mut buf = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut buf, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc
            .write_header()
            .map_err(|e| QueryError::Png(e.to_string()))?;
        w.write_image_data(rgb)
            .map_err(|e| QueryError::Png(e.to_string()))?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same bytes as `v.round() as u8` over the values pictures make and the
    /// edge cases (ties, saturation, negatives, NaN, infinities).
    #[test]
    fn round_u8_equals_round_then_cast() {
        let mut v = -3.0f32;
        while v < 300.0 {
            for x in [v, v.next_up(), v.next_down()] {
                assert_eq!(round_u8(x), x.round() as u8, "{x}");
            }
            v += 1.0 / 64.0;
        }
        for x in [
            0.5,
            0.49999997,
            254.5,
            255.49998,
            255.5,
            256.0,
            1e30,
            -0.0,
            -0.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(round_u8(x), x.round() as u8, "{x}");
        }
        let mut rng = Rng::new(3);
        for _ in 0..100_000 {
            let x = rng.range(-10.0, 270.0);
            assert_eq!(round_u8(x), x.round() as u8, "{x}");
        }
    }

    #[test]
    fn pca_finds_the_dominant_axes() {
        // Points spread along e2 (σ 3), e0 (σ 2) and e4 (σ 1) in 6-D.
        let mut rng = Rng::new(1);
        let dim = 6;
        let mut rows = Vec::new();
        for _ in 0..4000 {
            let mut r = vec![0.2f32; dim];
            r[2] += 3.0 * rng.normal();
            r[0] += 2.0 * rng.normal();
            r[4] += rng.normal();
            rows.extend(r);
        }
        let Colouring::Pca { axes, mean, .. } = Colouring::fit(&rows, dim) else {
            panic!("PCA expected for 6 channels");
        };
        for (k, want) in [2, 0, 4].into_iter().enumerate() {
            assert!(
                axes[k * dim + want] > 0.99,
                "axis {k}: {:?}",
                &axes[k * dim..]
            );
        }
        assert!((mean[1] - 0.2).abs() < 1e-5);
        // Zero opacity is black; full opacity uses the whole range.
        let c = Colouring::fit(&rows, dim);
        let rgb = c.rgb(&rows[..2 * dim], &[0.0, 1.0]);
        assert_eq!(&rgb[..3], &[0, 0, 0]);
    }

    #[test]
    fn codes_are_shown_as_rgb_and_pngs_decode() {
        let c = Colouring::fit(&[], 3);
        // A unit code (1, 0, −1) at opacity 1 and at opacity 0.5 (premultiplied).
        let rgb = c.rgb(&[1.0, 0.0, -1.0, 0.5, 0.0, -0.5], &[1.0, 0.5]);
        assert_eq!(rgb, vec![255, 128, 0, 128, 64, 0]);
        let png = png_rgb(2, 1, &rgb).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(png));
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (2, 1));
        assert_eq!(&buf[..6], &rgb[..]);
        assert!(png_rgb(3, 1, &rgb).is_err());
        // Turbo runs dark blue → green → dark red.
        let (a, m, z) = (turbo(0.15), turbo(0.5), turbo(0.95));
        assert!(
            a[2] > a[0] && m[1] > m[0] && m[1] > m[2] && z[0] > z[2],
            "{a:?} {m:?} {z:?}"
        );
    }
}
