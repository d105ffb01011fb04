//! The problem a solver works on, per-camera targets over the union of the levels'
//! valid pixels, and the per-camera counters that show what fitting touched.

use std::ops::Range;

use lsplat_core::config::{RenderConfig, WeightPrecision};
use lsplat_core::{Camera, TileGrid};
use lsplat_data::ImageLabels;
use lsplat_device::{Backend, PixelSet};
use lsplat_render::{Scratch, cache};

use crate::{Result, SolveError};

/// How cameras are rasterized (from the run's `[render]` settings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderParams {
    /// Tile edge.
    pub tile_size: u32,
    /// Near and far planes.
    pub clip: (f32, f32),
    /// Storage of operator weights.
    pub precision: WeightPrecision,
}

impl From<&RenderConfig> for RenderParams {
    fn from(r: &RenderConfig) -> Self {
        RenderParams {
            tile_size: r.tile_size,
            clip: (r.near, r.far),
            precision: r.operator_precision,
        }
    }
}

/// Frozen geometry, cameras, the labels of each level, and which cameras to fit.
pub struct Problem<'a, B: Backend> {
    /// Resident geometry.
    pub geometry: &'a B::Geometry,
    /// Number of Gaussians N.
    pub gaussians: usize,
    /// Every camera of the scene.
    pub cameras: &'a [Camera],
    /// Labels per level, each aligned with `cameras` (`levels[l][camera]`).
    pub levels: Vec<Vec<&'a ImageLabels>>,
    /// Cameras used for fitting (indices into `cameras`); the others are never
    /// rasterized by a solver.
    pub fit: Vec<usize>,
    /// Rasterization settings.
    pub render: RenderParams,
    /// Told `(cameras done, cameras)` as a pass over the fitted cameras goes on (the
    /// average's pass, the least squares' first pass), for progress reports.
    pub on_camera: Option<&'a (dyn Fn(usize, usize) + Sync)>,
}

impl<B: Backend> Problem<'_, B> {
    /// Reports `done` of the fitted cameras passed (see [`Problem::on_camera`]).
    pub fn camera_done(&self, done: usize) {
        if let Some(f) = self.on_camera {
            f(done, self.fit.len());
        }
    }

    /// Feature channels C of one level.
    pub fn channels(&self) -> usize {
        self.levels
            .first()
            .and_then(|l| l.first())
            .map_or(0, |l| l.dim)
    }

    /// Number of levels L.
    pub fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// Checks the shapes: at least one level and one fitted camera, one label set
    /// per camera and level with the camera's size, one feature dimension.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SolveError::Problem(m));
        if self.levels.is_empty() {
            return bad("no level to solve".into());
        }
        if self.fit.is_empty() {
            return bad("no camera to fit".into());
        }
        if let Some(&i) = self.fit.iter().find(|&&i| i >= self.cameras.len()) {
            return bad(format!(
                "fitted camera {i} is not one of {}",
                self.cameras.len()
            ));
        }
        let c = self.channels();
        if c == 0 {
            return bad("feature dimension 0".into());
        }
        for (l, labels) in self.levels.iter().enumerate() {
            if labels.len() != self.cameras.len() {
                return bad(format!(
                    "level {l} has {} label sets for {} cameras",
                    labels.len(),
                    self.cameras.len()
                ));
            }
            for (cam, lab) in self.cameras.iter().zip(labels) {
                if (cam.width, cam.height) != (lab.width, lab.height) || lab.dim != c {
                    return bad(format!(
                        "labels `{}` ({}x{}, D = {}) do not fit camera `{}` ({}x{}, D = {c})",
                        lab.name, lab.width, lab.height, lab.dim, cam.name, cam.width, cam.height
                    ));
                }
            }
        }
        Ok(())
    }

    /// Consecutive level ranges whose `per_level` channels each fit the backend's
    /// channel limit (one range unless `L·per_level` is above it).
    pub(crate) fn level_chunks(&self, dev: &B, per_level: usize) -> Result<Vec<Range<usize>>> {
        let max = dev.max_channels();
        if per_level > max {
            return Err(SolveError::Problem(format!(
                "{per_level} channels per level exceed the {max} this backend takes per op"
            )));
        }
        let step = (max / per_level).max(1);
        let l = self.level_count();
        Ok((0..l.div_ceil(step))
            .map(|i| i * step..((i + 1) * step).min(l))
            .collect())
    }

    /// Targets of camera `cam` (all levels).
    pub fn targets(&self, cam: usize) -> Targets {
        let labels: Vec<&ImageLabels> = self.levels.iter().map(|l| l[cam]).collect();
        Targets::new(&labels, self.render.tile_size)
    }

    /// Projects and bins camera `cam` into `scratch` and uploads its pixel set;
    /// `None` when no level has a valid pixel in it.
    pub(crate) fn prepare(
        &self,
        dev: &B,
        cam: usize,
        scratch: &mut Scratch<B>,
    ) -> Result<Option<(Targets, PixelSet<B>)>> {
        let t = self.targets(cam);
        if t.pixels.is_empty() {
            return Ok(None);
        }
        let camera = &self.cameras[cam];
        cache::project(
            dev,
            self.geometry,
            camera,
            t.grid,
            self.render.clip,
            scratch,
        )?;
        cache::bin(dev, t.grid, scratch)?;
        let set = PixelSet::upload(dev, t.grid, &t.pixels, &t.offsets)?;
        Ok(Some((t, set)))
    }
}

/// One camera's targets over the union of the levels' valid pixels (tile-major).
#[derive(Clone, Debug)]
pub struct Targets {
    /// The camera's tile grid.
    pub grid: TileGrid,
    /// Pixels valid at any level, tile-major.
    pub pixels: Vec<u32>,
    /// Per-tile offsets into `pixels`.
    pub offsets: Vec<u32>,
    /// Per level, per pixel of `pixels`: its mask row + 1, or 0 where the level has
    /// no mask.
    pub rows: Vec<Vec<u32>>,
}

impl Targets {
    /// The targets of one camera from its labels at each level.
    pub fn new(labels: &[&ImageLabels], tile_size: u32) -> Targets {
        let first = labels[0];
        let grid = TileGrid::new(tile_size, first.width, first.height);
        let levels = labels.len();
        let mut lookup = vec![0u32; grid.pixel_count() * levels];
        for (l, lab) in labels.iter().enumerate() {
            for (&p, &m) in lab.valid.iter().zip(&lab.mask) {
                lookup[p as usize * levels + l] = m + 1;
            }
        }
        let any = |p: u32| {
            let p = p as usize * levels;
            lookup[p..p + levels].iter().any(|&v| v != 0)
        };
        let (pixels, offsets) = grid.select_pixels(any);
        let rows = (0..levels)
            .map(|l| {
                pixels
                    .iter()
                    .map(|&p| lookup[p as usize * levels + l])
                    .collect()
            })
            .collect();
        Targets {
            grid,
            pixels,
            offsets,
            rows,
        }
    }

    /// Number of pixels (rows).
    pub fn len(&self) -> usize {
        self.pixels.len()
    }

    /// True when no level has a valid pixel.
    pub fn is_empty(&self) -> bool {
        self.pixels.is_empty()
    }

    /// Per pixel, for the levels of `levels`: `[m·f (C values), m]` (`m` = 1 where the
    /// level is valid) — `[len, levels.len()·(C + 1)]`.
    pub fn masked_targets_with_mask(
        &self,
        labels: &[&ImageLabels],
        levels: Range<usize>,
    ) -> Vec<f32> {
        let c = labels[0].dim;
        let w = levels.len() * (c + 1);
        let mut out = vec![0f32; self.len() * w];
        for (i, row) in out.chunks_exact_mut(w).enumerate() {
            for (j, l) in levels.clone().enumerate() {
                let r = self.rows[l][i];
                if r == 0 {
                    continue;
                }
                let m = (r - 1) as usize;
                let dst = &mut row[j * (c + 1)..(j + 1) * (c + 1)];
                dst[..c].copy_from_slice(&labels[l].features[m * c..(m + 1) * c]);
                dst[c] = 1.0;
            }
        }
        out
    }

    /// Per pixel and level of `levels`: 1 where the level is valid — `[len,
    /// levels.len()]`.
    pub fn keep(&self, levels: Range<usize>) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * levels.len());
        for i in 0..self.len() {
            for l in levels.clone() {
                out.push((self.rows[l][i] != 0) as u8);
            }
        }
        out
    }
}

/// What fitting did to each camera of the scene (indexed like the cameras): the
/// counters a test reads to check that held-out cameras were never touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Visits {
    /// Feature-only backward walks (the `average` pass).
    pub walks: Vec<u32>,
    /// Operators built.
    pub builds: Vec<u32>,
    /// Products (`spmm` or `spmm_t`) through the camera's operator.
    pub products: Vec<u64>,
}

impl Visits {
    /// Zeroed counters for `cameras` cameras.
    pub fn new(cameras: usize) -> Self {
        Visits {
            walks: vec![0; cameras],
            builds: vec![0; cameras],
            products: vec![0; cameras],
        }
    }

    /// Whether camera `i` was touched at all.
    pub fn touched(&self, i: usize) -> bool {
        self.walks[i] > 0 || self.builds[i] > 0 || self.products[i] > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_cover_the_union_of_the_levels() {
        let a = ImageLabels::from_seg_map(
            "a",
            (4, 2),
            &[0, -1, -1, 1, -1, -1, 0, -1],
            vec![1.0, 2.0, 3.0, 4.0],
            2,
        )
        .unwrap();
        let b = ImageLabels::from_seg_map(
            "a",
            (4, 2),
            &[-1, -1, 0, 0, -1, -1, -1, -1],
            vec![5.0, 6.0],
            2,
        )
        .unwrap();
        let t = Targets::new(&[&a, &b], 8);
        assert_eq!(t.pixels, vec![0, 2, 3, 6]);
        assert_eq!(t.rows, vec![vec![1, 0, 2, 1], vec![0, 1, 1, 0]]);
        let m = t.masked_targets_with_mask(&[&a, &b], 0..2);
        assert_eq!(
            m,
            [
                1., 2., 1., 0., 0., 0., //
                0., 0., 0., 5., 6., 1., //
                3., 4., 1., 5., 6., 1., //
                1., 2., 1., 0., 0., 0.,
            ]
        );
        assert_eq!(t.keep(1..2), vec![0, 1, 1, 0]);
    }
}
