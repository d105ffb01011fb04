//! The cached sparse operator W of one camera: CSR rows (valid pixels, front to
//! back) for the forward SpMM and a transposed copy (CSC) for the deterministic,
//! atomic-free backward.

use half::{bf16, f16};
use lsplat_core::config::WeightPrecision;

use crate::bins::CpuBins;
use crate::channels::{Channels, with_channels};
use crate::pool::{Workers, balanced_ranges};
use crate::project::ProjSplat;
use crate::raster::{Pixels, TileScratch, centre, gather, tile_ranges, walk_pixel};

/// Index storage, as narrow as the scene allows.
#[derive(Clone, Debug)]
pub enum Indices {
    /// Up to 65 536 distinct values.
    U16(Vec<u16>),
    /// Anything else.
    U32(Vec<u32>),
}

/// Weight storage.
#[derive(Clone, Debug)]
pub enum Weights {
    /// Exact.
    F32(Vec<f32>),
    /// IEEE half.
    F16(Vec<f16>),
    /// bfloat16.
    Bf16(Vec<bf16>),
}

/// An index element.
pub trait Index: Copy + Send + Sync {
    /// As usize.
    fn get(self) -> usize;
}
impl Index for u16 {
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}
impl Index for u32 {
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

/// A weight element.
pub trait Weight: Copy + Send + Sync {
    /// As f32.
    fn get(self) -> f32;
}
impl Weight for f32 {
    #[inline(always)]
    fn get(self) -> f32 {
        self
    }
}
impl Weight for f16 {
    /// Branch-free widening for finite values (weights are finite): the 15 magnitude
    /// bits shifted into an f32 and rescaled by 2¹¹² is exact for normal and subnormal
    /// halves alike, and much faster than a conversion without F16C instructions.
    #[inline(always)]
    fn get(self) -> f32 {
        let h = self.to_bits() as u32;
        let magnitude = f32::from_bits((h & 0x7fff) << 13) * f32::from_bits(0x7780_0000);
        f32::from_bits(magnitude.to_bits() | ((h & 0x8000) << 16))
    }
}
impl Weight for bf16 {
    #[inline(always)]
    fn get(self) -> f32 {
        self.to_f32()
    }
}

impl Indices {
    fn new(values: impl Iterator<Item = u32>, max: usize) -> Self {
        if max <= 1 << 16 {
            Indices::U16(values.map(|v| v as u16).collect())
        } else {
            Indices::U32(values.collect())
        }
    }
    fn elem_bytes(&self) -> usize {
        match self {
            Indices::U16(_) => 2,
            Indices::U32(_) => 4,
        }
    }
}

impl Weights {
    fn new(values: impl Iterator<Item = f32>, p: WeightPrecision) -> Self {
        match p {
            WeightPrecision::F32 => Weights::F32(values.collect()),
            WeightPrecision::F16 => Weights::F16(values.map(f16::from_f32).collect()),
            WeightPrecision::Bf16 => Weights::Bf16(values.map(bf16::from_f32).collect()),
        }
    }
    fn elem_bytes(&self) -> usize {
        match self {
            Weights::F32(_) => 4,
            _ => 2,
        }
    }
}

/// W in both orientations.
#[derive(Clone, Debug)]
pub struct CpuOperator {
    /// Rows (pixels of the set).
    pub rows: usize,
    /// Columns (Gaussians).
    pub cols: usize,
    /// CSR row offsets.
    pub row_ptr: Vec<u32>,
    /// CSR Gaussian of each entry.
    pub col_idx: Indices,
    /// CSR weights.
    pub row_w: Weights,
    /// CSC column offsets.
    pub col_ptr: Vec<u32>,
    /// CSC row of each entry (ascending within a column).
    pub row_idx: Indices,
    /// CSC weights.
    pub col_w: Weights,
}

impl CpuOperator {
    /// Non-zeros.
    pub fn nnz(&self) -> usize {
        *self.row_ptr.last().unwrap_or(&0) as usize
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        4 * (self.row_ptr.len() + self.col_ptr.len())
            + self.nnz() * (self.col_idx.elem_bytes() + self.row_idx.elem_bytes())
            + self.nnz() * (self.row_w.elem_bytes() + self.col_w.elem_bytes())
    }

    /// The CSR row `r` as `(gaussian, weight)` pairs in f32 (for tests and tools).
    pub fn row(&self, r: usize) -> Vec<(u32, f32)> {
        let (a, b) = (self.row_ptr[r] as usize, self.row_ptr[r + 1] as usize);
        (a..b)
            .map(|k| {
                let g = match &self.col_idx {
                    Indices::U16(v) => v[k] as u32,
                    Indices::U32(v) => v[k],
                };
                let w = match &self.row_w {
                    Weights::F32(v) => v[k],
                    Weights::F16(v) => v[k].to_f32(),
                    Weights::Bf16(v) => v[k].to_f32(),
                };
                (g, w)
            })
            .collect()
    }
}

/// Builds W for the pixel set with exactly the rasterizer's rules.
pub fn build(
    workers: &Workers,
    scratch: &TileScratch,
    splats: &[ProjSplat],
    bins: &CpuBins,
    px: Pixels<'_>,
    gaussians: usize,
    precision: WeightPrecision,
) -> Result<CpuOperator, String> {
    let ranges = tile_ranges(workers, &px, bins);
    let offs = px.tile_offsets;
    let parts = workers.map_ranges(&ranges, |tiles| {
        let mut lens = Vec::new();
        let mut entries: Vec<(u32, f32)> = Vec::new();
        let mut local = scratch.slot(&ranges, &tiles);
        for t in tiles {
            let list = bins.tile(t);
            if offs[t] == offs[t + 1] {
                continue;
            }
            gather(splats, list, &mut local);
            for i in offs[t] as usize..offs[t + 1] as usize {
                let (cx, cy) = centre(px.pixels[i], px.width);
                let before = entries.len();
                walk_pixel(&local, list, cx, cy, |_, g, w| entries.push((g, w)));
                lens.push((entries.len() - before) as u32);
            }
        }
        (lens, entries)
    });
    let rows = px.pixels.len();
    let nnz: usize = parts.iter().map(|p| p.1.len()).sum();
    if nnz >= u32::MAX as usize {
        return Err(format!(
            "operator has {nnz} non-zeros; at most 2^32 - 1 are supported per camera"
        ));
    }
    let mut row_ptr = Vec::with_capacity(rows + 1);
    row_ptr.push(0u32);
    let mut acc = 0u32;
    for (lens, _) in &parts {
        for &l in lens {
            acc += l;
            row_ptr.push(acc);
        }
    }
    let entries = || parts.iter().flat_map(|p| p.1.iter().copied());
    // Transpose by counting sort over Gaussians; rows stay ascending per column.
    let mut col_ptr = vec![0u32; gaussians + 1];
    for (g, _) in entries() {
        col_ptr[g as usize + 1] += 1;
    }
    for g in 0..gaussians {
        col_ptr[g + 1] += col_ptr[g];
    }
    let mut cursor = col_ptr[..gaussians].to_vec();
    let mut t_rows = vec![0u32; nnz];
    let mut t_w = vec![0f32; nnz];
    let mut r = 0usize;
    for (k, (g, w)) in entries().enumerate() {
        while row_ptr[r + 1] as usize <= k {
            r += 1;
        }
        let pos = cursor[g as usize] as usize;
        cursor[g as usize] += 1;
        t_rows[pos] = r as u32;
        t_w[pos] = w;
    }
    Ok(CpuOperator {
        rows,
        cols: gaussians,
        row_ptr,
        col_idx: Indices::new(entries().map(|e| e.0), gaussians),
        row_w: Weights::new(entries().map(|e| e.1), precision),
        col_ptr,
        row_idx: Indices::new(t_rows.into_iter(), rows),
        col_w: Weights::new(t_w.into_iter(), precision),
    })
}

/// One compressed-sparse product: `out[r] (+)= Σ_k w_k·x[idx_k]` over the entries
/// of row `r`; used for CSR (forward) and CSC (transposed) alike.
fn compressed_product<I: Index, W: Weight, C: Channels>(
    workers: &Workers,
    ptr: &[u32],
    idx: &[I],
    wts: &[W],
    x: &[f32],
    out: &mut [f32],
    accumulate: bool,
    ch: C,
) {
    let c = ch.n();
    let n = ptr.len() - 1;
    let nnz = ptr[n] as usize;
    let parts = if nnz < 1 << 15 {
        1
    } else {
        8 * workers.threads()
    };
    let ranges = balanced_ranges((0..n).map(|r| (ptr[r + 1] - ptr[r]) as u64 + 2), n, parts);
    workers.for_ranges(
        &ranges,
        out,
        |r| r * c,
        |rs, chunk| {
            let base = rs.start;
            for r in rs {
                let mut acc = C::zeros();
                for k in ptr[r] as usize..ptr[r + 1] as usize {
                    let g = idx[k].get();
                    C::axpy(&mut acc, wts[k].get(), &x[g * c..g * c + c]);
                }
                let row = &mut chunk[(r - base) * c..(r - base + 1) * c];
                if accumulate {
                    C::add_store(&acc, row);
                } else {
                    C::store(&acc, row);
                }
            }
        },
    );
}

fn dispatch(
    workers: &Workers,
    ptr: &[u32],
    idx: &Indices,
    wts: &Weights,
    x: &[f32],
    channels: usize,
    out: &mut [f32],
    accumulate: bool,
) {
    macro_rules! go {
        ($i:expr, $w:expr) => {
            with_channels!(channels, ch => compressed_product(workers, ptr, $i, $w, x, out, accumulate, ch))
        };
    }
    match (idx, wts) {
        (Indices::U16(i), Weights::F32(w)) => go!(i, w),
        (Indices::U16(i), Weights::F16(w)) => go!(i, w),
        (Indices::U16(i), Weights::Bf16(w)) => go!(i, w),
        (Indices::U32(i), Weights::F32(w)) => go!(i, w),
        (Indices::U32(i), Weights::F16(w)) => go!(i, w),
        (Indices::U32(i), Weights::Bf16(w)) => go!(i, w),
    }
}

/// `out = W·x`.
pub fn spmm(workers: &Workers, op: &CpuOperator, x: &[f32], channels: usize, out: &mut [f32]) {
    dispatch(
        workers,
        &op.row_ptr,
        &op.col_idx,
        &op.row_w,
        x,
        channels,
        out,
        false,
    );
}

/// `d_x += Wᵀ·d_out` (deterministic: each Gaussian sums its rows in ascending order).
pub fn spmm_t(
    workers: &Workers,
    op: &CpuOperator,
    d_out: &[f32],
    channels: usize,
    d_x: &mut [f32],
) {
    dispatch(
        workers,
        &op.col_ptr,
        &op.row_idx,
        &op.col_w,
        d_out,
        channels,
        d_x,
        true,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_is_exact_for_every_finite_half() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            if !h.is_finite() {
                continue;
            }
            assert_eq!(
                Weight::get(h).to_bits(),
                h.to_f32().to_bits(),
                "bits {bits:#06x}"
            );
        }
    }
}
