//! Direct compositing and its feature-only backward (one block per tile).

use cudarc::driver::LaunchConfig;
use cudarc::driver::PushKernelArg;
use lsplat_device::{DeviceError, PixelSet};
use lsplat_kernels::Kernel;

use crate::CudaBackend;
use crate::buf::CudaBuf;
use crate::geometry::{BinsData, CudaBins, CudaProjection, ProjData};
use crate::gpu::{Gpu, drv};

/// Largest channel count the kernels are instantiated for.
pub const MAX_CHANNELS: usize = 1024;
/// Channels per forward pass (LS_CHUNK in raster.cu for C ≥ 32).
const CHUNK: usize = 32;

/// Checks that projection, bins and pixel set belong together.
pub(crate) fn parts<'a>(
    op: &'static str,
    proj: &'a CudaProjection,
    bins: &'a CudaBins,
    set: &PixelSet<CudaBackend>,
) -> Result<(&'a ProjData, &'a BinsData), DeviceError> {
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
pub(crate) fn check_channels(op: &'static str, c: usize) -> Result<(), DeviceError> {
    if (1..=MAX_CHANNELS).contains(&c) {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{c} channels (supported: 1..={MAX_CHANNELS})"),
        ))
    }
}

fn tile_launch(set: &PixelSet<CudaBackend>, chunks: usize) -> LaunchConfig {
    let ts = set.grid.tile_size;
    LaunchConfig {
        grid_dim: (set.grid.tile_count() as u32, chunks as u32, 1),
        block_dim: (ts * ts, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches one of the two tile-walk kernels of raster.cu, which share their
/// signature: `(splats, bin_offsets, sorted, pixels, pix_offsets, width, input, output)`.
fn launch_walk(
    gpu: &Gpu,
    name: &'static str,
    p: &ProjData,
    b: &BinsData,
    set: &PixelSet<CudaBackend>,
    input: &CudaBuf<f32>,
    channels: usize,
    output: &mut CudaBuf<f32>,
    chunks: usize,
) -> Result<(), DeviceError> {
    let ts = set.grid.tile_size;
    let f = gpu.function(Kernel::Raster, ts, channels as u32, name)?;
    let width = set.grid.width;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&p.splats.raw)
        .arg(&b.tile_offsets.raw)
        .arg(&b.sorted.raw)
        .arg(&set.pixels.raw)
        .arg(&set.tile_offsets.raw)
        .arg(&width)
        .arg(&input.raw)
        .arg(&output.raw);
    // SAFETY: `ls_rasterize(const float* splats, const u32* bin_offsets, const u32*
    // sorted, const u32* pixels, const u32* pix_offsets, u32 width, const float* x,
    // float* out)` and `ls_rasterize_backward(..., const float* d_out, float* d_x)`
    // take exactly these arguments, compiled for this tile size and channel count;
    // shapes were checked by the caller (x/d_x: N·C, out/d_out: pixels·C, offsets:
    // tiles + 1).
    unsafe { l.launch(tile_launch(set, chunks)) }.map_err(drv)?;
    Ok(())
}

/// Direct compositing of `x` at the pixel set into `out`.
pub(crate) fn rasterize(
    gpu: &Gpu,
    p: &ProjData,
    b: &BinsData,
    set: &PixelSet<CudaBackend>,
    x: &CudaBuf<f32>,
    channels: usize,
    out: &mut CudaBuf<f32>,
) -> Result<(), DeviceError> {
    let chunks = channels.div_ceil(CHUNK);
    launch_walk(gpu, "ls_rasterize", p, b, set, x, channels, out, chunks)
}

/// Feature-only backward: `d_x += Wᵀ·d_out`.
pub(crate) fn rasterize_backward(
    gpu: &Gpu,
    p: &ProjData,
    b: &BinsData,
    set: &PixelSet<CudaBackend>,
    d_out: &CudaBuf<f32>,
    channels: usize,
    d_x: &mut CudaBuf<f32>,
) -> Result<(), DeviceError> {
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
