//! Rendering a run's features at whole images, band by band, for `render`, `query` and
//! `eval`. Every band is a run of full tile rows, so it is a contiguous range of image
//! rows; features are uploaded once with a column of ones appended, so each pixel also
//! gets its opacity α = Σ αᵢTᵢ (what empty space and edges look like in pictures).

use anyhow::{Context, Result, bail};
use lsplat_core::config::BackendKind;
use lsplat_core::{Camera, Gaussians, TileGrid};
use lsplat_device::{Backend, PixelSet};
use lsplat_render::cache::{Scratch, bin, project};

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

/// A run's features resident on a device, ready to render any camera.
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
    /// Uploads the splats and `[N, channels]` features (plus a ones column).
    pub fn new(
        dev: &'a B,
        gaussians: &Gaussians,
        features: &[f32],
        channels: usize,
        cfg: &lsplat_core::Config,
    ) -> Result<Self> {
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
    pub fn render(&self, cam: &Camera, mut sink: impl FnMut(Band<'_>) -> Result<()>) -> Result<()> {
        let grid = TileGrid::new(self.tile, cam.width, cam.height);
        let mut scratch = Scratch::<B>::default();
        project(self.dev, &self.geometry, cam, grid, self.clip, &mut scratch)?;
        bin(self.dev, grid, &mut scratch)?;
        let c1 = self.channels + 1;
        let w = cam.width as usize;
        let tile_rows = (self.band_values / (w * self.tile as usize * c1)).max(1) as u32;
        let band_h = tile_rows * self.tile;
        let (mut feats, mut alpha) = (Vec::new(), Vec::new());
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
            let tiled = self.dev.download(buf)?;
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

/// Parses a `--backend` value.
pub fn backend_kind(name: &str) -> Result<BackendKind> {
    Ok(match name {
        "cpu" => BackendKind::Cpu,
        "simt" => BackendKind::Simt,
        "cuda" => BackendKind::Cuda,
        "hip" => BackendKind::Hip,
        other => bail!("--backend {other}: expected cpu, simt, cuda or hip"),
    })
}

/// The cameras named in `names` (all when empty), in the run's order; an unknown name
/// is an error listing the cameras.
pub fn pick_cameras<'c>(cameras: &'c [Camera], names: &[String]) -> Result<Vec<&'c Camera>> {
    if names.is_empty() {
        return Ok(cameras.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            cameras.iter().find(|c| &c.name == n).with_context(|| {
                let all: Vec<&str> = cameras.iter().take(20).map(|c| c.name.as_str()).collect();
                format!(
                    "no camera `{n}` in the run (cameras: {}{})",
                    all.join(", "),
                    if cameras.len() > 20 { ", …" } else { "" }
                )
            })
        })
        .collect()
}

/// A file-name-safe form of a phrase (`coffee mug` → `coffee_mug`).
pub fn file_stem(s: &str) -> String {
    let stem: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // File names are at most 255 bytes: a long phrase keeps its first 100 bytes and
    // gets a hash of the whole phrase, so two long phrases still differ.
    if stem.len() <= 120 {
        return stem;
    }
    let mut cut = 100;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}-{h:016x}", &stem[..cut])
}

/// A run with the device it renders on: the run's configured backend, or `backend`.
pub fn open_run(
    dir: &std::path::Path,
    backend: Option<&str>,
) -> Result<(lsplat_data::run_dir::RunInputs, lsplat_render::Device)> {
    let mut run = crate::plugins::load_run(dir)?;
    if let Some(b) = backend {
        run.config.device.backend = backend_kind(b)?;
    }
    let dev = lsplat_render::Device::open(&run.config.device, &run.config.simt)?;
    Ok((run, dev))
}

#[cfg(test)]
mod tests {
    use lsplat_core::config::DemoConfig;
    use lsplat_render::CpuBackend;

    use super::*;

    /// Band by band (here one tile row per band) gives the whole-image render, and the
    /// opacity channel is the render of ones.
    #[test]
    fn bands_assemble_the_whole_image() {
        let demo = lsplat_data::demo::generate(
            &DemoConfig {
                gaussians: 400,
                cameras: 1,
                width: 37,
                height: 45,
                ..Default::default()
            },
            1,
        )
        .unwrap();
        let (g, cam) = (&demo.scene.gaussians, &demo.scene.cameras[0]);
        let c = 2;
        let feats: Vec<f32> = (0..g.len() * c)
            .map(|i| (i % 7) as f32 * 0.1 - 0.3)
            .collect();
        let dev = CpuBackend::new(1);
        let cfg = lsplat_core::Config::default();
        let mut views = Views::new(&dev, g, &feats, c, &cfg).unwrap();
        views.band_values = 1;
        let (mut got, mut alpha, mut bands) = (Vec::new(), Vec::new(), 0);
        views
            .render(cam, |b| {
                assert_eq!(b.y0 as usize * 37 * c, got.len());
                got.extend_from_slice(b.features);
                alpha.extend_from_slice(b.alpha);
                bands += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(bands, 3, "45 rows in bands of one 16-row tile row");
        let geom = dev.upload_geometry(g).unwrap();
        let whole = |x: &[f32], c: usize| {
            let buf = dev.upload(x).unwrap();
            lsplat_render::cache::render_image(&dev, &geom, cam, 16, (0.01, 1e10), &buf, c).unwrap()
        };
        assert_eq!(got, whole(&feats, c));
        let ones = vec![1.0; g.len()];
        assert_eq!(alpha, whole(&ones, 1));
        assert!(alpha.iter().any(|a| *a > 0.5));
    }
}
