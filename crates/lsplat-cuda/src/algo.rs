//! Device-wide building blocks: exclusive scan, stable radix sort of 64-bit keys
//! with u32 values, and segment offsets of sorted keys. All stream-ordered.

use cudarc::driver::LaunchConfig;
use cudarc::driver::PushKernelArg;
use lsplat_device::DeviceError;
use lsplat_kernels::Kernel;

use crate::buf::{CudaBuf, alloc};
use crate::gpu::{Gpu, drv, grid};

const SCAN_BLOCK: usize = 1024; // LS_SCAN_BLOCK in util.cu
const RS_CHUNK: usize = 2048; // LS_RS_CHUNK in bins.cu

/// In-place exclusive scan of the first `n` elements of `buf`.
pub(crate) fn exclusive_scan(
    gpu: &Gpu,
    buf: &mut CudaBuf<u32>,
    n: usize,
) -> Result<(), DeviceError> {
    if n == 0 {
        return Ok(());
    }
    let blocks = n.div_ceil(SCAN_BLOCK);
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let f = gpu.function(Kernel::Util, 0, 0, "ls_scan_block")?;
    let n32 = n as u32;
    if blocks == 1 {
        let null = 0u64;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&buf.raw).arg(&buf.raw).arg(&n32).arg(&null);
        // SAFETY: matches `ls_scan_block(const u32*, u32*, u32 n, u32* block_sums)`;
        // buf holds n u32 (in place is allowed), block_sums is null.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        return Ok(());
    }
    let mut sums = alloc::<u32>(gpu, blocks)?;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(&buf.raw).arg(&buf.raw).arg(&n32).arg(&sums.raw);
    // SAFETY: as above, with `sums` holding one u32 per block.
    unsafe { b.launch(cfg) }.map_err(drv)?;
    exclusive_scan(gpu, &mut sums, blocks)?;
    let f = gpu.function(Kernel::Util, 0, 0, "ls_scan_add")?;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(&buf.raw).arg(&n32).arg(&sums.raw);
    // SAFETY: matches `ls_scan_add(u32* out, u32 n, const u32* block_offsets)`.
    unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    Ok(())
}

/// Stable LSD radix sort of `n` (key, value) pairs by key bits `[0, end_bit)`, 8 bits
/// per pass. Returns the sorted buffers (the inputs are consumed as ping-pong space).
pub(crate) fn radix_sort(
    gpu: &Gpu,
    keys: CudaBuf<u64>,
    values: CudaBuf<u32>,
    n: usize,
    end_bit: u32,
) -> Result<(CudaBuf<u64>, CudaBuf<u32>), DeviceError> {
    if n <= 1 || end_bit == 0 {
        return Ok((keys, values));
    }
    let blocks = n.div_ceil(RS_CHUNK);
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let hist_f = gpu.function(Kernel::Bins, 0, 0, "ls_radix_histogram")?;
    let scatter_f = gpu.function(Kernel::Bins, 0, 0, "ls_radix_scatter")?;
    let mut hist = alloc::<u32>(gpu, 256 * blocks)?;
    let (mut k_in, mut v_in) = (keys, values);
    let (mut k_out, mut v_out) = (alloc::<u64>(gpu, n)?, alloc::<u32>(gpu, n)?);
    let n32 = n as u32;
    let mut shift = 0u32;
    while shift < end_bit {
        let mut b = gpu.stream.launch_builder(&hist_f);
        b.arg(&k_in.raw).arg(&n32).arg(&shift).arg(&hist.raw);
        // SAFETY: matches `ls_radix_histogram(const u64*, u32 n, u32 shift, u32* hist)`;
        // hist holds 256 entries per block of the grid.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        exclusive_scan(gpu, &mut hist, 256 * blocks)?;
        let mut b = gpu.stream.launch_builder(&scatter_f);
        b.arg(&k_in.raw)
            .arg(&v_in.raw)
            .arg(&n32)
            .arg(&shift)
            .arg(&hist.raw)
            .arg(&k_out.raw)
            .arg(&v_out.raw);
        // SAFETY: matches `ls_radix_scatter(const u64*, const u32*, u32, u32, const
        // u32*, u64*, u32*)`; all key/value buffers hold n elements, on the same grid as
        // the histogram.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        std::mem::swap(&mut k_in, &mut k_out);
        std::mem::swap(&mut v_in, &mut v_out);
        shift += 8;
    }
    Ok((k_in, v_in))
}

/// `offsets[s]` = first index of sorted `keys[..n]` whose `key >> shift >= s`, for
/// `s in 0..=segments` (`offsets` holds `segments + 1` entries).
pub(crate) fn segment_offsets(
    gpu: &Gpu,
    keys: &CudaBuf<u64>,
    n: usize,
    shift: u32,
    offsets: &mut CudaBuf<u32>,
    segments: usize,
) -> Result<(), DeviceError> {
    if n == 0 {
        return crate::buf::fill(gpu, offsets, 0);
    }
    let f = gpu.function(Kernel::Util, 0, 0, "ls_segment_offsets")?;
    let (n32, seg32) = (n as u32, segments as u32);
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(&keys.raw)
        .arg(&n32)
        .arg(&shift)
        .arg(&offsets.raw)
        .arg(&seg32);
    // SAFETY: matches `ls_segment_offsets(const u64*, u32 n, u32 shift, u32*, u32
    // segments)`; keys are sorted with segment ids < segments, offsets holds
    // segments + 1 entries.
    unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    Ok(())
}

/// Bits needed to represent every value below `count` (0 for count ≤ 1).
pub(crate) fn bits_for(count: usize) -> u32 {
    if count <= 1 {
        0
    } else {
        usize::BITS - (count - 1).leading_zeros()
    }
}
