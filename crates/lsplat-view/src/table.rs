//! LangSplat V1's per-pixel answers: the decoder at the rendered 3-D code.
//!
//! Decoding every pixel of a 1280×720 frame costs ~2.2·10¹¹ multiply-adds (the
//! decoder `3 → 16 → … → 256 → 512` is ~240 000 per pixel), seconds on a CPU. The
//! dot products of the decoded unit feature with the frame's targets are smooth
//! functions of the code, so they are tabulated at the vertices of a regular grid over
//! the box the composited codes can reach and interpolated trilinearly. Vertices are
//! decoded only when a frame's codes first touch their cell, and kept for the targets
//! they were computed for (a few target sets are kept, most recent first), so a
//! moving camera decodes a few new vertices per frame. A relevancy frame tabulates
//! LangSplat's relevancy itself (one value per vertex, [`Reduce::Relevancy`]): the
//! per-pixel work is then one trilinear lookup of a scalar. [`Decoded::dots`] with
//! `exact` decodes every pixel instead (what `query` computes).

use std::sync::{Arc, Mutex};

use lsplat_ae::Autoencoder;
use lsplat_cpu::gemm::{MatRef, gemm};

use crate::Result;

/// Target sets kept (e.g. the features picture and the last few queries).
const TABLES: usize = 4;
/// Rows decoded at once.
const CHUNK: usize = 8192;

/// Vertices decoded and pixels answered by one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct DecodeStats {
    /// Grid vertices decoded (0 in exact mode).
    pub vertices: usize,
    /// Pixels decoded exactly (0 in table mode).
    pub pixels: usize,
}

/// What a table holds per vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The dot products with each target (`T` values).
    Dots,
    /// LangSplat's relevancy of the fifth target against the first four (the
    /// canonical phrases): one value.
    Relevancy,
}

impl Reduce {
    /// Values per pixel for `t` targets.
    pub fn width(self, t: usize) -> usize {
        match self {
            Reduce::Dots => t,
            Reduce::Relevancy => 1,
        }
    }

    /// Refuses `t` targets that this reduction cannot take.
    fn check(self, t: usize) -> Result<()> {
        if self == Reduce::Relevancy && t != 5 {
            return Err(crate::ViewError::Request(format!(
                "relevancy needs 5 targets (4 canonical phrases and the query), got {t}"
            )));
        }
        Ok(())
    }

    /// Reduces rows of `t` dot products to rows of [`Reduce::width`] values.
    fn apply(self, dots: Vec<f32>, t: usize) -> Vec<f32> {
        match self {
            Reduce::Dots => dots,
            Reduce::Relevancy => dots
                .chunks_exact(t)
                .map(|d| crate::answers::relevancy(d[4], &d[..4]))
                .collect(),
        }
    }
}

struct Table {
    /// Unique among the decoder's tables (with `filled`, names the values' state).
    id: u64,
    /// Vertices decoded so far.
    filled: usize,
    targets: Vec<f32>,
    reduce: Reduce,
    /// Values per vertex.
    t: usize,
    values: Vec<f32>,
    done: Vec<u8>,
    /// Cells whose eight vertices are all decoded (a pixel in one skips the check).
    cell_done: Vec<bool>,
}

/// A V1 level's decoder and its tables.
pub struct Decoded {
    model: Arc<Autoencoder>,
    lo: [f32; 3],
    step: [f32; 3],
    cells: usize,
    tables: Mutex<Vec<Table>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// The state of a table's values: its identity and how many vertices it holds (equal
/// states, equal values).
pub type TableState = (u64, usize);

impl Decoded {
    /// The decoder of `[N, 3]` per-Gaussian codes, with a grid of `cells` cells per
    /// axis over the box composited codes can reach: per axis
    /// `[min(0, min code), max(0, max code)]` (a pixel's code is a sum of codes with
    /// weights summing to at most 1).
    pub fn new(model: Arc<Autoencoder>, codes: &[f32], cells: usize) -> Decoded {
        let c = model.code_dim();
        let (mut lo, mut hi) = ([0f32; 3], [0f32; 3]);
        for row in codes.chunks_exact(c) {
            for k in 0..3.min(c) {
                lo[k] = lo[k].min(row[k]);
                hi[k] = hi[k].max(row[k]);
            }
        }
        let cells = cells.max(1);
        let step = [0, 1, 2].map(|k| ((hi[k] - lo[k]) / cells as f32).max(1e-6));
        Decoded {
            model,
            lo,
            step,
            cells,
            tables: Mutex::new(Vec::new()),
            next_id: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Code dimension (3).
    pub fn code_dim(&self) -> usize {
        self.model.code_dim()
    }

    /// Text-space width D.
    pub fn dim(&self) -> usize {
        self.model.input_dim()
    }

    /// The decoder.
    pub fn model(&self) -> &Autoencoder {
        &self.model
    }

    /// Unit decoded features `[rows, D]` of codes `[rows, 3]`.
    pub fn decode(&self, codes: &[f32], threads: usize) -> Result<Vec<f32>> {
        Ok(self.model.decode(codes, threads)?)
    }

    /// Dot products `[P, T]` of each pixel's decoded unit feature with unit targets
    /// `[T, D]` (or, with [`Reduce::Relevancy`], the relevancy `[P]` they give);
    /// pixel i's code starts at `rendered[i·stride + offset]`. `exact` decodes every
    /// pixel; otherwise the table is used (and grown).
    #[allow(clippy::too_many_arguments)]
    pub fn dots(
        &self,
        rendered: &[f32],
        stride: usize,
        offset: usize,
        targets: &[f32],
        reduce: Reduce,
        exact: bool,
        threads: usize,
    ) -> Result<(Vec<f32>, DecodeStats)> {
        let c = self.code_dim();
        let d = self.dim();
        let t = targets.len() / d;
        reduce.check(t)?;
        if exact || c != 3 {
            let codes: Vec<f32> = rendered
                .chunks_exact(stride)
                .flat_map(|r| r[offset..offset + c].iter().copied())
                .collect();
            let p = codes.len() / c;
            let mut out = vec![0f32; p * t];
            for (src, dst) in codes.chunks(CHUNK * c).zip(out.chunks_mut(CHUNK * t)) {
                let phi = self.model.decode(src, threads)?;
                let n = src.len() / c;
                gemm(
                    1.0,
                    MatRef::new(&phi, n, d),
                    MatRef::new(targets, t, d).t(),
                    0.0,
                    dst,
                );
            }
            return Ok((
                reduce.apply(out, t),
                DecodeStats {
                    vertices: 0,
                    pixels: p,
                },
            ));
        }
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let mut table = self.take_table(&mut tables, targets, reduce, t);
        let p = rendered.len() / stride;
        let mut out = vec![0f32; p * table.t];
        // One pass answers the pixels whose cells are decoded; the others' cells are
        // then decoded and the pass repeated (a moving camera's few new cells).
        let miss = self.interpolate(&table, rendered, stride, offset, &mut out, threads);
        let mut vertices = 0;
        if !miss.is_empty() {
            let n = self.cells;
            let cells = miss.iter().map(|&j| {
                let (i, _) = self.locate(&rendered[j * stride + offset..j * stride + offset + 3]);
                (i[0] * n + i[1]) * n + i[2]
            });
            vertices = self.fill(&mut table, cells, threads)?;
            let left = self.interpolate(&table, rendered, stride, offset, &mut out, threads);
            debug_assert!(left.is_empty());
        }
        tables.push(table);
        Ok((
            out,
            DecodeStats {
                vertices,
                pixels: 0,
            },
        ))
    }

    /// The table of `targets` and `reduce` (`t` targets), taken out of `tables`
    /// (made empty when new; the oldest table dropped past [`TABLES`]).
    fn take_table(
        &self,
        tables: &mut Vec<Table>,
        targets: &[f32],
        reduce: Reduce,
        t: usize,
    ) -> Table {
        if let Some(i) = tables
            .iter()
            .position(|tb| tb.targets == targets && tb.reduce == reduce)
        {
            return tables.remove(i);
        }
        if tables.len() >= TABLES {
            tables.remove(0);
        }
        let v = (self.cells + 1).pow(3);
        let t = reduce.width(t);
        Table {
            id: self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            filled: 0,
            targets: targets.to_vec(),
            reduce,
            t,
            values: vec![0.0; v * t],
            done: vec![0; v],
            cell_done: vec![false; self.cells.pow(3)],
        }
    }

    /// The grid as the device ops take it, `[lo 3, step 3]`, and its cells per axis.
    pub fn grid(&self) -> ([f32; 6], usize) {
        let (l, s) = (self.lo, self.step);
        ([l[0], l[1], l[2], s[0], s[1], s[2]], self.cells)
    }

    /// Makes the table of `targets` (unit, `[T, D]`) and `reduce` hold every vertex
    /// of `cells` (indices `(i·n + j)·n + k`), then hands `f` its values
    /// (`[(n + 1)³, width]`) and their state. Returns `f`'s result and the vertices
    /// decoded.
    pub fn tabulate<R>(
        &self,
        targets: &[f32],
        reduce: Reduce,
        cells: impl Iterator<Item = usize>,
        threads: usize,
        f: impl FnOnce(&[f32], TableState) -> R,
    ) -> Result<(R, usize)> {
        let t = targets.len() / self.dim().max(1);
        reduce.check(t)?;
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let mut table = self.take_table(&mut tables, targets, reduce, t);
        let n3 = self.cells.pow(3);
        let filled = self.fill(&mut table, cells.filter(|&c| c < n3), threads);
        let out = filled.map(|v| (f(&table.values, (table.id, table.filled)), v));
        tables.push(table);
        out
    }

    /// Cell index and fractions of a code.
    #[inline(always)]
    fn locate(&self, code: &[f32]) -> ([usize; 3], [f32; 3]) {
        let mut i = [0usize; 3];
        let mut f = [0f32; 3];
        for k in 0..3 {
            let u = ((code[k] - self.lo[k]) / self.step[k]).clamp(0.0, self.cells as f32);
            let cell = (u as usize).min(self.cells - 1);
            i[k] = cell;
            f[k] = u - cell as f32;
        }
        (i, f)
    }

    #[inline(always)]
    fn vertex(&self, i: [usize; 3]) -> usize {
        let r = self.cells + 1;
        (i[0] * r + i[1]) * r + i[2]
    }

    /// Decodes the vertices of `cells` that the table lacks; returns how many.
    fn fill(
        &self,
        table: &mut Table,
        cells: impl Iterator<Item = usize>,
        threads: usize,
    ) -> Result<usize> {
        let mut missing = Vec::new();
        let n = self.cells;
        for cell in cells {
            if table.cell_done[cell] {
                continue;
            }
            table.cell_done[cell] = true;
            let i = [cell / (n * n), (cell / n) % n, cell % n];
            for corner in 0..8 {
                let v = self.vertex([
                    i[0] + (corner & 1),
                    i[1] + ((corner >> 1) & 1),
                    i[2] + ((corner >> 2) & 1),
                ]);
                if table.done[v] == 0 {
                    table.done[v] = 2;
                    missing.push(v);
                }
            }
        }
        let d = self.dim();
        let (t, width) = (table.targets.len() / d, table.t);
        let r = self.cells + 1;
        for chunk in missing.chunks(CHUNK) {
            let at: Vec<f32> = chunk
                .iter()
                .flat_map(|&v| {
                    let idx = [v / (r * r), (v / r) % r, v % r];
                    [0, 1, 2].map(|k| self.lo[k] + idx[k] as f32 * self.step[k])
                })
                .collect();
            let phi = self.model.decode(&at, threads)?;
            let mut dots = vec![0f32; chunk.len() * t];
            gemm(
                1.0,
                MatRef::new(&phi, chunk.len(), d),
                MatRef::new(&table.targets, t, d).t(),
                0.0,
                &mut dots,
            );
            let values = table.reduce.apply(dots, t);
            for (&v, row) in chunk.iter().zip(values.chunks_exact(width)) {
                table.values[v * width..(v + 1) * width].copy_from_slice(row);
                table.done[v] = 1;
            }
            table.filled += chunk.len();
        }
        Ok(missing.len())
    }

    /// Trilinear interpolation of the table into `out` (`[P, T]`) at every pixel
    /// whose cell is decoded (pixel i's code at `rendered[i·stride + offset]`), on
    /// `threads` threads; returns the other pixels.
    fn interpolate(
        &self,
        table: &Table,
        rendered: &[f32],
        stride: usize,
        offset: usize,
        out: &mut [f32],
        threads: usize,
    ) -> Vec<usize> {
        let t = table.t;
        let p = rendered.len() / stride;
        let per = p.div_ceil(threads.max(1)).max(4096);
        let (n, r) = (self.cells, self.cells + 1);
        std::thread::scope(|s| {
            let parts: Vec<_> = rendered
                .chunks(per * stride)
                .zip(out.chunks_mut(per * t))
                .enumerate()
                .map(|(part, (src, dst))| {
                    s.spawn(move || {
                        let mut miss = Vec::new();
                        let rows = src.chunks_exact(stride).zip(dst.chunks_exact_mut(t));
                        for (j, (row, o)) in rows.enumerate() {
                            let (i, f) = self.locate(&row[offset..offset + 3]);
                            if !table.cell_done[(i[0] * n + i[1]) * n + i[2]] {
                                miss.push(part * per + j);
                                continue;
                            }
                            let base = self.vertex(i);
                            if t == 1 {
                                // A scalar table (relevancy): one lookup per pixel.
                                o[0] = lookup(&table.values, r, base, f);
                                continue;
                            }
                            if t == 3 {
                                // The feature colours' three axes: the same sums, with
                                // the row width known to the compiler.
                                o.copy_from_slice(&blend::<3>(&table.values, base, r, f));
                                continue;
                            }
                            o.fill(0.0);
                            for k in 0..8 {
                                let (w, v) = corner(k, base, r, f);
                                for (x, y) in o.iter_mut().zip(&table.values[v * t..(v + 1) * t]) {
                                    *x += w * y;
                                }
                            }
                        }
                        miss
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }
}

/// Trilinear interpolation of a scalar table (`r` vertices per axis) in the cell
/// whose first vertex is `v`, at fractions `f`.
#[inline(always)]
pub(crate) fn lookup(values: &[f32], r: usize, v: usize, f: [f32; 3]) -> f32 {
    let (a, b) = (r * r, r);
    let lerp = |x: f32, y: f32, w: f32| x + w * (y - x);
    let c00 = lerp(values[v], values[v + a], f[0]);
    let c01 = lerp(values[v + 1], values[v + a + 1], f[0]);
    let c10 = lerp(values[v + b], values[v + a + b], f[0]);
    let c11 = lerp(values[v + b + 1], values[v + a + b + 1], f[0]);
    lerp(lerp(c00, c10, f[1]), lerp(c01, c11, f[1]), f[2])
}

/// Corner `k` (bit 0: +x, bit 1: +y, bit 2: +z) of the cell whose first vertex is
/// `base` (`r` vertices per axis): its trilinear weight at fractions `f` and its vertex.
#[inline(always)]
fn corner(k: usize, base: usize, r: usize, f: [f32; 3]) -> (f32, usize) {
    let (a, b, c) = (k & 1, (k >> 1) & 1, (k >> 2) & 1);
    let w = (if a == 1 { f[0] } else { 1.0 - f[0] })
        * (if b == 1 { f[1] } else { 1.0 - f[1] })
        * (if c == 1 { f[2] } else { 1.0 - f[2] });
    (w, base + a * r * r + b * r + c)
}

/// The trilinear blend at fractions `f` of the `T`-value rows of the cell whose first
/// vertex is `base` (`r` vertices per axis), summed corner by corner as the general
/// loop of [`Decoded::interpolate`] sums them.
#[inline(always)]
pub(crate) fn blend<const T: usize>(
    values: &[f32],
    base: usize,
    r: usize,
    f: [f32; 3],
) -> [f32; T] {
    let mut o = [0f32; T];
    for k in 0..8 {
        let (w, v) = corner(k, base, r, f);
        let v = v * T;
        let y: &[f32; T] = values[v..v + T].try_into().expect("a row of T values");
        for (acc, y) in o.iter_mut().zip(y) {
            *acc += w * y;
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    fn model() -> Arc<Autoencoder> {
        Arc::new(Autoencoder::new(24, &[16, 8, 3], &[16, 32, 64, 24], 4).unwrap())
    }

    /// The table reproduces exact decoding within a tolerance that shrinks with the
    /// grid (second order), and decodes a vertex only once per target set.
    #[test]
    fn the_table_converges_to_exact_decoding() {
        let m = model();
        let mut rng = Rng::new(5);
        let mut gauss: Vec<f32> = (0..300).map(|_| rng.normal()).collect();
        lsplat_query::normalize_rows(&mut gauss, 3);
        // Pixels: composited codes (weights summing to < 1).
        let mut pixels = Vec::new();
        for _ in 0..2000 {
            let (a, b) = (rng.f32() * 0.6, rng.f32() * 0.4);
            let (i, j) = ((rng.f32() * 99.0) as usize, (rng.f32() * 99.0) as usize);
            pixels.extend((0..3).map(|k| a * gauss[i * 3 + k] + b * gauss[j * 3 + k]));
        }
        let mut targets: Vec<f32> = (0..5 * 24).map(|_| rng.normal()).collect();
        lsplat_query::normalize_rows(&mut targets, 24);
        let exact = Decoded::new(m.clone(), &gauss, 8)
            .dots(&pixels, 3, 0, &targets, Reduce::Dots, true, 2)
            .unwrap()
            .0;
        let err = |cells: usize| {
            let d = Decoded::new(m.clone(), &gauss, cells);
            let (got, st) = d
                .dots(&pixels, 3, 0, &targets, Reduce::Dots, false, 2)
                .unwrap();
            assert!(st.vertices > 0 && st.vertices <= (cells + 1).pow(3));
            let (again, st2) = d
                .dots(&pixels, 3, 0, &targets, Reduce::Dots, false, 1)
                .unwrap();
            assert_eq!(
                (again, st2.vertices),
                (got.clone(), 0),
                "nothing decoded twice"
            );
            got.iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        };
        let (coarse, fine) = (err(16), err(64));
        eprintln!("largest |Δ dot|: {coarse} with 16 cells, {fine} with 64");
        assert!(fine < 0.02 && fine < coarse / 3.0, "{coarse} → {fine}");
        // At a vertex the table is exact.
        let d = Decoded::new(m.clone(), &gauss, 4);
        let v = [
            d.lo[0] + 2.0 * d.step[0],
            d.lo[1] + d.step[1],
            d.lo[2] + 3.0 * d.step[2],
        ];
        let (a, _) = d.dots(&v, 3, 0, &targets, Reduce::Dots, false, 1).unwrap();
        let (b, _) = d.dots(&v, 3, 0, &targets, Reduce::Dots, true, 1).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-5);
        }
        // Three targets (the feature colours' rows of three, summed by the fixed-width
        // blend) give the first three columns of the five-target table.
        let d = Decoded::new(m.clone(), &gauss, 64);
        let (five, _) = d
            .dots(&pixels, 3, 0, &targets, Reduce::Dots, false, 2)
            .unwrap();
        let (three, _) = d
            .dots(&pixels, 3, 0, &targets[..3 * 24], Reduce::Dots, false, 2)
            .unwrap();
        for (row3, row5) in three.chunks_exact(3).zip(five.chunks_exact(5)) {
            for (x, y) in row3.iter().zip(&row5[..3]) {
                assert!((x - y).abs() < 1e-5, "{x} vs {y}");
            }
        }
    }

    /// A relevancy table (one value per vertex) agrees with the relevancy of the
    /// exactly decoded pixels, is exact at a vertex, and is kept apart from the dot
    /// table of the same targets.
    #[test]
    fn the_relevancy_table_matches_exact_relevancy() {
        let m = model();
        let mut rng = Rng::new(9);
        let mut gauss: Vec<f32> = (0..300).map(|_| rng.normal()).collect();
        lsplat_query::normalize_rows(&mut gauss, 3);
        let mut pixels = Vec::new();
        for _ in 0..2000 {
            let (a, b) = (rng.f32() * 0.6, rng.f32() * 0.4);
            let (i, j) = ((rng.f32() * 99.0) as usize, (rng.f32() * 99.0) as usize);
            pixels.extend((0..3).map(|k| a * gauss[i * 3 + k] + b * gauss[j * 3 + k]));
        }
        let mut targets: Vec<f32> = (0..5 * 24).map(|_| rng.normal()).collect();
        lsplat_query::normalize_rows(&mut targets, 24);
        let d = Decoded::new(m.clone(), &gauss, 64);
        // Reference: the query crate's relevancy of the decoded unit features.
        let phi = d.decode(&pixels, 2).unwrap();
        let want =
            lsplat_query::relevancy::relevancy(&phi, 24, &targets[4 * 24..], &targets[..4 * 24])
                .unwrap();
        let (exact, _) = d
            .dots(&pixels, 3, 0, &targets, Reduce::Relevancy, true, 2)
            .unwrap();
        let (got, st) = d
            .dots(&pixels, 3, 0, &targets, Reduce::Relevancy, false, 2)
            .unwrap();
        assert!(st.vertices > 0);
        assert_eq!((exact.len(), got.len()), (2000, 2000));
        let err = |a: &[f32]| {
            a.iter()
                .zip(&want)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        };
        assert!(err(&exact) < 1e-5, "exact relevancy {}", err(&exact));
        assert!(err(&got) < 0.02, "table relevancy off by {}", err(&got));
        // The dot table of the same targets is separate (5 values per pixel).
        let (dt, st) = d
            .dots(&pixels, 3, 0, &targets, Reduce::Dots, false, 2)
            .unwrap();
        assert_eq!((dt.len(), st.vertices > 0), (10_000, true));
        // At a vertex the lookup is exact.
        let v = [
            d.lo[0] + 7.0 * d.step[0],
            d.lo[1] + 30.0 * d.step[1],
            d.lo[2] + 12.0 * d.step[2],
        ];
        let (a, _) = d
            .dots(&v, 3, 0, &targets, Reduce::Relevancy, false, 1)
            .unwrap();
        let (b, _) = d
            .dots(&v, 3, 0, &targets, Reduce::Relevancy, true, 1)
            .unwrap();
        assert!((a[0] - b[0]).abs() < 1e-5, "{a:?} vs {b:?}");
        // Wrong target count: an error.
        assert!(
            d.dots(&v, 3, 0, &targets[..4 * 24], Reduce::Relevancy, false, 1)
                .is_err()
        );
    }
}
