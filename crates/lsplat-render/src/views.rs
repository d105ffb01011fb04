//! Rendering per-Gaussian features at whole images, band by band (`render`, `query`
//! and `eval` of the command-line tool, and the Python package). Every band is a run
//! of full tile rows, so it is a contiguous range of image rows; features are uploaded
//! once with a column of ones appended, so each pixel also gets its opacity
//! α = Σ αᵢTᵢ (what empty space and edges look like in pictures).

use lsplat_core::{Camera, Config, Gaussians, TileGrid};
use lsplat_device::{Backend, DeviceError, PixelSet};

use crate::cache::{Scratch, bin, project};

/// Values kept per band (bounds a band's memory to ~64 MB of f32).
const BAND_VALUES: usize = 16 << 20;

/// One band of a rendered image: rows `y0 .. y0 + rows` of width `width`, with
/// `channels` feature values and one opacity per pixel, row-major.
pub struct Band<'a> {
    /// First row.
    pub y0: u32,
    /// Image width.
    pub width: u32,
    /// Features `[rows·width, channels]`.
    pub features: &'a [f32],
    /// Opacity per pixel.
    pub alpha: &'a [f32],
}

/// Per-Gaussian features resident on a device, ready to render any camera.
pub struct Views<'a, B: Backend> {
    dev: &'a B,
    geometry: B::Geometry,
    features: B::Buf<f32>,
    channels: usize,
    tile: u32,
    clip: (f32, f32),
    band_values: usize,
}

impl<'a, B: Backend> Views<'a, B> {
    /// Uploads the splats and `[N, channels]` features (plus a ones column); the tile
    /// size and clip planes are `cfg.render`'s.
    pub fn new(
        dev: &'a B,
        gaussians: &Gaussians,
        features: &[f32],
        channels: usize,
        cfg: &Config,
    ) -> Result<Self, DeviceError> {
        if channels == 0 || features.len() != gaussians.len() * channels {
            return Err(DeviceError::shape(
                "views",
                format!(
                    "{} feature values are not {} Gaussians × {channels} channels",
                    features.len(),
                    gaussians.len()
                ),
            ));
        }
        let mut padded = Vec::with_capacity(features.len() / channels * (channels + 1));
        for row in features.chunks_exact(channels) {
            padded.extend_from_slice(row);
            padded.push(1.0);
        }
        Ok(Views {
            dev,
            geometry: dev.upload_geometry(gaussians)?,
            features: dev.upload(&padded)?,
            channels,
            tile: cfg.render.tile_size,
            clip: (cfg.render.near, cfg.render.far),
            band_values: BAND_VALUES,
        })
    }

    /// Feature channels C.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Renders `cam` band by band, top to bottom, calling `sink` with each band.
    pub fn render<E: From<DeviceError>>(
        &self,
        cam: &Camera,
        mut sink: impl FnMut(Band<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let grid = TileGrid::new(self.tile, cam.width, cam.height);
        let mut scratch = Scratch::<B>::default();
        project(self.dev, &self.geometry, cam, grid, self.clip, &mut scratch)?;
        bin(self.dev, grid, &mut scratch)?;
        let c1 = self.channels + 1;
        let w = cam.width as usize;
        let tile_rows = (self.band_values / (w * self.tile as usize * c1)).max(1) as u32;
        let band_h = tile_rows * self.tile;
        let (mut feats, mut alpha, mut host) = (Vec::new(), Vec::new(), Vec::new());
        let mut out: Option<B::Buf<f32>> = None;
        for y0 in (0..cam.height).step_by(band_h as usize) {
            let y1 = (y0 + band_h).min(cam.height);
            let (order, offsets) = grid.select_pixels(|p| {
                let y = p / cam.width;
                y >= y0 && y < y1
            });
            let set = PixelSet::upload(self.dev, grid, &order, &offsets)?;
            if set.len == 0 {
                continue;
            }
            let buf = match out.take() {
                Some(b) if B::buf_len(&b) >= set.len * c1 => b,
                _ => self.dev.alloc::<f32>(set.len * c1)?,
            };
            let buf = out.insert(buf);
            self.dev.rasterize(
                &scratch.projection,
                &scratch.bins,
                &set,
                &self.features,
                c1,
                buf,
            )?;
            let tiled = self.dev.read_host(buf, &mut host)?;
            let n = (y1 - y0) as usize * w;
            let tiled = &tiled[..set.len * c1];
            feats.clear();
            feats.resize(n * self.channels, 0.0);
            alpha.clear();
            alpha.resize(n, 0.0);
            let base = y0 as usize * w;
            for (i, &p) in order.iter().enumerate() {
                let q = p as usize - base;
                let src = &tiled[i * c1..(i + 1) * c1];
                feats[q * self.channels..(q + 1) * self.channels]
                    .copy_from_slice(&src[..self.channels]);
                alpha[q] = src[self.channels];
            }
            sink(Band {
                y0,
                width: cam.width,
                features: &feats,
                alpha: &alpha,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use lsplat_cpu::CpuBackend;

    use super::*;
    use crate::cache::render_image;

    /// A few hundred seeded Gaussians in front of a 37×45 camera.
    fn scene() -> (Gaussians, Camera) {
        let mut rng = lsplat_core::Rng::new(11);
        let n = 400;
        let mut g = Gaussians {
            means: Vec::new(),
            log_scales: Vec::new(),
            rotations: Vec::new(),
            opacity_logits: Vec::new(),
        };
        for _ in 0..n {
            g.means
                .push([rng.normal() * 0.6, rng.normal() * 0.6, 4.0 + rng.normal()]);
            g.log_scales.push([-2.5 + 0.3 * rng.normal(); 3]);
            g.rotations.push([1.0, 0.0, 0.0, 0.0]);
            g.opacity_logits.push(rng.normal());
        }
        let cam = Camera::from_c2w(
            "c",
            (37, 45),
            (40.0, 40.0, 18.5, 22.5),
            glam::Mat3::IDENTITY,
            glam::Vec3::ZERO,
        );
        (g, cam)
    }

    /// Band by band (here one tile row per band) gives the whole-image render, and the
    /// opacity channel is the render of ones.
    #[test]
    fn bands_assemble_the_whole_image() {
        let (g, cam) = scene();
        let c = 2;
        let feats: Vec<f32> = (0..g.len() * c)
            .map(|i| (i % 7) as f32 * 0.1 - 0.3)
            .collect();
        let dev = CpuBackend::new(1);
        let cfg = Config::default();
        let mut views = Views::new(&dev, &g, &feats, c, &cfg).unwrap();
        views.band_values = 1;
        let (mut got, mut alpha, mut bands) = (Vec::new(), Vec::new(), 0);
        views
            .render(&cam, |b| {
                assert_eq!(b.y0 as usize * 37 * c, got.len());
                got.extend_from_slice(b.features);
                alpha.extend_from_slice(b.alpha);
                bands += 1;
                Ok::<_, DeviceError>(())
            })
            .unwrap();
        assert_eq!(bands, 3, "45 rows in bands of one 16-row tile row");
        let geom = dev.upload_geometry(&g).unwrap();
        let whole = |x: &[f32], c: usize| {
            let buf = dev.upload(x).unwrap();
            render_image(&dev, &geom, &cam, 16, (0.01, 1e10), &buf, c).unwrap()
        };
        assert_eq!(got, whole(&feats, c));
        let ones = vec![1.0; g.len()];
        assert_eq!(alpha, whole(&ones, 1));
        assert!(alpha.iter().any(|a| *a > 0.5));
    }

    #[test]
    fn features_of_the_wrong_size_are_refused() {
        let (g, _) = scene();
        let dev = CpuBackend::new(1);
        let e = Views::new(&dev, &g, &[0.0; 5], 2, &Config::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("400 Gaussians × 2 channels"), "{e}");
    }
}
