//! Direct compositing and its feature-only backward (one block per tile).

use lsplat_device::{DeviceError, PixelSet, Result};
use lsplat_kernels::Kernel;

use crate::GpuBackend;
use crate::buf::GpuBuf;
use crate::geometry::{BinsData, GpuBins, GpuProjection, ProjData};
use crate::gpu::Gpu;
use crate::runtime::{KernelArgs, LaunchDims, Runtime};

/// Largest channel count the kernels are instantiated for.
pub const MAX_CHANNELS: usize = 1024;
/// Channels per forward pass (LS_CHUNK in raster.cu for C ≥ 32).
const CHUNK: usize = 32;

/// Checks that projection, bins and pixel set belong together.
pub(crate) fn parts<'a, R: Runtime>(
    op: &'static str,
    proj: &'a GpuProjection<R>,
    bins: &'a GpuBins<R>,
    set: &PixelSet<GpuBackend<R>>,
) -> Result<(&'a ProjData<R>, &'a BinsData<R>)> {
    let bad = || DeviceError::shape(op, "bins do not belong to this projection and pixel grid");
    let p = proj.data.as_ref().ok_or_else(bad)?;
    let b = bins.data.as_ref().ok_or_else(bad)?;
    if b.n != p.n || b.grid != set.grid || p.grid != set.grid {
        return Err(bad());
    }
    if !lsplat_kernels::TILE_SIZES.contains(&set.grid.tile_size) {
        return Err(DeviceError::shape(
            op,
            format!("tile size {} (supported: 8, 16)", set.grid.tile_size),
        ));
    }
    Ok((p, b))
}

/// Checks a channel count.
pub(crate) fn check_channels(op: &'static str, c: usize) -> Result<()> {
    if (1..=MAX_CHANNELS).contains(&c) {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{c} channels (supported: 1..={MAX_CHANNELS})"),
        ))
    }
}

/// One block of tile² threads per tile (grid.y = channel chunks).
pub(crate) fn tile_launch<R: Runtime>(set: &PixelSet<GpuBackend<R>>, chunks: usize) -> LaunchDims {
    let ts = set.grid.tile_size;
    LaunchDims {
        grid: [set.grid.tile_count() as u32, chunks as u32, 1],
        block: [ts * ts, 1, 1],
        shared_bytes: 0,
    }
}

/// Launches one of the two tile-walk kernels of raster.cu, which share their
/// signature: `(splats, bin_offsets, sorted, pixels, pix_offsets, width, input, output)`.
fn launch_walk<R: Runtime>(
    gpu: &Gpu<R>,
    name: &'static str,
    p: &ProjData<R>,
    b: &BinsData<R>,
    set: &PixelSet<GpuBackend<R>>,
    input: &GpuBuf<R, f32>,
    channels: usize,
    output: &mut GpuBuf<R, f32>,
    chunks: usize,
) -> Result<()> {
    let ts = set.grid.tile_size;
    let mut a = KernelArgs::new();
    a.push(p.splats.ptr())
        .push(b.tile_offsets.ptr())
        .push(b.sorted.ptr())
        .push(set.pixels.ptr())
        .push(set.tile_offsets.ptr())
        .push(set.grid.width)
        .push(input.ptr())
        .push(output.ptr());
    let dims = tile_launch(set, chunks);
    // SAFETY: `ls_rasterize(const float* splats, const u32* bin_offsets, const u32*
    // sorted, const u32* pixels, const u32* pix_offsets, u32 width, const float* x,
    // float* out)` and `ls_rasterize_backward(..., const float* d_out, float* d_x)`
    // take exactly these arguments, compiled for this tile size and channel count;
    // shapes were checked by the caller (x/d_x: N·C, out/d_out: pixels·C, offsets:
    // tiles + 1).
    unsafe { gpu.launch(Kernel::Raster, ts, channels as u32, name, dims, &mut a) }
}

/// Direct compositing of `x` at the pixel set into `out`.
pub(crate) fn rasterize<R: Runtime>(
    gpu: &Gpu<R>,
    p: &ProjData<R>,
    b: &BinsData<R>,
    set: &PixelSet<GpuBackend<R>>,
    x: &GpuBuf<R, f32>,
    channels: usize,
    out: &mut GpuBuf<R, f32>,
) -> Result<()> {
    let chunks = channels.div_ceil(CHUNK);
    launch_walk(gpu, "ls_rasterize", p, b, set, x, channels, out, chunks)
}

/// Feature-only backward: `d_x += Wᵀ·d_out`.
pub(crate) fn rasterize_backward<R: Runtime>(
    gpu: &Gpu<R>,
    p: &ProjData<R>,
    b: &BinsData<R>,
    set: &PixelSet<GpuBackend<R>>,
    d_out: &GpuBuf<R, f32>,
    channels: usize,
    d_x: &mut GpuBuf<R, f32>,
) -> Result<()> {
    launch_walk(
        gpu,
        "ls_rasterize_backward",
        p,
        b,
        set,
        d_out,
        channels,
        d_x,
        1,
    )
}
