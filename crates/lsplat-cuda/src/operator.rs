//! The cached operator W of one camera: CSR rows of the pixel set (front to back)
//! and a CSC copy (rows ascending per column) for the deterministic transposed
//! product. Indices are u16 when the dimension allows, weights f32/f16/bf16.

use cudarc::driver::LaunchConfig;
use cudarc::driver::PushKernelArg;
use lsplat_core::config::WeightPrecision;
use lsplat_device::{DeviceError, PixelSet};
use lsplat_kernels::Kernel;

use crate::CudaBackend;
use crate::algo::{bits_for, exclusive_scan, radix_sort, segment_offsets};
use crate::buf::{CudaBuf, alloc, read_u32};
use crate::geometry::{BinsData, ProjData};
use crate::gpu::{Gpu, drv, grid};

/// Index storage.
pub(crate) enum Idx {
    U16(CudaBuf<u16>),
    U32(CudaBuf<u32>),
}

/// Weight storage (half formats as raw bits).
pub(crate) enum Wts {
    F32(CudaBuf<f32>),
    F16(CudaBuf<u16>),
    Bf16(CudaBuf<u16>),
}

/// W in both orientations.
pub struct CudaOperator {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) nnz: usize,
    pub(crate) row_ptr: CudaBuf<u32>,
    pub(crate) col_idx: Idx,
    pub(crate) row_w: Wts,
    pub(crate) col_ptr: CudaBuf<u32>,
    pub(crate) row_idx: Idx,
    pub(crate) col_w: Wts,
}

impl Idx {
    fn bytes(&self) -> usize {
        match self {
            Idx::U16(b) => b.bytes(),
            Idx::U32(b) => b.bytes(),
        }
    }
}

impl Wts {
    fn bytes(&self) -> usize {
        match self {
            Wts::F32(b) => b.bytes(),
            Wts::F16(b) | Wts::Bf16(b) => b.bytes(),
        }
    }
}

impl CudaOperator {
    /// Rows, columns, non-zeros.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.nnz)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.row_ptr.bytes()
            + self.col_ptr.bytes()
            + self.col_idx.bytes()
            + self.row_idx.bytes()
            + self.row_w.bytes()
            + self.col_w.bytes()
    }
}

/// Launches a one-buffer-in, one-buffer-out conversion kernel of operator.cu.
fn convert<I: lsplat_device::Element, O: lsplat_device::Element>(
    gpu: &Gpu,
    name: &'static str,
    input: &CudaBuf<I>,
) -> Result<CudaBuf<O>, DeviceError> {
    let n = input.len();
    let out = alloc::<O>(gpu, n)?;
    if n > 0 {
        let f = gpu.function(Kernel::Operator, 16, 0, name)?;
        let n32 = n as u32;
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&input.raw).arg(&n32).arg(&out.raw);
        // SAFETY: matches `ls_to_u16/ls_to_f16/ls_to_bf16(const In*, u32 n, u16* out)`;
        // callers pass u32 (index) or f32 (weight) inputs; both buffers hold n elements.
        unsafe { b.launch(grid(n as u64, 256)) }.map_err(drv)?;
    }
    Ok(out)
}

fn compact_idx(gpu: &Gpu, idx: CudaBuf<u32>, max: usize) -> Result<Idx, DeviceError> {
    Ok(if max <= 1 << 16 {
        Idx::U16(convert(gpu, "ls_to_u16", &idx)?)
    } else {
        Idx::U32(idx)
    })
}

fn compact_w(gpu: &Gpu, w: CudaBuf<f32>, p: WeightPrecision) -> Result<Wts, DeviceError> {
    Ok(match p {
        WeightPrecision::F32 => Wts::F32(w),
        WeightPrecision::F16 => Wts::F16(convert(gpu, "ls_to_f16", &w)?),
        WeightPrecision::Bf16 => Wts::Bf16(convert(gpu, "ls_to_bf16", &w)?),
    })
}

/// Builds W: count pass, scan, one read-back of the non-zero count (to size the
/// entries; cache-warming path), fill pass, then the CSC copy by a stable sort.
pub(crate) fn build(
    gpu: &Gpu,
    p: &ProjData,
    b: &BinsData,
    set: &PixelSet<CudaBackend>,
    precision: WeightPrecision,
) -> Result<CudaOperator, DeviceError> {
    let (rows, cols) = (set.len, p.n);
    let ts = set.grid.tile_size;
    let cfg = LaunchConfig {
        grid_dim: (set.grid.tile_count() as u32, 1, 1),
        block_dim: (ts * ts, 1, 1),
        shared_mem_bytes: 0,
    };
    let width = set.grid.width;
    let mut row_ptr = alloc::<u32>(gpu, rows + 1)?;
    let f = gpu.function(Kernel::Operator, ts, 0, "ls_op_count")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&p.splats.raw)
        .arg(&b.tile_offsets.raw)
        .arg(&b.sorted.raw)
        .arg(&set.pixels.raw)
        .arg(&set.tile_offsets.raw)
        .arg(&width)
        .arg(&row_ptr.raw);
    // SAFETY: matches `ls_op_count(splats, bin_offsets, sorted, pixels, pix_offsets, u32
    // width, u32* counts)` compiled for this tile size; counts holds rows + 1 entries.
    unsafe { l.launch(cfg) }.map_err(drv)?;
    exclusive_scan(gpu, &mut row_ptr, rows + 1)?;
    let nnz = read_u32(gpu, &row_ptr, rows)? as usize;
    let cols_csr = alloc::<u32>(gpu, nnz)?;
    let w_csr = alloc::<f32>(gpu, nnz)?;
    let entry_rows = alloc::<u32>(gpu, nnz)?;
    let f = gpu.function(Kernel::Operator, ts, 0, "ls_op_fill")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&p.splats.raw)
        .arg(&b.tile_offsets.raw)
        .arg(&b.sorted.raw)
        .arg(&set.pixels.raw)
        .arg(&set.tile_offsets.raw)
        .arg(&width)
        .arg(&row_ptr.raw)
        .arg(&cols_csr.raw)
        .arg(&w_csr.raw)
        .arg(&entry_rows.raw);
    // SAFETY: matches `ls_op_fill(..., const u32* row_ptr, u32* cols, float* weights,
    // u32* entry_rows)`; the fill walk repeats the count walk, so it writes exactly
    // row_ptr[rows] = nnz entries, the size of the three outputs.
    unsafe { l.launch(cfg) }.map_err(drv)?;
    // CSC: stable sort of the entries by column.
    let keys = alloc::<u64>(gpu, nnz)?;
    let order = alloc::<u32>(gpu, nnz)?;
    let nnz32 = nnz as u32;
    if nnz > 0 {
        let f = gpu.function(Kernel::Operator, 16, 0, "ls_op_col_keys")?;
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&cols_csr.raw)
            .arg(&nnz32)
            .arg(&keys.raw)
            .arg(&order.raw);
        // SAFETY: matches `ls_op_col_keys(const u32* cols, u32 nnz, u64* keys, u32*
        // order)`; all hold nnz elements.
        unsafe { l.launch(grid(nnz as u64, 256)) }.map_err(drv)?;
    }
    let (keys, order) = radix_sort(gpu, keys, order, nnz, bits_for(cols))?;
    let mut col_ptr = alloc::<u32>(gpu, cols + 1)?;
    segment_offsets(gpu, &keys, nnz, 0, &mut col_ptr, cols)?;
    drop(keys);
    let csc_rows = alloc::<u32>(gpu, nnz)?;
    let csc_w = alloc::<f32>(gpu, nnz)?;
    if nnz > 0 {
        let f = gpu.function(Kernel::Operator, 16, 0, "ls_op_gather")?;
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&order.raw)
            .arg(&entry_rows.raw)
            .arg(&w_csr.raw)
            .arg(&nnz32)
            .arg(&csc_rows.raw)
            .arg(&csc_w.raw);
        // SAFETY: matches `ls_op_gather(const u32* order, const u32* entry_rows, const
        // float* weights, u32 nnz, u32* csc_rows, float* csc_weights)`; `order` is a
        // permutation of 0..nnz.
        unsafe { l.launch(grid(nnz as u64, 256)) }.map_err(drv)?;
    }
    Ok(CudaOperator {
        rows,
        cols,
        nnz,
        row_ptr,
        col_idx: compact_idx(gpu, cols_csr, cols)?,
        row_w: compact_w(gpu, w_csr, precision)?,
        col_ptr,
        row_idx: compact_idx(gpu, csc_rows, rows)?,
        col_w: compact_w(gpu, csc_w, precision)?,
    })
}

/// `out (+)= M·x` for one orientation (`ptr` has `n + 1` entries).
pub(crate) fn product(
    gpu: &Gpu,
    ptr: &CudaBuf<u32>,
    idx: &Idx,
    w: &Wts,
    x: &CudaBuf<f32>,
    channels: usize,
    out: &mut CudaBuf<f32>,
    accumulate: bool,
) -> Result<(), DeviceError> {
    let n = ptr.len() - 1;
    if n == 0 {
        return Ok(());
    }
    let name = match (idx, w) {
        (Idx::U16(_), Wts::F32(_)) => "ls_spmm_u16_f32",
        (Idx::U16(_), Wts::F16(_)) => "ls_spmm_u16_f16",
        (Idx::U16(_), Wts::Bf16(_)) => "ls_spmm_u16_bf16",
        (Idx::U32(_), Wts::F32(_)) => "ls_spmm_u32_f32",
        (Idx::U32(_), Wts::F16(_)) => "ls_spmm_u32_f16",
        (Idx::U32(_), Wts::Bf16(_)) => "ls_spmm_u32_bf16",
    };
    let idx_raw = match idx {
        Idx::U16(b) => &b.raw,
        Idx::U32(b) => &b.raw,
    };
    let w_raw = match w {
        Wts::F32(b) => &b.raw,
        Wts::F16(b) | Wts::Bf16(b) => &b.raw,
    };
    let f = gpu.function(Kernel::Operator, 16, 0, name)?;
    let (n32, c32, acc) = (n as u32, channels as u32, accumulate as i32);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&ptr.raw)
        .arg(idx_raw)
        .arg(w_raw)
        .arg(&x.raw)
        .arg(&out.raw)
        .arg(&n32)
        .arg(&c32)
        .arg(&acc);
    // SAFETY: matches `ls_spmm_<idx>_<w>(const u32* ptr, const I* idx, const W* w,
    // const float* x, float* out, u32 rows, u32 channels, int accumulate)` for the
    // storage types selected above; shapes checked by the caller.
    unsafe { l.launch(grid((n * channels) as u64, 256)) }.map_err(drv)?;
    Ok(())
}
