//! The cached operator W of one camera: CSR rows of the pixel set (front to back)
//! and a CSC copy (rows ascending per column) for the deterministic transposed
//! product. Indices are u16 when the dimension allows, weights f32/f16/bf16.

use lsplat_core::config::WeightPrecision;
use lsplat_device::{DeviceError, Element, PixelSet};
use lsplat_kernels::Kernel;

use crate::GpuBackend;
use crate::algo::{bits_for, checked_total, exclusive_scan, radix_sort, segment_offsets};
use crate::buf::{GpuBuf, alloc};
use crate::geometry::{BinsData, ProjData};
use crate::gpu::Gpu;
use crate::raster::tile_launch;
use crate::runtime::{DevicePtr, KernelArgs, LaunchDims, Runtime};

/// Index storage.
pub(crate) enum Idx<R: Runtime> {
    U16(GpuBuf<R, u16>),
    U32(GpuBuf<R, u32>),
}

/// Weight storage (half formats as raw bits).
pub(crate) enum Wts<R: Runtime> {
    F32(GpuBuf<R, f32>),
    F16(GpuBuf<R, u16>),
    Bf16(GpuBuf<R, u16>),
}

/// The rows of one orientation with more than `min` entries, which the grouped SpMM
/// leaves to a block each (`ls_spmm_*_long`).
pub(crate) struct LongRows<R: Runtime> {
    pub(crate) list: GpuBuf<R, u32>,
    pub(crate) min: u32,
}

/// W in both orientations.
pub struct GpuOperator<R: Runtime> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) nnz: usize,
    pub(crate) row_ptr: GpuBuf<R, u32>,
    pub(crate) col_idx: Idx<R>,
    pub(crate) row_w: Wts<R>,
    pub(crate) row_long: LongRows<R>,
    pub(crate) col_ptr: GpuBuf<R, u32>,
    pub(crate) row_idx: Idx<R>,
    pub(crate) col_w: Wts<R>,
    pub(crate) col_long: LongRows<R>,
}

impl<R: Runtime> Idx<R> {
    fn bytes(&self) -> usize {
        match self {
            Idx::U16(b) => b.bytes(),
            Idx::U32(b) => b.bytes(),
        }
    }
}

impl<R: Runtime> Wts<R> {
    fn bytes(&self) -> usize {
        match self {
            Wts::F32(b) => b.bytes(),
            Wts::F16(b) | Wts::Bf16(b) => b.bytes(),
        }
    }
}

impl<R: Runtime> GpuOperator<R> {
    /// Rows, columns, non-zeros.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.nnz)
    }

    /// Bytes one orientation holds (what one product reads of the operator).
    pub fn pass_bytes(&self) -> usize {
        self.row_ptr.bytes() + self.col_idx.bytes() + self.row_w.bytes()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.row_ptr.bytes()
            + self.col_ptr.bytes()
            + self.col_idx.bytes()
            + self.row_idx.bytes()
            + self.row_w.bytes()
            + self.col_w.bytes()
            + self.row_long.list.bytes()
            + self.col_long.list.bytes()
    }
}

/// The rows of `ptr` with more than the context's long-row threshold of entries (read
/// back once, when the operator is built).
fn long_rows<R: Runtime>(gpu: &Gpu<R>, ptr: &GpuBuf<R, u32>) -> Result<LongRows<R>, DeviceError> {
    let min = gpu.spmm_long_min.load(std::sync::atomic::Ordering::Relaxed);
    let ptr = crate::buf::download(gpu, ptr)?;
    let list: Vec<u32> = ptr
        .windows(2)
        .enumerate()
        .filter(|(_, p)| p[1] - p[0] > min)
        .map(|(r, _)| r as u32)
        .collect();
    Ok(LongRows {
        list: crate::buf::upload(gpu, &list)?,
        min,
    })
}

/// Launches a one-buffer-in, one-buffer-out conversion kernel of operator.cu.
fn convert<R: Runtime, I: Element, O: Element>(
    gpu: &Gpu<R>,
    name: &'static str,
    input: &GpuBuf<R, I>,
) -> Result<GpuBuf<R, O>, DeviceError> {
    let n = input.len();
    let out = alloc::<R, O>(gpu, n)?;
    if n > 0 {
        let mut a = KernelArgs::new();
        a.push(input.ptr()).push(n as u32).push(out.ptr());
        let dims = LaunchDims::cover(n as u64, 256);
        // SAFETY: matches `ls_to_u16/ls_to_f16/ls_to_bf16(const In*, u32 n, u16* out)`;
        // callers pass u32 (index) or f32 (weight) inputs; both buffers hold n elements.
        unsafe { gpu.launch(Kernel::Operator, 16, 0, name, dims, &mut a)? };
    }
    Ok(out)
}

fn compact_idx<R: Runtime>(
    gpu: &Gpu<R>,
    idx: GpuBuf<R, u32>,
    max: usize,
) -> Result<Idx<R>, DeviceError> {
    Ok(if max <= 1 << 16 {
        Idx::U16(convert(gpu, "ls_to_u16", &idx)?)
    } else {
        Idx::U32(idx)
    })
}

fn compact_w<R: Runtime>(
    gpu: &Gpu<R>,
    w: GpuBuf<R, f32>,
    p: WeightPrecision,
) -> Result<Wts<R>, DeviceError> {
    Ok(match p {
        WeightPrecision::F32 | WeightPrecision::Recompute => Wts::F32(w),
        // The GPU has no gap-coded layout: `compact` keeps its 16-bit weights as f16.
        WeightPrecision::F16 | WeightPrecision::Compact => Wts::F16(convert(gpu, "ls_to_f16", &w)?),
        WeightPrecision::Bf16 => Wts::Bf16(convert(gpu, "ls_to_bf16", &w)?),
    })
}

/// Builds W: count pass, scan, one read-back of the non-zero count (to size the
/// entries; cache-warming path), fill pass, then the CSC copy by a stable sort.
pub(crate) fn build<R: Runtime>(
    gpu: &Gpu<R>,
    p: &ProjData<R>,
    b: &BinsData<R>,
    set: &PixelSet<GpuBackend<R>>,
    precision: WeightPrecision,
) -> Result<GpuOperator<R>, DeviceError> {
    let (rows, cols) = (set.len, p.n);
    let ts = set.grid.tile_size;
    let dims = tile_launch(set, 1);
    let width = set.grid.width;
    let mut row_ptr = alloc::<R, u32>(gpu, rows + 1)?;
    let mut a = KernelArgs::new();
    a.push(p.splats.ptr())
        .push(b.tile_offsets.ptr())
        .push(b.sorted.ptr())
        .push(set.pixels.ptr())
        .push(set.tile_offsets.ptr())
        .push(width)
        .push(row_ptr.ptr());
    // SAFETY: matches `ls_op_count(splats, bin_offsets, sorted, pixels, pix_offsets, u32
    // width, u32* counts)` compiled for this tile size; counts holds rows + 1 entries.
    unsafe { gpu.launch(Kernel::Operator, ts, 0, "ls_op_count", dims, &mut a)? };
    let nnz = checked_total(gpu, "build_operator", "non-zero weights", &row_ptr, rows)?;
    exclusive_scan(gpu, &mut row_ptr, rows + 1)?;
    let cols_csr = alloc::<R, u32>(gpu, nnz)?;
    let w_csr = alloc::<R, f32>(gpu, nnz)?;
    let entry_rows = alloc::<R, u32>(gpu, nnz)?;
    let mut a = KernelArgs::new();
    a.push(p.splats.ptr())
        .push(b.tile_offsets.ptr())
        .push(b.sorted.ptr())
        .push(set.pixels.ptr())
        .push(set.tile_offsets.ptr())
        .push(width)
        .push(row_ptr.ptr())
        .push(cols_csr.ptr())
        .push(w_csr.ptr())
        .push(entry_rows.ptr());
    // SAFETY: matches `ls_op_fill(..., const u32* row_ptr, u32* cols, float* weights,
    // u32* entry_rows)`; the fill walk repeats the count walk, so it writes exactly
    // row_ptr[rows] = nnz entries, the size of the three outputs.
    unsafe { gpu.launch(Kernel::Operator, ts, 0, "ls_op_fill", dims, &mut a)? };
    // CSC: stable sort of the entries by column.
    let keys = alloc::<R, u64>(gpu, nnz)?;
    let order = alloc::<R, u32>(gpu, nnz)?;
    let spread = LaunchDims::cover(nnz as u64, 256);
    if nnz > 0 {
        let mut a = KernelArgs::new();
        a.push(cols_csr.ptr())
            .push(nnz as u32)
            .push(keys.ptr())
            .push(order.ptr());
        // SAFETY: matches `ls_op_col_keys(const u32* cols, u32 nnz, u64* keys, u32*
        // order)`; all hold nnz elements.
        unsafe { gpu.launch(Kernel::Operator, 16, 0, "ls_op_col_keys", spread, &mut a)? };
    }
    let (keys, order) = radix_sort(gpu, keys, order, nnz, bits_for(cols))?;
    let mut col_ptr = alloc::<R, u32>(gpu, cols + 1)?;
    segment_offsets(gpu, &keys, nnz, 0, &mut col_ptr, cols)?;
    drop(keys);
    let csc_rows = alloc::<R, u32>(gpu, nnz)?;
    let csc_w = alloc::<R, f32>(gpu, nnz)?;
    if nnz > 0 {
        let mut a = KernelArgs::new();
        a.push(order.ptr())
            .push(entry_rows.ptr())
            .push(w_csr.ptr())
            .push(nnz as u32)
            .push(csc_rows.ptr())
            .push(csc_w.ptr());
        // SAFETY: matches `ls_op_gather(const u32* order, const u32* entry_rows, const
        // float* weights, u32 nnz, u32* csc_rows, float* csc_weights)`; `order` is a
        // permutation of 0..nnz.
        unsafe { gpu.launch(Kernel::Operator, 16, 0, "ls_op_gather", spread, &mut a)? };
    }
    Ok(GpuOperator {
        rows,
        cols,
        nnz,
        row_long: long_rows(gpu, &row_ptr)?,
        row_ptr,
        col_idx: compact_idx(gpu, cols_csr, cols)?,
        row_w: compact_w(gpu, w_csr, precision)?,
        col_long: long_rows(gpu, &col_ptr)?,
        col_ptr,
        row_idx: compact_idx(gpu, csc_rows, rows)?,
        col_w: compact_w(gpu, csc_w, precision)?,
    })
}

/// `LS_SPMM_LANES` and `LS_SPMM_GROUPED_MAX` of `operator.cu`: rows of at most this
/// many channels are summed by a group of this many lanes.
const SPMM_LANES: usize = 32;
const SPMM_GROUPED_MAX: usize = 4;
/// `LS_SPMM_LONG_THREADS`: the block that sums one long row.
const SPMM_LONG_THREADS: u32 = 256;
/// Rows (in practice CSC columns: Gaussians) with more entries than this get a block
/// of their own in the grouped SpMM ([`crate::GpuBackend::set_spmm_long_min`]).
pub(crate) const SPMM_LONG_MIN: u32 = 2048;

/// `out (+)= M·x` for one orientation (`ptr` has `n + 1` entries).
#[allow(clippy::too_many_arguments)]
pub(crate) fn product<R: Runtime>(
    gpu: &Gpu<R>,
    ptr: &GpuBuf<R, u32>,
    idx: &Idx<R>,
    w: &Wts<R>,
    long: &LongRows<R>,
    x: &GpuBuf<R, f32>,
    channels: usize,
    out: &mut GpuBuf<R, f32>,
    accumulate: bool,
) -> Result<(), DeviceError> {
    let n = ptr.len() - 1;
    if n == 0 {
        return Ok(());
    }
    let (name, idx_ptr, w_ptr) = typed(&SPMM, idx, w);
    // ptr, idx, w, x, out: the first parameters of both kernels.
    let operands = || {
        let mut a = KernelArgs::new();
        a.push(ptr.ptr())
            .push(idx_ptr)
            .push(w_ptr)
            .push(x.ptr())
            .push(out.ptr());
        a
    };
    let mut a = operands();
    a.push(n as u32)
        .push(channels as u32)
        .push(accumulate as i32);
    // Narrow rows take a group of lanes each (where shuffles are cheap), others a
    // thread per (row, channel).
    let grouped =
        channels <= SPMM_GROUPED_MAX && gpu.grouped_spmm.load(std::sync::atomic::Ordering::Relaxed);
    // Rows longer than the list's threshold are left to a block each.
    let split = grouped && !long.list.is_empty();
    a.push(grouped as i32)
        .push(if split { long.min } else { u32::MAX });
    let threads = if grouped {
        n * SPMM_LANES
    } else {
        n * channels
    };
    let dims = LaunchDims::cover(threads as u64, 256);
    // SAFETY: matches `ls_spmm_<idx>_<w>(const u32* ptr, const I* idx, const W* w,
    // const float* x, float* out, u32 rows, u32 channels, int accumulate, int grouped,
    // u32 long_min)` for the storage types selected above; shapes checked by the caller.
    unsafe { gpu.launch(Kernel::Operator, 16, 0, name, dims, &mut a)? };
    if !split {
        return Ok(());
    }
    let mut a = operands();
    a.push(long.list.ptr())
        .push(long.list.len() as u32)
        .push(channels as u32)
        .push(accumulate as i32);
    let blocks = long.list.len().min(65_535) as u32;
    // SAFETY: matches `ls_spmm_<idx>_<w>_long(const u32* ptr, const I* idx, const W* w,
    // const float* x, float* out, const u32* long_rows, u32 n_long, u32 channels, int
    // accumulate)`; `long.list` holds `long.list.len()` row indices below `ptr.len() - 1`.
    unsafe {
        gpu.launch(
            Kernel::Operator,
            16,
            0,
            typed(&SPMM_LONG, idx, w).0,
            LaunchDims::grid(blocks, SPMM_LONG_THREADS),
            &mut a,
        )
    }
}

/// The kernel of `family` (`[u16/u32 indices][f32/f16/bf16 weights]`) for the storage
/// of one orientation, with the raw pointers of its indices and weights.
fn typed<R: Runtime>(
    family: &[[&'static str; 3]; 2],
    idx: &Idx<R>,
    w: &Wts<R>,
) -> (&'static str, DevicePtr, DevicePtr) {
    let (i, idx_ptr) = match idx {
        Idx::U16(b) => (0, b.ptr()),
        Idx::U32(b) => (1, b.ptr()),
    };
    let (j, w_ptr) = match w {
        Wts::F32(b) => (0, b.ptr()),
        Wts::F16(b) => (1, b.ptr()),
        Wts::Bf16(b) => (2, b.ptr()),
    };
    (family[i][j], idx_ptr, w_ptr)
}

const SPMM: [[&str; 3]; 2] = [
    ["ls_spmm_u16_f32", "ls_spmm_u16_f16", "ls_spmm_u16_bf16"],
    ["ls_spmm_u32_f32", "ls_spmm_u32_f16", "ls_spmm_u32_bf16"],
];

const SPMM_LONG: [[&str; 3]; 2] = [
    [
        "ls_spmm_u16_f32_long",
        "ls_spmm_u16_f16_long",
        "ls_spmm_u16_bf16_long",
    ],
    [
        "ls_spmm_u32_f32_long",
        "ls_spmm_u32_f16_long",
        "ls_spmm_u32_bf16_long",
    ],
];

const SPMM_SPARSE: [[&str; 3]; 2] = [
    [
        "ls_spmm_sparse_u16_f32",
        "ls_spmm_sparse_u16_f16",
        "ls_spmm_sparse_u16_bf16",
    ],
    [
        "ls_spmm_sparse_u32_f32",
        "ls_spmm_sparse_u32_f16",
        "ls_spmm_sparse_u32_bf16",
    ],
];

const SPMM_T_SPARSE: [[&str; 3]; 2] = [
    [
        "ls_spmm_t_sparse_u16_f32",
        "ls_spmm_t_sparse_u16_f16",
        "ls_spmm_t_sparse_u16_bf16",
    ],
    [
        "ls_spmm_t_sparse_u32_f32",
        "ls_spmm_t_sparse_u32_f16",
        "ls_spmm_t_sparse_u32_bf16",
    ],
];

/// `out = W·x` for the k-sparse `x` given by `idx`, `val` (`[cols, k]`) through the CSR
/// rows. Shapes are checked by the caller; columns are not (the kernel skips any
/// `≥ channels`).
pub(crate) fn product_sparse<R: Runtime>(
    gpu: &Gpu<R>,
    op: &GpuOperator<R>,
    idx: &GpuBuf<R, u32>,
    val: &GpuBuf<R, f32>,
    k: usize,
    channels: usize,
    out: &mut GpuBuf<R, f32>,
) -> Result<(), DeviceError> {
    if op.rows == 0 {
        return Ok(());
    }
    let (name, idx_ptr, w_ptr) = typed(&SPMM_SPARSE, &op.col_idx, &op.row_w);
    let mut a = KernelArgs::new();
    a.push(op.row_ptr.ptr())
        .push(idx_ptr)
        .push(w_ptr)
        .push(idx.ptr())
        .push(val.ptr())
        .push(out.ptr())
        .push(op.rows as u32)
        .push(k as u32)
        .push(channels as u32);
    let dims = LaunchDims::cover((op.rows * channels) as u64, 256);
    // SAFETY: matches `ls_spmm_sparse_<idx>_<w>(const u32* ptr, const I* cols, const W*
    // w, const u32* idx, const float* val, float* out, u32 rows, u32 k, u32 channels)`
    // for the CSR storage types selected above; the caller checked idx and val hold
    // cols·k and out at least rows·channels elements; columns ≥ channels are skipped.
    unsafe { gpu.launch(Kernel::Operator, 16, 0, name, dims, &mut a) }
}

/// `d_val += (Wᵀ·d_out)` at the pairs' columns through the CSC columns. Shapes are
/// checked by the caller; columns are not (pairs with a column `≥ channels` get
/// nothing).
pub(crate) fn product_t_sparse<R: Runtime>(
    gpu: &Gpu<R>,
    op: &GpuOperator<R>,
    idx: &GpuBuf<R, u32>,
    d_out: &GpuBuf<R, f32>,
    k: usize,
    channels: usize,
    d_val: &mut GpuBuf<R, f32>,
) -> Result<(), DeviceError> {
    if op.cols == 0 {
        return Ok(());
    }
    let (name, idx_ptr, w_ptr) = typed(&SPMM_T_SPARSE, &op.row_idx, &op.col_w);
    let mut a = KernelArgs::new();
    a.push(op.col_ptr.ptr())
        .push(idx_ptr)
        .push(w_ptr)
        .push(idx.ptr())
        .push(d_out.ptr())
        .push(d_val.ptr())
        .push(op.cols as u32)
        .push(k as u32)
        .push(channels as u32);
    let dims = LaunchDims::cover((op.cols * k) as u64, 256);
    // SAFETY: matches `ls_spmm_t_sparse_<idx>_<w>(const u32* ptr, const I* rows_of,
    // const W* w, const u32* idx, const float* d_out, float* d_val, u32 cols, u32 k, u32
    // channels)` for the CSC storage types selected above; the caller checked idx and
    // d_val hold cols·k and d_out at least rows·channels elements; the kernel reads
    // d_out only at columns below channels.
    unsafe { gpu.launch(Kernel::Operator, 16, 0, name, dims, &mut a) }
}
