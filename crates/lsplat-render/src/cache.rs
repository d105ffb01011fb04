//! Per-camera raster caches.
//!
//! Geometry is frozen, so a camera's blending weights never change. A camera's cache
//! is built on its first visit (from a projection and binning done in the shared
//! [`Scratch`]) and then serves every later visit:
//! - [`RasterCache::Operator`]: the sparse operator W; forward = SpMM, backward = Wᵀ
//!   (and, for k-sparse inputs, [`forward_sparse`] / [`backward_sparse`]).
//! - [`RasterCache::Geometry`]: projection and sorted tile lists; weights recomputed.
//! - [`RasterCache::Cold`]: nothing; the visit projects and bins into the scratch.

use lsplat_core::config::{CacheMode, WeightPrecision};
use lsplat_core::{Camera, TileGrid};
use lsplat_device::{Backend, CameraParams, OperatorStats, PixelSet, Result};

/// Cache levels, ordered from cheapest to keep to fastest to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CacheLevel {
    /// Nothing cached.
    None,
    /// Projection and tile lists.
    Geometry,
    /// The sparse operator.
    Operator,
}

impl CacheLevel {
    /// The level a configuration asks for.
    pub fn from_mode(mode: CacheMode) -> Self {
        match mode {
            CacheMode::Operator => CacheLevel::Operator,
            CacheMode::Geometry => CacheLevel::Geometry,
            CacheMode::None => CacheLevel::None,
        }
    }

    /// The next lower level (what eviction falls back to).
    pub fn lower(self) -> CacheLevel {
        match self {
            CacheLevel::Operator => CacheLevel::Geometry,
            _ => CacheLevel::None,
        }
    }
}

/// What one camera keeps between visits.
pub enum RasterCache<B: Backend> {
    /// Nothing.
    Cold,
    /// Projection and sorted tile lists.
    Geometry {
        /// Projected splats.
        projection: B::Projection,
        /// Sorted tile lists.
        bins: B::Bins,
    },
    /// The operator W of the camera's valid pixels.
    Operator {
        /// W.
        op: B::Operator,
    },
}

// Not derived: `#[derive(Default)]` would demand `B: Default`.
#[allow(clippy::derivable_impls)]
impl<B: Backend> Default for RasterCache<B> {
    fn default() -> Self {
        RasterCache::Cold
    }
}

impl<B: Backend> RasterCache<B> {
    /// The level held.
    pub fn level(&self) -> CacheLevel {
        match self {
            RasterCache::Cold => CacheLevel::None,
            RasterCache::Geometry { .. } => CacheLevel::Geometry,
            RasterCache::Operator { .. } => CacheLevel::Operator,
        }
    }

    /// Bytes held in memory (of a spilled operator only its tables).
    pub fn bytes(&self, dev: &B) -> usize {
        match self {
            RasterCache::Cold => 0,
            RasterCache::Geometry { projection, bins } => {
                dev.geometry_cache_bytes(projection, bins)
            }
            RasterCache::Operator { op } => dev.operator_stats(op).resident_bytes,
        }
    }

    /// Whether an operator spilled to disk is held.
    pub fn on_disk(&self, dev: &B) -> bool {
        self.operator_stats(dev)
            .is_some_and(|s| s.resident_bytes < s.bytes)
    }

    /// Operator size, when an operator is held.
    pub fn operator_stats(&self, dev: &B) -> Option<OperatorStats> {
        match self {
            RasterCache::Operator { op } => Some(dev.operator_stats(op)),
            _ => None,
        }
    }
}

/// Projection and bins of the camera being visited when it has no cache of its own.
pub struct Scratch<B: Backend> {
    /// Projected splats.
    pub projection: B::Projection,
    /// Sorted tile lists.
    pub bins: B::Bins,
}

impl<B: Backend> Default for Scratch<B> {
    fn default() -> Self {
        Scratch {
            projection: Default::default(),
            bins: Default::default(),
        }
    }
}

/// Projects `camera` into the scratch.
pub fn project<B: Backend>(
    dev: &B,
    geometry: &B::Geometry,
    camera: &Camera,
    grid: TileGrid,
    (near, far): (f32, f32),
    scratch: &mut Scratch<B>,
) -> Result<()> {
    dev.project(
        geometry,
        &CameraParams::new(camera, near, far),
        grid,
        &mut scratch.projection,
    )
}

/// Bins and sorts the scratch projection.
pub fn bin<B: Backend>(dev: &B, grid: TileGrid, scratch: &mut Scratch<B>) -> Result<()> {
    let Scratch { projection, bins } = scratch;
    dev.bin_and_sort(projection, grid, bins)
}

/// Builds a camera's cache at `level` from the projection and bins in the scratch.
/// For [`CacheLevel::Geometry`] the scratch's buffers move into the cache.
pub fn promote<B: Backend>(
    dev: &B,
    scratch: &mut Scratch<B>,
    pixels: &PixelSet<B>,
    gaussians: usize,
    level: CacheLevel,
    precision: WeightPrecision,
) -> Result<RasterCache<B>> {
    Ok(match level {
        CacheLevel::Operator => RasterCache::Operator {
            op: dev.build_operator(
                &scratch.projection,
                &scratch.bins,
                pixels,
                gaussians,
                precision,
            )?,
        },
        CacheLevel::Geometry => RasterCache::Geometry {
            projection: std::mem::take(&mut scratch.projection),
            bins: std::mem::take(&mut scratch.bins),
        },
        CacheLevel::None => RasterCache::Cold,
    })
}

/// `out = W·x` for the camera's pixels through whatever is cached (the scratch
/// holds this camera's projection and bins when the cache is cold).
pub fn forward<B: Backend>(
    dev: &B,
    cache: &RasterCache<B>,
    scratch: &Scratch<B>,
    pixels: &PixelSet<B>,
    x: &B::Buf<f32>,
    channels: usize,
    out: &mut B::Buf<f32>,
) -> Result<()> {
    match cache {
        RasterCache::Operator { op } => dev.spmm(op, x, channels, out),
        RasterCache::Geometry { projection, bins } => {
            dev.rasterize(projection, bins, pixels, x, channels, out)
        }
        RasterCache::Cold => {
            dev.rasterize(&scratch.projection, &scratch.bins, pixels, x, channels, out)
        }
    }
}

/// `d_x += Wᵀ·d_out` through whatever is cached.
pub fn backward<B: Backend>(
    dev: &B,
    cache: &RasterCache<B>,
    scratch: &Scratch<B>,
    pixels: &PixelSet<B>,
    d_out: &B::Buf<f32>,
    channels: usize,
    d_x: &mut B::Buf<f32>,
) -> Result<()> {
    match cache {
        RasterCache::Operator { op } => dev.spmm_t(op, d_out, channels, d_x),
        RasterCache::Geometry { projection, bins } => {
            dev.rasterize_backward(projection, bins, pixels, d_out, channels, d_x)
        }
        RasterCache::Cold => dev.rasterize_backward(
            &scratch.projection,
            &scratch.bins,
            pixels,
            d_out,
            channels,
            d_x,
        ),
    }
}

/// `out = W·x` for a k-sparse `x` (`idx`, `val`: `[N, k]`; see
/// [`Backend::spmm_sparse`]) when the camera's operator is cached. Returns whether it
/// ran: `Ok(false)` (nothing written) when the cache holds no operator, so the caller
/// composites the scattered dense `x` through [`forward`] instead.
pub fn forward_sparse<B: Backend>(
    dev: &B,
    cache: &RasterCache<B>,
    idx: &B::Buf<u32>,
    val: &B::Buf<f32>,
    k: usize,
    channels: usize,
    out: &mut B::Buf<f32>,
) -> Result<bool> {
    match cache {
        RasterCache::Operator { op } => dev
            .spmm_sparse(op, idx, val, k, channels, out)
            .map(|()| true),
        RasterCache::Geometry { .. } | RasterCache::Cold => Ok(false),
    }
}

/// `d_val += (Wᵀ·d_out)` at the pairs' columns (see [`Backend::spmm_t_sparse`]) when
/// the camera's operator is cached. Returns whether it ran: `Ok(false)` (nothing
/// added) when the cache holds no operator, so the caller runs the dense [`backward`]
/// and gathers `d_x` at `idx` instead.
pub fn backward_sparse<B: Backend>(
    dev: &B,
    cache: &RasterCache<B>,
    idx: &B::Buf<u32>,
    d_out: &B::Buf<f32>,
    k: usize,
    channels: usize,
    d_val: &mut B::Buf<f32>,
) -> Result<bool> {
    match cache {
        RasterCache::Operator { op } => dev
            .spmm_t_sparse(op, idx, d_out, k, channels, d_val)
            .map(|()| true),
        RasterCache::Geometry { .. } | RasterCache::Cold => Ok(false),
    }
}

/// Renders a full image of `[N, C]` features, returned row-major `[H·W, C]` on the
/// host (for evaluation and tools; not used in training).
pub fn render_image<B: Backend>(
    dev: &B,
    geometry: &B::Geometry,
    camera: &Camera,
    tile_size: u32,
    clip: (f32, f32),
    features: &B::Buf<f32>,
    channels: usize,
) -> Result<Vec<f32>> {
    let grid = TileGrid::new(tile_size, camera.width, camera.height);
    let mut scratch = Scratch::<B>::default();
    project(dev, geometry, camera, grid, clip, &mut scratch)?;
    bin(dev, grid, &mut scratch)?;
    let (order, offsets) = grid.all_pixels();
    let set = PixelSet::upload(dev, grid, &order, &offsets)?;
    let mut out = dev.alloc::<f32>(set.len * channels)?;
    dev.rasterize(
        &scratch.projection,
        &scratch.bins,
        &set,
        features,
        channels,
        &mut out,
    )?;
    let tiled = dev.download(&out)?;
    let mut image = vec![0f32; tiled.len()];
    for (i, &p) in order.iter().enumerate() {
        let p = p as usize;
        image[p * channels..(p + 1) * channels]
            .copy_from_slice(&tiled[i * channels..(i + 1) * channels]);
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use lsplat_core::Gaussians;
    use lsplat_cpu::CpuBackend;

    use super::*;

    #[test]
    fn sparse_products_run_only_through_an_operator() {
        let dev = CpuBackend::new(1);
        let g = Gaussians {
            means: vec![[0.0, 0.0, 4.0], [0.3, -0.2, 5.0], [-0.4, 0.1, 3.5]],
            log_scales: vec![[-1.5; 3], [-1.2; 3], [-1.8; 3]],
            rotations: vec![[1.0, 0.0, 0.0, 0.0]; 3],
            opacity_logits: vec![1.0, 2.0, 0.5],
        };
        let (w, h) = (40, 30);
        let camera = CameraParams {
            view: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            fx: 40.0,
            fy: 40.0,
            cx: 20.0,
            cy: 15.0,
            width: w,
            height: h,
            near: 0.01,
            far: 1e10,
        };
        let grid = TileGrid::new(16, w, h);
        let geometry = dev.upload_geometry(&g).unwrap();
        let mut scratch = Scratch::<CpuBackend>::default();
        dev.project(&geometry, &camera, grid, &mut scratch.projection)
            .unwrap();
        bin(&dev, grid, &mut scratch).unwrap();
        let (px, off) = grid.all_pixels();
        let set = PixelSet::upload(&dev, grid, &px, &off).unwrap();
        let (k, c) = (2, 5);
        let idx = vec![4, 0, 1, 3, 2, 2];
        let val = vec![0.5, -1.0, 2.0, 0.25, 1.0, -0.5];
        let d_out: Vec<f32> = (0..set.len * c).map(|i| (i % 7) as f32 - 3.0).collect();
        // No operator: nothing runs, nothing is written.
        let cold = RasterCache::<CpuBackend>::Cold;
        let mut out = vec![7.0; set.len * c];
        let mut d_val = vec![7.0; 3 * k];
        assert!(!forward_sparse(&dev, &cold, &idx, &val, k, c, &mut out).unwrap());
        assert!(!backward_sparse(&dev, &cold, &idx, &d_out, k, c, &mut d_val).unwrap());
        assert!(out.iter().chain(&d_val).all(|&v| v == 7.0));
        // An operator: the backend's sparse products.
        let cache = promote(
            &dev,
            &mut scratch,
            &set,
            3,
            CacheLevel::Operator,
            WeightPrecision::F32,
        )
        .unwrap();
        let RasterCache::Operator { op } = &cache else {
            panic!("no operator")
        };
        assert!(forward_sparse(&dev, &cache, &idx, &val, k, c, &mut out).unwrap());
        let mut want = vec![0.0; set.len * c];
        dev.spmm_sparse(op, &idx, &val, k, c, &mut want).unwrap();
        assert_eq!(out, want);
        assert!(out.iter().any(|&v| v != 0.0));
        assert!(backward_sparse(&dev, &cache, &idx, &d_out, k, c, &mut d_val).unwrap());
        let mut want = vec![7.0; 3 * k];
        dev.spmm_t_sparse(op, &idx, &d_out, k, c, &mut want)
            .unwrap();
        assert_eq!(d_val, want);
        // Errors of the op come through.
        assert!(forward_sparse(&dev, &cache, &idx, &val, k, 4, &mut out).is_err());
    }
}
