//! Frozen geometry on the device, EWA projection and tile binning.

use cudarc::driver::DeviceRepr;
use cudarc::driver::PushKernelArg;
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::{CameraParams, DeviceError};
use lsplat_kernels::Kernel;

use crate::algo::{bits_for, exclusive_scan, radix_sort, segment_offsets};
use crate::buf::{CudaBuf, alloc, read_u32, upload};
use crate::gpu::{Gpu, drv, grid};

/// Geometry resident on the device: centres, world covariances (upper triangle,
/// computed on the host exactly as the CPU backend does) and opacities.
pub struct CudaGeometry {
    pub(crate) means: CudaBuf<f32>,
    pub(crate) cov3d: CudaBuf<f32>,
    pub(crate) opacity: CudaBuf<f32>,
    pub(crate) n: usize,
}

/// Σ = R·S·Sᵀ·Rᵀ for quaternion `(w, x, y, z)` and log-scales (same operation order
/// as lsplat-cpu, so both backends start from identical bits).
fn covariance(q: &[f32; 4], log_scale: &[f32; 3]) -> [f32; 6] {
    let [w, x, y, z] = *q;
    let r = [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ];
    let s = [log_scale[0].exp(), log_scale[1].exp(), log_scale[2].exp()];
    let m = |i: usize, k: usize| r[i][k] * s[k];
    let e = |i: usize, j: usize| (0..3).map(|k| m(i, k) * m(j, k)).sum::<f32>();
    [e(0, 0), e(0, 1), e(0, 2), e(1, 1), e(1, 2), e(2, 2)]
}

pub(crate) fn upload_geometry(gpu: &Gpu, g: &Gaussians) -> Result<CudaGeometry, DeviceError> {
    let means: Vec<f32> = g.means.iter().flatten().copied().collect();
    let cov: Vec<f32> = g
        .log_scales
        .iter()
        .zip(&g.rotations)
        .flat_map(|(s, q)| covariance(q, s))
        .collect();
    let opacity: Vec<f32> = (0..g.len()).map(|i| g.opacity(i)).collect();
    Ok(CudaGeometry {
        means: upload(gpu, &means)?,
        cov3d: upload(gpu, &cov)?,
        opacity: upload(gpu, &opacity)?,
        n: g.len(),
    })
}

/// Projected splats of one camera: 8 floats per Gaussian `[x, y, a, b, c, opacity,
/// depth, 0]` and a tile rectangle `[x0, y0, x1, y1)` (all zero when culled).
#[derive(Default)]
pub struct CudaProjection {
    pub(crate) data: Option<ProjData>,
}

pub(crate) struct ProjData {
    pub splats: CudaBuf<f32>,
    pub rects: CudaBuf<u32>,
    pub n: usize,
    pub grid: TileGrid,
}

impl CudaProjection {
    /// Number of Gaussians projected (0 before the first projection).
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.n)
    }

    /// True before the first projection or with no Gaussians.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Downloads `(splats, rects)` (for tests and tools; waits for the device).
    pub fn download(&self, dev: &crate::CudaBackend) -> Result<(Vec<f32>, Vec<u32>), DeviceError> {
        let d = self
            .data
            .as_ref()
            .ok_or_else(|| DeviceError::shape("projection", "empty"))?;
        Ok((
            crate::buf::download(dev.gpu(), &d.splats)?,
            crate::buf::download(dev.gpu(), &d.rects)?,
        ))
    }
}

/// The camera as `ls_project` takes it (layout of `LsCamera` in project.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
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

// SAFETY: `KernelCamera` is `repr(C)`, plain old data, with the field order, types
// and size of `LsCamera` in project.cu, so it can be passed by value as a kernel
// parameter.
unsafe impl DeviceRepr for KernelCamera {}

pub(crate) fn project(
    gpu: &Gpu,
    geom: &CudaGeometry,
    cam: &CameraParams,
    tile_grid: TileGrid,
    out: &mut CudaProjection,
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
    let f = gpu.function(Kernel::Project, tile_grid.tile_size, 0, "ls_project")?;
    let n32 = n as u32;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(&geom.means.raw)
        .arg(&geom.cov3d.raw)
        .arg(&geom.opacity.raw)
        .arg(&n32)
        .arg(&kc)
        .arg(&d.splats.raw)
        .arg(&d.rects.raw);
    // SAFETY: matches `ls_project(const float* means, const float* cov3d, const float*
    // opacity, u32 n, LsCamera, float* splats, u32* rects)`; buffers hold 3n, 6n, n, 8n
    // and 4n elements; the module was compiled for this grid's tile size.
    unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    Ok(())
}

/// Tile lists of one camera: `tile_count + 1` offsets into Gaussian ids sorted by
/// (tile, depth, id).
#[derive(Default)]
pub struct CudaBins {
    pub(crate) data: Option<BinsData>,
}

pub(crate) struct BinsData {
    pub tile_offsets: CudaBuf<u32>,
    pub sorted: CudaBuf<u32>,
    pub total: usize,
    pub n: usize,
    pub grid: TileGrid,
}

impl CudaBins {
    /// Number of intersections.
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.total)
    }

    /// True when no splat touches a tile (or before binning).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Downloads `(tile_offsets, sorted)` (for tests and tools).
    pub fn download(&self, dev: &crate::CudaBackend) -> Result<(Vec<u32>, Vec<u32>), DeviceError> {
        let d = self
            .data
            .as_ref()
            .ok_or_else(|| DeviceError::shape("bins", "empty"))?;
        Ok((
            crate::buf::download(dev.gpu(), &d.tile_offsets)?,
            crate::buf::download(dev.gpu(), &d.sorted)?,
        ))
    }
}

/// Bins and sorts. Reads back one count (the number of intersections) to size the
/// lists: the only host wait of the op, on the cache-warming path.
pub(crate) fn bin_and_sort(
    gpu: &Gpu,
    proj: &CudaProjection,
    tile_grid: TileGrid,
    out: &mut CudaBins,
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
    let mut offsets = alloc::<u32>(gpu, n + 1)?;
    if n > 0 {
        let f = gpu.function(Kernel::Bins, 0, 0, "ls_count_tiles")?;
        let n32 = n as u32;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&p.rects.raw).arg(&n32).arg(&offsets.raw);
        // SAFETY: matches `ls_count_tiles(const u32* rects, u32 n, u32* counts)`;
        // rects holds 4n, counts n + 1 entries.
        unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    }
    exclusive_scan(gpu, &mut offsets, n + 1)?;
    let total = read_u32(gpu, &offsets, n)? as usize;
    let mut keys = alloc::<u64>(gpu, total)?;
    let mut values = alloc::<u32>(gpu, total)?;
    if total > 0 {
        let f = gpu.function(Kernel::Bins, 0, 0, "ls_emit_keys")?;
        let (n32, tx) = (n as u32, tile_grid.tiles_x());
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&p.rects.raw)
            .arg(&p.splats.raw)
            .arg(&offsets.raw)
            .arg(&n32)
            .arg(&tx)
            .arg(&mut keys.raw)
            .arg(&mut values.raw);
        // SAFETY: matches `ls_emit_keys(const u32* rects, const float* splats, const
        // u32* offsets, u32 n, u32 tiles_x, u64* keys, u32* values)`; keys and values
        // hold the `total` intersections the scanned offsets describe.
        unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    }
    let (keys, sorted) = radix_sort(gpu, keys, values, total, 32 + bits_for(tiles))?;
    let mut tile_offsets = alloc::<u32>(gpu, tiles + 1)?;
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
