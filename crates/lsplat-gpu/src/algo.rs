//! Device-wide building blocks: exclusive scan, stable radix sort of 64-bit keys
//! with u32 values, and segment offsets of sorted keys. All stream-ordered.

use lsplat_device::{DeviceError, Result};
use lsplat_kernels::Kernel;

use crate::buf::{GpuBuf, alloc};
use crate::gpu::Gpu;
use crate::runtime::{KernelArgs, LaunchDims, Runtime};

const SCAN_BLOCK: usize = 1024; // LS_SCAN_BLOCK in util.cu
const RS_CHUNK: usize = 2048; // LS_RS_CHUNK in bins.cu

/// Fails when a count that the kernels index with 32 bits reaches 2³².
pub(crate) fn check_u32(op: &'static str, what: &str, n: usize) -> Result<()> {
    if n >= u32::MAX as usize {
        return Err(DeviceError::shape(
            op,
            format!("{n} {what} exceed the 2³² − 1 the kernels can index"),
        ));
    }
    Ok(())
}

/// In-place exclusive scan of the first `n` elements of `buf`.
pub(crate) fn exclusive_scan<R: Runtime>(
    gpu: &Gpu<R>,
    buf: &mut GpuBuf<R, u32>,
    n: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    check_u32("exclusive_scan", "elements", n)?;
    let blocks = n.div_ceil(SCAN_BLOCK);
    let dims = LaunchDims::grid(blocks as u32, 256);
    let n32 = n as u32;
    let sums = if blocks > 1 {
        Some(alloc::<R, u32>(gpu, blocks)?)
    } else {
        None
    };
    let mut a = KernelArgs::new();
    a.push(buf.ptr())
        .push(buf.ptr())
        .push(n32)
        .push(sums.as_ref().map_or(0u64, |s| s.ptr()));
    // SAFETY: matches `ls_scan_block(const u32*, u32*, u32 n, u32* block_sums)`; buf
    // holds n u32 (in place is allowed); block_sums is null or holds one u32 per block.
    unsafe { gpu.launch(Kernel::Util, 0, 0, "ls_scan_block", dims, &mut a)? };
    let Some(mut sums) = sums else {
        return Ok(());
    };
    exclusive_scan(gpu, &mut sums, blocks)?;
    let mut a = KernelArgs::new();
    a.push(buf.ptr()).push(n32).push(sums.ptr());
    // SAFETY: matches `ls_scan_add(u32* out, u32 n, const u32* block_offsets)`.
    unsafe {
        gpu.launch(
            Kernel::Util,
            0,
            0,
            "ls_scan_add",
            LaunchDims::cover(n as u64, 256),
            &mut a,
        )
    }
}

/// Stable LSD radix sort of `n` (key, value) pairs by key bits `[0, end_bit)`, 8 bits
/// per pass. Returns the sorted buffers (the inputs are consumed as ping-pong space).
pub(crate) fn radix_sort<R: Runtime>(
    gpu: &Gpu<R>,
    keys: GpuBuf<R, u64>,
    values: GpuBuf<R, u32>,
    n: usize,
    end_bit: u32,
) -> Result<(GpuBuf<R, u64>, GpuBuf<R, u32>)> {
    if n <= 1 || end_bit == 0 {
        return Ok((keys, values));
    }
    check_u32("radix_sort", "keys", n)?;
    let blocks = n.div_ceil(RS_CHUNK);
    let dims = LaunchDims::grid(blocks as u32, 256);
    let mut hist = alloc::<R, u32>(gpu, 256 * blocks)?;
    let (mut k_in, mut v_in) = (keys, values);
    let (mut k_out, mut v_out) = (alloc::<R, u64>(gpu, n)?, alloc::<R, u32>(gpu, n)?);
    let n32 = n as u32;
    let mut shift = 0u32;
    while shift < end_bit {
        let mut a = KernelArgs::new();
        a.push(k_in.ptr()).push(n32).push(shift).push(hist.ptr());
        // SAFETY: matches `ls_radix_histogram(const u64*, u32 n, u32 shift, u32* hist)`;
        // hist holds 256 entries per block of the grid.
        unsafe { gpu.launch(Kernel::Bins, 0, 0, "ls_radix_histogram", dims, &mut a)? };
        exclusive_scan(gpu, &mut hist, 256 * blocks)?;
        let mut a = KernelArgs::new();
        a.push(k_in.ptr())
            .push(v_in.ptr())
            .push(n32)
            .push(shift)
            .push(hist.ptr())
            .push(k_out.ptr())
            .push(v_out.ptr());
        // SAFETY: matches `ls_radix_scatter(const u64*, const u32*, u32, u32, const
        // u32*, u64*, u32*)`; all key/value buffers hold n elements, on the same grid as
        // the histogram.
        unsafe { gpu.launch(Kernel::Bins, 0, 0, "ls_radix_scatter", dims, &mut a)? };
        std::mem::swap(&mut k_in, &mut k_out);
        std::mem::swap(&mut v_in, &mut v_out);
        shift += 8;
    }
    Ok((k_in, v_in))
}

/// `offsets[s]` = first index of sorted `keys[..n]` whose `key >> shift >= s`, for
/// `s in 0..=segments` (`offsets` holds `segments + 1` entries).
pub(crate) fn segment_offsets<R: Runtime>(
    gpu: &Gpu<R>,
    keys: &GpuBuf<R, u64>,
    n: usize,
    shift: u32,
    offsets: &mut GpuBuf<R, u32>,
    segments: usize,
) -> Result<()> {
    if n == 0 {
        return crate::buf::fill(gpu, offsets, 0);
    }
    check_u32("segment_offsets", "keys", n)?;
    let mut a = KernelArgs::new();
    a.push(keys.ptr())
        .push(n as u32)
        .push(shift)
        .push(offsets.ptr())
        .push(segments as u32);
    // SAFETY: matches `ls_segment_offsets(const u64*, u32 n, u32 shift, u32*, u32
    // segments)`; keys are sorted with segment ids < segments, offsets holds
    // segments + 1 entries.
    unsafe {
        gpu.launch(
            Kernel::Util,
            0,
            0,
            "ls_segment_offsets",
            LaunchDims::cover(n as u64, 256),
            &mut a,
        )
    }
}

/// Bits needed to represent every value below `count` (0 for count ≤ 1).
pub(crate) fn bits_for(count: usize) -> u32 {
    if count <= 1 {
        0
    } else {
        usize::BITS - (count - 1).leading_zeros()
    }
}

/// Σ `buf[..n]` in 64 bits, read back to the host (waits for the device): the size of
/// what a scan of counts describes, checked against the 32-bit indices of the kernels.
pub(crate) fn checked_total<R: Runtime>(
    gpu: &Gpu<R>,
    op: &'static str,
    what: &str,
    buf: &GpuBuf<R, u32>,
    n: usize,
) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    check_u32(op, "counts", n)?;
    let total = alloc::<R, u64>(gpu, 1)?;
    let mut a = KernelArgs::new();
    a.push(buf.ptr()).push(n as u32).push(total.ptr());
    // SAFETY: matches `ls_sum_u32(const u32* in, u32 n, u64* total)`; buf holds at
    // least n elements, total one zeroed u64; 256 threads per block as the kernel needs.
    unsafe {
        gpu.launch(
            Kernel::Util,
            0,
            0,
            "ls_sum_u32",
            LaunchDims::cover(n as u64, 256),
            &mut a,
        )?
    };
    let t = crate::buf::download(gpu, &total)?[0];
    check_u32(op, what, t as usize)?;
    Ok(t as usize)
}

/// Read bandwidth of device memory in bytes per second: the best of three passes of
/// `ls_read_probe` over a 256 MiB buffer (larger than any GPU's last-level cache):
/// the best of three passes of eight back-to-back launches, each pass timed between two
/// synchronisations (one launch per pass counted the launch and the synchronisation
/// in: ~50 µs of a ~70 µs read on the H200).
pub(crate) fn read_bandwidth<R: Runtime>(gpu: &Gpu<R>) -> Result<f64> {
    const LEN: usize = (256 << 20) / 4;
    let (secs, _) = read_probe(gpu, LEN, 3, 8)?;
    Ok((LEN * 4) as f64 / secs)
}

/// `passes` runs of `launches` back-to-back `ls_read_probe` over `len` ones: the best
/// time per launch in seconds and the probe's total of the last launch (`len` when
/// every element was read once).
fn read_probe<R: Runtime>(
    gpu: &Gpu<R>,
    len: usize,
    passes: usize,
    launches: usize,
) -> Result<(f64, f64)> {
    const BLOCKS: u32 = 4096;
    const THREADS: u32 = 256;
    let mut src = alloc::<R, f32>(gpu, len)?;
    crate::buf::fill(gpu, &mut src, 1.0f32)?;
    let out = alloc::<R, f32>(gpu, (BLOCKS * THREADS) as usize)?;
    let mut best = f64::INFINITY;
    for _ in 0..passes.max(1) {
        gpu.runtime().synchronize()?;
        let t0 = std::time::Instant::now();
        for _ in 0..launches.max(1) {
            let mut a = KernelArgs::new();
            a.push(src.ptr()).push(len as u64).push(out.ptr());
            // SAFETY: matches `ls_read_probe(const float* in, u64 n, float* out)` in
            // util.cu: `src` holds `len` floats and `out` one per launched thread.
            unsafe {
                gpu.launch(
                    Kernel::Util,
                    0,
                    0,
                    "ls_read_probe",
                    LaunchDims::grid(BLOCKS, THREADS),
                    &mut a,
                )?
            };
        }
        gpu.runtime().synchronize()?;
        best = best.min(t0.elapsed().as_secs_f64() / launches.max(1) as f64);
    }
    let total = crate::buf::download(gpu, &out)?
        .iter()
        .map(|&v| f64::from(v))
        .sum();
    Ok((best, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simt::{Simt, SimtOptions};

    fn simt() -> Option<Gpu<Simt>> {
        match Simt::new(SimtOptions::default()) {
            Ok(rt) => Some(Gpu::new(rt)),
            Err(e) => {
                let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
                assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but {e}");
                eprintln!("SKIPPED (no simt runtime): {e}");
                None
            }
        }
    }

    #[test]
    fn counts_at_two_to_the_32_are_rejected() {
        assert!(check_u32("op", "keys", u32::MAX as usize - 1).is_ok());
        assert!(check_u32("op", "keys", u32::MAX as usize).is_err());
    }

    /// The total of scanned counts is summed in 64 bits on the device, so a total that a
    /// 32-bit scan would wrap is an error instead of a silently wrong layout.
    #[test]
    fn a_total_that_would_wrap_the_scan_is_an_error() {
        let Some(gpu) = simt() else { return };
        let fits = crate::buf::upload(&gpu, &[1u32 << 30, 1 << 30, (1 << 30) - 2, 7]).unwrap();
        assert_eq!(
            checked_total(&gpu, "bin_and_sort", "intersections", &fits, 3).unwrap(),
            (3usize << 30) - 2
        );
        let wraps = crate::buf::upload(&gpu, &[1u32 << 31, 1 << 31, 5]).unwrap();
        let e = checked_total(&gpu, "bin_and_sort", "intersections", &wraps, 3).unwrap_err();
        assert!(
            e.to_string().contains("4294967301 intersections exceed"),
            "{e}"
        );
    }

    /// The bandwidth probe reads every element once (a grid smaller and larger than
    /// the buffer) and times a real pass.
    #[test]
    fn the_read_probe_reads_every_element_once() {
        let Some(gpu) = simt() else { return };
        for len in [1000, 1003, 3 << 20, (3 << 20) + 5] {
            let (secs, total) = read_probe(&gpu, len, 1, 2).unwrap();
            assert_eq!(total, len as f64, "len {len}");
            assert!(secs > 0.0 && secs.is_finite());
        }
    }
}
