//! Products of the cached operator with a k-sparse input: `x` (`[N, C]`) given by its
//! `k` (column, value) pairs per Gaussian, `idx` and `val` (`[N, k]`) — LangSplatV2's
//! code weights (C = 64, k = 4).
//!
//! Both follow the block structure of [`CpuOperator`]:
//! - `W·x` gathers the pairs of the block's Gaussians into block-local buffers once,
//!   then each row zeroes its output row and adds `w·val` at each pair's column,
//!   entries front to back. Without a repeated column in a row of `idx` this is
//!   bitwise `spmm` of the scattered dense `x` (which only adds zeros besides), for a
//!   fraction of the reads: `k` pairs instead of `C` values per listed Gaussian.
//! - `Wᵀ·d` is the two-pass scheme of the other transposed products with `k` lanes:
//!   each block adds `w·d_out[r, idx]` into its own slots, then each Gaussian adds its
//!   slots in block order. Bitwise `spmm_t` gathered at `idx`, reproducible, and
//!   independent of the number of workers.
//!
//! Columns are checked against the channel count once per call (a max over `idx`,
//! split over the workers when long), which lets the inner loops index without bounds
//! checks.

use crate::channels::{Channels, Dynamic, Fixed};
use crate::format::{Entries, with_entries};
use crate::operator::{Block, CpuOperator, ProductScratch, block, transposed_with};
use crate::pool::Workers;

/// `idx` values per task of the column check (below this, one task).
const CHECK_CHUNK: usize = 1 << 18;

/// The first entry of `idx` that is not below `channels`, as (position, value).
pub fn first_bad_index(workers: &Workers, idx: &[u32], channels: usize) -> Option<(usize, u32)> {
    // A max folds to SIMD; the position is searched only once the max is out of range.
    let max = |s: &[u32]| s.iter().fold(0u32, |m, &i| m.max(i));
    let parts = idx
        .len()
        .div_ceil(CHECK_CHUNK)
        .min(workers.threads())
        .max(1);
    let step = idx.len().div_ceil(parts).max(1);
    let ranges: Vec<_> = (0..idx.len())
        .step_by(step)
        .map(|s| s..(s + step).min(idx.len()))
        .collect();
    let top = workers
        .map_ranges(&ranges, |r| max(&idx[r]))
        .into_iter()
        .max()
        .unwrap_or(0);
    if (top as usize) < channels {
        return None;
    }
    idx.iter()
        .position(|&i| i as usize >= channels)
        .map(|p| (p, idx[p]))
}

fn check_shapes(op: &CpuOperator, idx: usize, k: usize, lens: &[(usize, usize)]) {
    assert!(k >= 1, "k must be at least 1");
    assert_eq!(idx, op.cols() * k, "idx must be [N, k]");
    for &(got, needed) in lens {
        assert!(got >= needed, "buffer of {got} elements, needs {needed}");
    }
}

fn bad_index(i: usize, v: u32, k: usize, channels: usize) -> String {
    format!(
        "idx[{i}] (Gaussian {}, pair {}) is {v}, not below the {channels} channels",
        i / k,
        i % k
    )
}

/// `out = W·x` for the k-sparse `x` given by `idx`, `val` (`[N, k]`); overwrites
/// `out[..rows·c]`. Errors (touching nothing) when a column is not below `c`.
///
/// # Panics
/// When `k` is 0, `idx` or `val` is not `[N, k]`, or `out` is shorter than `rows·c`.
pub fn spmm_sparse(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    idx: &[u32],
    val: &[f32],
    k: usize,
    c: usize,
    out: &mut [f32],
) -> Result<(), String> {
    check_shapes(op, idx.len(), k, &[(out.len(), op.rows() * c)]);
    assert_eq!(val.len(), idx.len(), "val must be [N, k]");
    if let Some((i, v)) = first_bad_index(workers, idx, c) {
        return Err(bad_index(i, v, k, c));
    }
    let out = &mut out[..op.rows() * c];
    let a = Inputs { idx, val, k, c };
    with_entries!(op, scratch.reprojected(workers, op), e => forward(workers, scratch, op, e, a, out));
    op.release();
    Ok(())
}

/// `d_val[g·k + j] += Σ_r W[r, g]·d_out[r·c + idx[g·k + j]]`. Errors (touching
/// nothing) when a column is not below `c`.
///
/// # Panics
/// When `k` is 0, `idx` or `d_val` is not `[N, k]`, or `d_out` is shorter than
/// `rows·c`.
pub fn spmm_t_sparse(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    idx: &[u32],
    d_out: &[f32],
    k: usize,
    c: usize,
    d_val: &mut [f32],
) -> Result<(), String> {
    check_shapes(op, idx.len(), k, &[(d_out.len(), op.rows() * c)]);
    assert_eq!(d_val.len(), idx.len(), "d_val must be [N, k]");
    if let Some((i, v)) = first_bad_index(workers, idx, c) {
        return Err(bad_index(i, v, k, c));
    }
    let a = Inputs {
        idx,
        val: d_out,
        k,
        c,
    };
    with_entries!(op, scratch.reprojected(workers, op), e => backward(workers, scratch, op, e, a, d_val));
    op.release();
    Ok(())
}

/// Checked inputs of a product: every `idx` value is below `c`, `idx` is `[N, k]`,
/// and `val` is `[N, k]` (forward) or `d_out` with at least `rows·c` values
/// (transposed).
#[derive(Clone, Copy)]
struct Inputs<'a> {
    idx: &'a [u32],
    val: &'a [f32],
    k: usize,
    c: usize,
}

fn forward<E: Entries>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    a: Inputs<'_>,
    out: &mut [f32],
) {
    // The common k gets a constant trip count in the inner loop.
    match a.k {
        4 => forward_k::<E, 4>(workers, scratch, op, e, a, out),
        _ => forward_k::<E, 0>(workers, scratch, op, e, a, out),
    }
}

/// [`forward`] with `k = K` (or `a.k` when `K` is 0).
fn forward_k<E: Entries, const K: usize>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    a: Inputs<'_>,
    out: &mut [f32],
) {
    let (k, c) = (if K > 0 { K } else { a.k }, a.c);
    let ranges = op.ranges(workers);
    workers.for_ranges(
        &ranges,
        out,
        |b| op.block_rows[b] as usize * c,
        |blocks, chunk| {
            let base = op.block_rows[blocks.start] as usize;
            let mut cols = scratch.indices.slot(&ranges, &blocks);
            let mut vals = scratch.locals.slot(&ranges, &blocks);
            let mut buf = scratch.alphas.slot(&ranges, &blocks);
            for b in blocks {
                let blk = block(op, e, b, &mut buf);
                gather(blk.list, a.idx, k, &mut cols);
                gather(blk.list, a.val, k, &mut vals);
                for r in blk.rows.clone() {
                    let o = &mut chunk[(r - base) * c..(r - base + 1) * c];
                    o.fill(0.0);
                    // SAFETY: r is a row of the block; cols and vals hold list × k
                    // pairs gathered from checked inputs (columns below c = o.len()).
                    unsafe { add_row::<E, K>(&blk, r, k, &cols, &vals, o) };
                }
            }
        },
    );
}

/// `o[col] += w_e·v` for every pair (col, v) of every entry e of row `r`, entries in
/// order.
///
/// # Safety
/// `r` is a row of `blk`; `cols` and `vals` hold `blk.list.len() × k` values (`k = K`
/// when `K > 0`), and every column is below `o.len()`.
#[inline(always)]
unsafe fn add_row<E: Entries, const K: usize>(
    blk: &Block<'_, E>,
    r: usize,
    k: usize,
    cols: &[u32],
    vals: &[f32],
    o: &mut [f32],
) {
    let k = if K > 0 { K } else { k };
    let (cp, vp, op) = (cols.as_ptr(), vals.as_ptr(), o.as_mut_ptr());
    let mut cur = blk.start(r);
    for e in blk.row_ptr[r] as usize..blk.row_ptr[r + 1] as usize {
        // SAFETY: e is the next entry of row r of the block, decoded from cur, so
        // `build` bounds its position by the list; cols and vals hold list × k values
        // and each column is below o.len() (caller).
        unsafe {
            let (j, wt) = blk.e.get(e, &mut cur);
            let j = j * k;
            for t in 0..k {
                let col = *cp.add(j + t) as usize;
                *op.add(col) += wt * *vp.add(j + t);
            }
        }
    }
}

fn backward<E: Entries>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    a: Inputs<'_>,
    d_val: &mut [f32],
) {
    // Slots of k lanes padded to a whole SIMD register (4, 8 or 16), else k.
    match a.k {
        4 => backward_k::<E, 4, _>(workers, scratch, op, e, a, Fixed::<4>, d_val),
        1..=3 => backward_k::<E, 0, _>(workers, scratch, op, e, a, Fixed::<4>, d_val),
        5..=8 => backward_k::<E, 0, _>(workers, scratch, op, e, a, Fixed::<8>, d_val),
        9..=16 => backward_k::<E, 0, _>(workers, scratch, op, e, a, Fixed::<16>, d_val),
        k => backward_k::<E, 0, _>(workers, scratch, op, e, a, Dynamic(k), d_val),
    }
}

/// [`backward`] with `k = K` (or `a.k` when `K` is 0) and slots of `ch.n() ≥ k` lanes.
fn backward_k<E: Entries, const K: usize, C: Channels>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    a: Inputs<'_>,
    ch: C,
    d_val: &mut [f32],
) {
    let (k, c, lanes) = (if K > 0 { K } else { a.k }, a.c, ch.n());
    assert!(k <= lanes);
    let d_out = a.val;
    transposed_with(
        workers,
        scratch,
        &scratch.indices,
        op,
        ch,
        k,
        d_val,
        |b, ld, cols, buf| {
            let blk = block(op, e, b, buf);
            gather(blk.list, a.idx, k, cols);
            for r in blk.rows.clone() {
                let d = &d_out[r * c..r * c + c];
                // SAFETY: r is a row of the block; cols holds list × k columns
                // gathered from checked indices (below c = d.len()); ld is the
                // block's list × lanes slots with k ≤ lanes.
                unsafe { scatter_row::<E, K>(&blk, r, k, lanes, cols, d, ld) };
            }
            (0.0, 0.0)
        },
    );
}

/// `ld[j·lanes + t] += w_e·d[cols[j·k + t]]` for every entry e (local index j) of row
/// `r` and t < k, entries in order.
///
/// # Safety
/// `r` is a row of `blk`; `cols` holds `blk.list.len() × k` columns (`k = K` when
/// `K > 0`), each below `d.len()`; `ld` holds `blk.list.len() × lanes` floats and
/// `k ≤ lanes`.
#[inline(always)]
unsafe fn scatter_row<E: Entries, const K: usize>(
    blk: &Block<'_, E>,
    r: usize,
    k: usize,
    lanes: usize,
    cols: &[u32],
    d: &[f32],
    ld: &mut [f32],
) {
    let k = if K > 0 { K } else { k };
    let (cp, dp, out) = (cols.as_ptr(), d.as_ptr(), ld.as_mut_ptr());
    let mut cur = blk.start(r);
    for e in blk.row_ptr[r] as usize..blk.row_ptr[r + 1] as usize {
        // SAFETY: e is the next entry of row r of the block, decoded from cur, so
        // `build` bounds its position j by the list; cols holds list × k columns, each
        // below d.len(), and ld holds list × lanes floats with k ≤ lanes (caller).
        unsafe {
            let (j, wt) = blk.e.get(e, &mut cur);
            let (cj, oj) = (cp.add(j * k), out.add(j * lanes));
            for t in 0..k {
                *oj.add(t) += wt * *dp.add(*cj.add(t) as usize);
            }
        }
    }
}

/// Copies the `k` values of each listed Gaussian from `src` (`[N, k]`) into `buf`
/// (`[list, k]`).
#[inline(always)]
fn gather<T: Copy + Default>(list: &[u32], src: &[T], k: usize, buf: &mut Vec<T>) {
    buf.clear();
    buf.resize(list.len() * k, T::default());
    for (dst, &g) in buf.chunks_exact_mut(k).zip(list) {
        let s = &src[g as usize * k..g as usize * k + k];
        // An element loop: `copy_from_slice` calls memcpy, slow for 4 values.
        for (d, v) in dst.iter_mut().zip(s) {
            *d = *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use lsplat_core::config::WeightPrecision;
    use lsplat_core::{Gaussians, Rng, TileGrid};
    use lsplat_device::{Backend, CameraParams, DeviceError, PixelSet};

    use crate::CpuBackend;
    use crate::operator::CpuOperator;

    use crate::testing::{operator, operator_of};

    const PRECISIONS: [WeightPrecision; 5] = [
        WeightPrecision::F32,
        WeightPrecision::F16,
        WeightPrecision::Bf16,
        WeightPrecision::Compact,
        WeightPrecision::Recompute,
    ];

    /// `[N, k]` pairs: distinct random columns per Gaussian (`dup`: every row repeats
    /// its first column once when k ≥ 2), values in [-1, 1).
    fn pairs(rng: &mut Rng, n: usize, k: usize, c: usize, dup: bool) -> (Vec<u32>, Vec<f32>) {
        let mut idx = Vec::with_capacity(n * k);
        for _ in 0..n {
            let row = idx.len();
            while idx.len() < row + k {
                let col = rng.below(c as u64) as u32;
                if dup && k >= 2 && idx.len() == row + k - 1 {
                    idx.push(idx[row]);
                } else if !idx[row..].contains(&col) || k > c {
                    idx.push(col);
                }
            }
        }
        let val = (0..n * k).map(|_| rng.range(-1.0, 1.0)).collect();
        (idx, val)
    }

    fn scatter(idx: &[u32], val: &[f32], k: usize, c: usize) -> Vec<f32> {
        let mut x = vec![0.0f32; idx.len() / k * c];
        for (i, (&col, &v)) in idx.iter().zip(val).enumerate() {
            x[i / k * c + col as usize] += v;
        }
        x
    }

    /// `W·x` and `Wᵀ·d` gathered at idx in f64 from the stored weights, with the sums
    /// of absolute terms (the scale of the rounding error).
    fn reference(
        op: &CpuOperator,
        idx: &[u32],
        val: &[f32],
        d: &[f32],
        k: usize,
        c: usize,
    ) -> (Vec<(f64, f64)>, Vec<(f64, f64)>) {
        let mut fwd = vec![(0.0, 0.0); op.rows() * c];
        let mut bwd = vec![(0.0, 0.0); op.cols() * k];
        for r in 0..op.rows() {
            for (g, w) in op.row(r) {
                let (g, w) = (g as usize, w as f64);
                for j in 0..k {
                    let col = idx[g * k + j] as usize;
                    let t = w * val[g * k + j] as f64;
                    let f = &mut fwd[r * c + col];
                    *f = (f.0 + t, f.1 + t.abs());
                    let t = w * d[r * c + col] as f64;
                    let b = &mut bwd[g * k + j];
                    *b = (b.0 + t, b.1 + t.abs());
                }
            }
        }
        (fwd, bwd)
    }

    fn close(what: &str, got: &[f32], want: &[(f64, f64)], rel: f64) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (i, (&a, &(v, scale))) in got.iter().zip(want).enumerate() {
            let err = (a as f64 - v).abs();
            assert!(
                err <= rel * scale + 1e-30,
                "{what}[{i}]: {a} vs {v} (scale {scale})"
            );
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn sparse_products_equal_the_dense_ones_and_a_float64_reference() {
        let dev = CpuBackend::new(2);
        let mut rng = Rng::new(7);
        let n = 3000;
        for p in PRECISIONS {
            let op = operator(&dev, &mut rng, n, p);
            assert!(op.nnz() >= 1 << 15, "{} non-zeros: one task only", op.nnz());
            for (k, c) in [(4, 64), (1, 3), (3, 37), (6, 16), (20, 40)] {
                let (idx, val) = pairs(&mut rng, n, k, c, false);
                let d: Vec<f32> = (0..op.rows() * c).map(|_| rng.range(-1.0, 1.0)).collect();
                let (fwd, bwd) = reference(&op, &idx, &val, &d, k, c);
                // Forward: bitwise the dense product of the scattered x.
                let mut out = vec![f32::NAN; op.rows() * c + 5];
                dev.spmm_sparse(&op, &idx, &val, k, c, &mut out).unwrap();
                assert!(
                    out[op.rows() * c..].iter().all(|v| v.is_nan()),
                    "wrote past rows·c"
                );
                out.truncate(op.rows() * c);
                let mut dense = vec![f32::NAN; op.rows() * c];
                dev.spmm(&op, &scatter(&idx, &val, k, c), c, &mut dense)
                    .unwrap();
                assert_eq!(bits(&out), bits(&dense), "{p:?} k {k} c {c}: forward");
                close("forward", &out, &fwd, 1e-5);
                // Transposed: bitwise the dense one gathered at idx, accumulated.
                let start: Vec<f32> = (0..n * k).map(|_| rng.range(-1.0, 1.0)).collect();
                let mut d_val = start.clone();
                dev.spmm_t_sparse(&op, &idx, &d, k, c, &mut d_val).unwrap();
                let mut d_x = vec![0.0; n * c];
                dev.spmm_t(&op, &d, c, &mut d_x).unwrap();
                let gathered: Vec<f32> = (0..n * k)
                    .map(|i| start[i] + d_x[i / k * c + idx[i] as usize])
                    .collect();
                assert_eq!(
                    bits(&d_val),
                    bits(&gathered),
                    "{p:?} k {k} c {c}: transposed"
                );
                let sums: Vec<f32> = d_val.iter().zip(&start).map(|(a, s)| a - s).collect();
                // d_val − start rounds once more, relative to |start| ≤ 1.
                let bwd: Vec<(f64, f64)> = bwd.iter().map(|&(v, s)| (v, s + 1.0)).collect();
                close("transposed", &sums, &bwd, 1e-5);
            }
        }
    }

    #[test]
    fn repeated_columns_add() {
        let dev = CpuBackend::new(2);
        let mut rng = Rng::new(11);
        let n = 1500;
        let op = operator(&dev, &mut rng, n, WeightPrecision::F32);
        let (k, c) = (4, 64);
        let (idx, val) = pairs(&mut rng, n, k, c, true);
        assert!(idx.chunks(k).all(|r| r[0] == r[k - 1]));
        let d: Vec<f32> = (0..op.rows() * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let (fwd, bwd) = reference(&op, &idx, &val, &d, k, c);
        let mut out = vec![0.0; op.rows() * c];
        dev.spmm_sparse(&op, &idx, &val, k, c, &mut out).unwrap();
        close("forward", &out, &fwd, 1e-5);
        let mut dense = vec![0.0; op.rows() * c];
        dev.spmm(&op, &scatter(&idx, &val, k, c), c, &mut dense)
            .unwrap();
        for (a, b) in out.iter().zip(&dense) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
        let mut d_val = vec![0.0; n * k];
        dev.spmm_t_sparse(&op, &idx, &d, k, c, &mut d_val).unwrap();
        close("transposed", &d_val, &bwd, 1e-5);
        // Both pairs of a repeated column get the same gradient.
        assert!(d_val.chunks(k).all(|r| r[0] == r[k - 1]));
    }

    #[test]
    fn a_build_does_not_depend_on_the_builds_before_it() {
        // The build keeps its per-task buffers between builds: a second build of the
        // same camera, after builds of other scenes and sizes, must be the same.
        let dev = CpuBackend::new(2);
        let mut rng = Rng::new(7);
        let first = operator_of(
            &dev,
            &mut Rng::new(11),
            3000,
            (300, 200),
            WeightPrecision::F32,
        );
        for (n, size) in [(5000, (480, 320)), (200, (64, 48))] {
            operator_of(&dev, &mut rng, n, size, WeightPrecision::F32);
        }
        let again = operator_of(
            &dev,
            &mut Rng::new(11),
            3000,
            (300, 200),
            WeightPrecision::F32,
        );
        assert!(first.nnz() > 1 << 15 && first.blocks() > 16);
        assert_eq!((first.rows(), first.nnz()), (again.rows(), again.nnz()));
        assert_eq!(
            (first.blocks(), first.listed()),
            (again.blocks(), again.listed())
        );
        for r in 0..first.rows() {
            assert_eq!(first.row(r), again.row(r), "row {r}");
        }
    }

    #[test]
    fn results_do_not_depend_on_workers_or_the_run() {
        let mut rng = Rng::new(3);
        let n = 6000;
        let one = CpuBackend::new(1);
        let two = CpuBackend::new(2);
        for p in PRECISIONS {
            let op = operator_of(&one, &mut rng, n, (480, 320), p);
            // Several block ranges and several ranges of the reduction.
            assert!(op.nnz() >= 1 << 15, "{} non-zeros: one task only", op.nnz());
            assert!(
                op.listed() >= 1 << 14,
                "{} listed: one reduction task",
                op.listed()
            );
            let (k, c) = (4, 64);
            let (idx, val) = pairs(&mut rng, n, k, c, false);
            let d: Vec<f32> = (0..op.rows() * c).map(|_| rng.range(-1.0, 1.0)).collect();
            let run = |dev: &CpuBackend| {
                let mut out = vec![0.0; op.rows() * c];
                dev.spmm_sparse(&op, &idx, &val, k, c, &mut out).unwrap();
                let mut d_val = vec![0.5; n * k];
                dev.spmm_t_sparse(&op, &idx, &d, k, c, &mut d_val).unwrap();
                (bits(&out), bits(&d_val))
            };
            let first = run(&two);
            assert_eq!(first, run(&two), "{p:?}: run to run");
            assert_eq!(first, run(&one), "{p:?}: 1 vs 2 workers");
        }
    }

    #[test]
    fn an_operator_without_rows_writes_nothing() {
        let dev = CpuBackend::new(1);
        let grid = TileGrid::new(16, 40, 30);
        let (px, off) = grid.select_pixels(|_| false);
        let set = PixelSet::upload(&dev, grid, &px, &off).unwrap();
        let g = Gaussians {
            means: vec![[0.0, 0.0, 4.0]],
            log_scales: vec![[-2.0; 3]],
            rotations: vec![[1.0, 0.0, 0.0, 0.0]],
            opacity_logits: vec![2.0],
        };
        let camera = CameraParams {
            view: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            fx: 50.0,
            fy: 50.0,
            cx: 20.0,
            cy: 15.0,
            width: 40,
            height: 30,
            near: 0.01,
            far: 1e10,
        };
        let geometry = dev.upload_geometry(&g).unwrap();
        let (mut proj, mut bins) = Default::default();
        dev.project(&geometry, &camera, grid, &mut proj).unwrap();
        dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
        let op = dev
            .build_operator(&proj, &bins, &set, 1, WeightPrecision::F32)
            .unwrap();
        assert_eq!(op.rows(), 0);
        let mut out = vec![];
        dev.spmm_sparse(&op, &vec![2, 0], &vec![1.0, 2.0], 2, 3, &mut out)
            .unwrap();
        let mut d_val = vec![0.25, 0.5];
        dev.spmm_t_sparse(&op, &vec![2, 0], &vec![], 2, 3, &mut d_val)
            .unwrap();
        assert_eq!(d_val, vec![0.25, 0.5]);
    }

    #[test]
    fn bad_shapes_and_columns_are_refused() {
        let dev = CpuBackend::new(2);
        let mut rng = Rng::new(5);
        let n = 400;
        let op = operator(&dev, &mut rng, n, WeightPrecision::F32);
        let (k, c) = (4, 64);
        let (idx, val) = pairs(&mut rng, n, k, c, false);
        let d = vec![0.0; op.rows() * c];
        let mut out = vec![0.0; op.rows() * c];
        let mut d_val = vec![0.0; n * k];
        let shape = |e: DeviceError, op: &str, what: &str| match e {
            DeviceError::Shape { op: o, problem } => {
                assert_eq!(o, op);
                assert!(problem.contains(what), "{problem:?} lacks {what:?}");
            }
            e => panic!("not a shape error: {e}"),
        };
        let f = |idx: &Vec<u32>, val: &Vec<f32>, k, c, out: &mut Vec<f32>| {
            dev.spmm_sparse(&op, idx, val, k, c, out).unwrap_err()
        };
        shape(f(&idx, &val, 0, c, &mut out), "spmm_sparse", "k = 0");
        shape(f(&idx, &val, 1025, c, &mut out), "spmm_sparse", "k = 1025");
        shape(f(&idx, &val, k, 0, &mut out), "spmm_sparse", "0 channels");
        shape(
            f(&idx, &val, k, 1025, &mut out),
            "spmm_sparse",
            "1025 channels",
        );
        shape(
            f(&idx[1..].to_vec(), &val, k, c, &mut out),
            "spmm_sparse",
            "idx",
        );
        shape(
            f(&idx, &val[1..].to_vec(), k, c, &mut out),
            "spmm_sparse",
            "val",
        );
        let mut short = vec![0.0; op.rows() * c - 1];
        shape(f(&idx, &val, k, c, &mut short), "spmm_sparse", "output");
        // A column at or past the channel count, far into a long idx.
        let mut bad = idx.clone();
        bad[n * k - 3] = c as u32;
        let before = out.clone();
        shape(
            f(&bad, &val, k, c, &mut out),
            "spmm_sparse",
            "is 64, not below",
        );
        assert_eq!(bits(&out), bits(&before), "output touched");
        let g = |idx: &Vec<u32>, d: &Vec<f32>, k, c, d_val: &mut Vec<f32>| {
            dev.spmm_t_sparse(&op, idx, d, k, c, d_val).unwrap_err()
        };
        shape(g(&idx, &d, 0, c, &mut d_val), "spmm_t_sparse", "k = 0");
        shape(
            g(&idx, &d, k, 2000, &mut d_val),
            "spmm_t_sparse",
            "channels",
        );
        shape(
            g(&idx[4..].to_vec(), &d, k, c, &mut d_val),
            "spmm_t_sparse",
            "idx",
        );
        shape(
            g(&idx, &d[1..].to_vec(), k, c, &mut d_val),
            "spmm_t_sparse",
            "d_out",
        );
        let mut long = vec![0.0; n * k + 1];
        shape(g(&idx, &d, k, c, &mut long), "spmm_t_sparse", "d_val");
        bad[5] = u32::MAX;
        shape(
            g(&bad, &d, k, c, &mut d_val),
            "spmm_t_sparse",
            "idx[5] (Gaussian 1, pair 1)",
        );
        assert!(d_val.iter().all(|&v| v == 0.0), "d_val touched");
    }

    #[test]
    fn the_column_check_finds_the_first_bad_index() {
        let workers = crate::pool::Workers::new(2);
        let mut idx = vec![3u32; 3 << 18];
        assert_eq!(super::first_bad_index(&workers, &idx, 4), None);
        idx[700_000] = 9;
        idx[500_000] = 4;
        assert_eq!(
            super::first_bad_index(&workers, &idx, 4),
            Some((500_000, 4))
        );
        assert_eq!(super::first_bad_index(&workers, &idx, 10), None);
        assert_eq!(super::first_bad_index(&workers, &[], 1), None);
    }
}
