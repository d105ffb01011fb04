//! Frozen geometry on the device, EWA projection and tile binning.

use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::{CameraParams, DeviceError};
use lsplat_kernels::Kernel;

use crate::GpuBackend;
use crate::algo::{bits_for, checked_total, exclusive_scan, radix_sort, segment_offsets};
use crate::buf::{GpuBuf, alloc, upload};
use crate::gpu::Gpu;
use crate::runtime::{KernelArgs, LaunchDims, Runtime};

/// Geometry resident on the device: centres, world covariances (upper triangle, the
/// CPU backend's f64 covariances rounded to f32) and opacities. The GPU projects in f32
/// and the CPU in f64, so projections agree within tolerance, not bitwise.
pub struct GpuGeometry<R: Runtime> {
    pub(crate) means: GpuBuf<R, f32>,
    pub(crate) cov3d: GpuBuf<R, f32>,
    pub(crate) opacity: GpuBuf<R, f32>,
    pub(crate) n: usize,
}

pub(crate) fn upload_geometry<R: Runtime>(
    gpu: &Gpu<R>,
    g: &Gaussians,
) -> Result<GpuGeometry<R>, DeviceError> {
    let means: Vec<f32> = g.means.iter().flatten().copied().collect();
    let cov: Vec<f32> = g
        .log_scales
        .iter()
        .zip(&g.rotations)
        .flat_map(|(s, q)| lsplat_core::gaussians::covariance(q, s).map(|v| v as f32))
        .collect();
    let opacity: Vec<f32> = (0..g.len()).map(|i| g.opacity(i)).collect();
    Ok(GpuGeometry {
        means: upload(gpu, &means)?,
        cov3d: upload(gpu, &cov)?,
        opacity: upload(gpu, &opacity)?,
        n: g.len(),
    })
}

/// Projected splats of one camera: 8 floats per Gaussian `[x, y, a, b, c, opacity,
/// depth, 0]` and a tile rectangle `[x0, y0, x1, y1)` (all zero when culled).
pub struct GpuProjection<R: Runtime> {
    pub(crate) data: Option<ProjData<R>>,
}

impl<R: Runtime> Default for GpuProjection<R> {
    fn default() -> Self {
        GpuProjection { data: None }
    }
}

pub(crate) struct ProjData<R: Runtime> {
    pub splats: GpuBuf<R, f32>,
    pub rects: GpuBuf<R, u32>,
    pub n: usize,
    pub grid: TileGrid,
}

impl<R: Runtime> GpuProjection<R> {
    /// Number of Gaussians projected (0 before the first projection).
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.n)
    }

    /// True before the first projection or with no Gaussians.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Downloads `(splats, rects)` (for tests and tools; waits for the device).
    pub fn download(&self, dev: &GpuBackend<R>) -> Result<(Vec<f32>, Vec<u32>), DeviceError> {
        let d = self
            .data
            .as_ref()
            .ok_or_else(|| DeviceError::shape("projection", "empty"))?;
        Ok((
            crate::buf::download(&dev.gpu, &d.splats)?,
            crate::buf::download(&dev.gpu, &d.rects)?,
        ))
    }
}

/// The camera as `ls_project` takes it (layout of `LsCamera` in project.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct KernelCamera {
    view: [f32; 12],
    fx: f32,
    fy: f32,
    cx: f32,
    cy: f32,
    width: u32,
    height: u32,
    near: f32,
    far: f32,
}

pub(crate) fn project<R: Runtime>(
    gpu: &Gpu<R>,
    geom: &GpuGeometry<R>,
    cam: &CameraParams,
    tile_grid: TileGrid,
    out: &mut GpuProjection<R>,
) -> Result<(), DeviceError> {
    let n = geom.n;
    let reuse = matches!(&out.data, Some(d) if d.n == n);
    if !reuse {
        out.data = Some(ProjData {
            splats: alloc(gpu, 8 * n)?,
            rects: alloc(gpu, 4 * n)?,
            n,
            grid: tile_grid,
        });
    }
    let d = out.data.as_mut().expect("allocated above");
    d.grid = tile_grid;
    if n == 0 {
        return Ok(());
    }
    let kc = KernelCamera {
        view: cam.view,
        fx: cam.fx,
        fy: cam.fy,
        cx: cam.cx,
        cy: cam.cy,
        width: cam.width,
        height: cam.height,
        near: cam.near,
        far: cam.far,
    };
    crate::algo::check_u32("project", "Gaussians", n)?;
    let mut a = KernelArgs::new();
    a.push(geom.means.ptr())
        .push(geom.cov3d.ptr())
        .push(geom.opacity.ptr())
        .push(n as u32)
        .push(kc)
        .push(d.splats.ptr())
        .push(d.rects.ptr());
    let dims = LaunchDims::cover(n as u64, 256);
    // SAFETY: matches `ls_project(const float* means, const float* cov3d, const float*
    // opacity, u32 n, LsCamera, float* splats, u32* rects)`; buffers hold 3n, 6n, n, 8n
    // and 4n elements; the module is compiled for this grid's tile size.
    unsafe {
        gpu.launch(
            Kernel::Project,
            tile_grid.tile_size,
            0,
            "ls_project",
            dims,
            &mut a,
        )
    }
}

/// Tile lists of one camera: `tile_count + 1` offsets into Gaussian ids sorted by
/// (tile, depth, id).
pub struct GpuBins<R: Runtime> {
    pub(crate) data: Option<BinsData<R>>,
}

impl<R: Runtime> Default for GpuBins<R> {
    fn default() -> Self {
        GpuBins { data: None }
    }
}

pub(crate) struct BinsData<R: Runtime> {
    pub tile_offsets: GpuBuf<R, u32>,
    pub sorted: GpuBuf<R, u32>,
    pub total: usize,
    pub n: usize,
    pub grid: TileGrid,
}

impl<R: Runtime> GpuBins<R> {
    /// Number of intersections.
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.total)
    }

    /// True when no splat touches a tile (or before binning).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Downloads `(tile_offsets, sorted)` (for tests and tools).
    pub fn download(&self, dev: &GpuBackend<R>) -> Result<(Vec<u32>, Vec<u32>), DeviceError> {
        let d = self
            .data
            .as_ref()
            .ok_or_else(|| DeviceError::shape("bins", "empty"))?;
        Ok((
            crate::buf::download(&dev.gpu, &d.tile_offsets)?,
            crate::buf::download(&dev.gpu, &d.sorted)?,
        ))
    }
}

/// Bins and sorts. Reads back one count (the number of intersections, summed in 64
/// bits so that 2³² or more is an error rather than a wrap) to size the lists: the
/// only host wait of the op, on the cache-warming path.
pub(crate) fn bin_and_sort<R: Runtime>(
    gpu: &Gpu<R>,
    proj: &GpuProjection<R>,
    tile_grid: TileGrid,
    out: &mut GpuBins<R>,
) -> Result<(), DeviceError> {
    let p = proj
        .data
        .as_ref()
        .ok_or_else(|| DeviceError::shape("bin_and_sort", "the projection is empty"))?;
    if p.grid != tile_grid {
        return Err(DeviceError::shape(
            "bin_and_sort",
            "projection made for another grid",
        ));
    }
    let n = p.n;
    let tiles = tile_grid.tile_count();
    let mut offsets = alloc::<R, u32>(gpu, n + 1)?;
    if n > 0 {
        let mut a = KernelArgs::new();
        a.push(p.rects.ptr()).push(n as u32).push(offsets.ptr());
        let dims = LaunchDims::cover(n as u64, 256);
        // SAFETY: matches `ls_count_tiles(const u32* rects, u32 n, u32* counts)`;
        // rects holds 4n, counts n + 1 entries.
        unsafe { gpu.launch(Kernel::Bins, 0, 0, "ls_count_tiles", dims, &mut a)? };
    }
    let total = checked_total(gpu, "bin_and_sort", "tile intersections", &offsets, n)?;
    exclusive_scan(gpu, &mut offsets, n + 1)?;
    let keys = alloc::<R, u64>(gpu, total)?;
    let values = alloc::<R, u32>(gpu, total)?;
    if total > 0 {
        let mut a = KernelArgs::new();
        a.push(p.rects.ptr())
            .push(p.splats.ptr())
            .push(offsets.ptr())
            .push(n as u32)
            .push(tile_grid.tiles_x())
            .push(keys.ptr())
            .push(values.ptr());
        let dims = LaunchDims::cover(n as u64, 256);
        // SAFETY: matches `ls_emit_keys(const u32* rects, const float* splats, const
        // u32* offsets, u32 n, u32 tiles_x, u64* keys, u32* values)`; keys and values
        // hold the `total` intersections the scanned offsets describe.
        unsafe { gpu.launch(Kernel::Bins, 0, 0, "ls_emit_keys", dims, &mut a)? };
    }
    let (keys, sorted) = radix_sort(gpu, keys, values, total, 32 + bits_for(tiles))?;
    let mut tile_offsets = alloc::<R, u32>(gpu, tiles + 1)?;
    segment_offsets(gpu, &keys, total, 32, &mut tile_offsets, tiles)?;
    out.data = Some(BinsData {
        tile_offsets,
        sorted,
        total,
        n,
        grid: tile_grid,
    });
    Ok(())
}
