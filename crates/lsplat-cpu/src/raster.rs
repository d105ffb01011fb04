//! Direct compositing and its feature-only backward.

use std::sync::{Mutex, MutexGuard};

use crate::bins::{CpuBins, gaussian_major};
use crate::channels::Channels;
use lsplat_core::TileGrid;

use crate::pool::{Workers, balanced_ranges};
use crate::project::ProjSplat;
pub use crate::walk::TileWalker;
use crate::walk::lanes_of;

/// A host pixel set (tile-major pixels with per-tile offsets).
#[derive(Clone, Copy)]
pub struct Pixels<'a> {
    /// Pixel indices `y·width + x`.
    pub pixels: &'a [u32],
    /// Per-tile offsets.
    pub tile_offsets: &'a [u32],
    /// The tile grid.
    pub grid: TileGrid,
}

impl Pixels<'_> {
    /// Top-left pixel of tile `t`.
    pub fn tile_origin(&self, t: usize) -> (u32, u32) {
        let tx = self.grid.tiles_x();
        let ts = self.grid.tile_size;
        ((t as u32 % tx) * ts, (t as u32 / tx) * ts)
    }

    /// The pixel rows of tile `t` in the set: for each, the row inside the tile, the
    /// set's indices of its pixels (`first..first + count`, ascending columns) and its
    /// lane mask (bit i: column i of the tile).
    pub fn tile_rows(&self, t: usize) -> impl Iterator<Item = TileRow> + '_ {
        let (x0, y0) = self.tile_origin(t);
        let w = self.grid.width;
        let (mut i, end) = (
            self.tile_offsets[t] as usize,
            self.tile_offsets[t + 1] as usize,
        );
        std::iter::from_fn(move || {
            if i >= end {
                return None;
            }
            let y = self.pixels[i] / w;
            let first = i;
            let mut lanes = 0u32;
            while i < end && self.pixels[i] / w == y {
                lanes |= 1 << (self.pixels[i] % w - x0);
                i += 1;
            }
            Some(TileRow {
                row: (y - y0) as usize,
                first,
                lanes,
            })
        })
    }
}

/// One pixel row of a tile in a pixel set.
#[derive(Clone, Copy, Debug)]
pub struct TileRow {
    /// The row inside the tile.
    pub row: usize,
    /// The set's index of its first pixel (the others follow, by column).
    pub first: usize,
    /// Bit i: the pixel in column i of the tile is in the set.
    pub lanes: u32,
}

impl TileRow {
    /// The set's index of the pixel at lane `lane` (a lane of `lanes`).
    #[inline(always)]
    pub fn index(&self, lane: usize) -> usize {
        self.first + (self.lanes & ((1u32 << lane) - 1)).count_ones() as usize
    }
}

/// Per-task scratch: each task of a range-parallel op works in its own state
/// (allocated once, reused every step).
pub struct TaskScratch<T>(Vec<Mutex<T>>);

/// Each task of a tile-parallel op gathers its current tile's splats into its own
/// walker.
pub type TileScratch = TaskScratch<TileWalker>;

impl<T: Default> TaskScratch<T> {
    /// Scratch for up to `tasks` concurrent tasks.
    pub fn new(tasks: usize) -> Self {
        TaskScratch(
            (0..tasks.max(1))
                .map(|_| Mutex::new(T::default()))
                .collect(),
        )
    }

    /// The state of the task that handles `range` (its index among `ranges`).
    pub fn slot(
        &self,
        ranges: &[std::ops::Range<usize>],
        range: &std::ops::Range<usize>,
    ) -> MutexGuard<'_, T> {
        let i = ranges.partition_point(|r| r.start < range.start) % self.0.len();
        self.0[i].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Tile ranges balanced by estimated work (pixels × list length).
pub fn tile_ranges(
    workers: &Workers,
    px: &Pixels<'_>,
    bins: &CpuBins,
) -> Vec<std::ops::Range<usize>> {
    let n_tiles = px.tile_offsets.len() - 1;
    let cost = (0..n_tiles).map(|t| {
        let np = (px.tile_offsets[t + 1] - px.tile_offsets[t]) as u64;
        let nl = (bins.tile_offsets[t + 1] - bins.tile_offsets[t]) as u64;
        np * (nl + 4)
    });
    let total: u64 = cost.clone().sum();
    let parts = if total < 1 << 15 {
        1
    } else {
        8 * workers.threads()
    };
    balanced_ranges(cost, n_tiles, parts)
}

/// `out[i] = Σ w·x[g]` for every pixel `i` of the set.
pub fn rasterize<C: Channels>(
    workers: &Workers,
    scratch: &TileScratch,
    splats: &[ProjSplat],
    bins: &CpuBins,
    px: Pixels<'_>,
    x: &[f32],
    ch: C,
    out: &mut [f32],
) {
    let c = ch.n();
    let ranges = tile_ranges(workers, &px, bins);
    let offs = px.tile_offsets;
    workers.for_ranges(
        &ranges,
        out,
        |t| offs[t] as usize * c,
        |tiles, chunk| {
            let base = offs[tiles.start] as usize;
            let mut walker = scratch.slot(&ranges, &tiles);
            let ts = px.grid.tile_size;
            for t in tiles {
                let list = bins.tile(t);
                if offs[t] == offs[t + 1] {
                    continue;
                }
                walker.gather(splats, list, px.tile_origin(t), ts);
                let out =
                    &mut chunk[(offs[t] as usize - base) * c..(offs[t + 1] as usize - base) * c];
                out.fill(0.0);
                let first = offs[t] as usize;
                for r in px.tile_rows(t) {
                    // Each pixel sums its pairs in order, straight into its output row.
                    walker.walk_row(r.row, r.lanes, |k, w, m| {
                        let g = list[k] as usize;
                        let xg = &x[g * c..g * c + c];
                        for i in lanes_of(m) {
                            let o = (r.index(i) - first) * c;
                            for (acc, v) in out[o..o + c].iter_mut().zip(xg) {
                                *acc += w[i] * v;
                            }
                        }
                    });
                }
            }
        },
    );
}

/// The backward's reusable memory.
#[derive(Debug, Default)]
pub struct BackwardScratch {
    /// Each intersection's contribution, indexed like `bins.sorted`.
    contrib: Vec<f32>,
    /// The bins' Gaussian-major permutation ([`gaussian_major`]).
    perm: Vec<u32>,
}

/// `d_x += Σ_pixels w·d_out[i]`, deterministic and free of atomics: each tile writes
/// the contribution of its own intersections into `contrib` (indexed like
/// `bins.sorted`), then each Gaussian sums its intersections in a fixed order.
pub fn rasterize_backward<C: Channels>(
    workers: &Workers,
    scratch: &TileScratch,
    splats: &[ProjSplat],
    bins: &CpuBins,
    px: Pixels<'_>,
    d_out: &[f32],
    ch: C,
    memory: &mut BackwardScratch,
    d_x: &mut [f32],
) {
    let c = ch.n();
    let BackwardScratch { contrib, perm } = memory;
    gaussian_major(workers, splats, bins, px.grid.tiles_x(), perm);
    contrib.clear();
    contrib.resize(bins.len() * c, 0.0);
    let ranges = tile_ranges(workers, &px, bins);
    let offs = px.tile_offsets;
    let boffs = &bins.tile_offsets;
    workers.for_ranges(
        &ranges,
        contrib,
        |t| boffs[t] as usize * c,
        |tiles, chunk| {
            let base = boffs[tiles.start] as usize;
            let mut walker = scratch.slot(&ranges, &tiles);
            let ts = px.grid.tile_size;
            for t in tiles {
                let list = bins.tile(t);
                let start = boffs[t] as usize - base;
                if offs[t] == offs[t + 1] {
                    continue;
                }
                walker.gather(splats, list, px.tile_origin(t), ts);
                for r in px.tile_rows(t) {
                    walker.walk_row(r.row, r.lanes, |k, w, m| {
                        let slot = &mut chunk[(start + k) * c..(start + k + 1) * c];
                        for i in lanes_of(m) {
                            let p = r.index(i);
                            for (s, dv) in slot.iter_mut().zip(&d_out[p * c..p * c + c]) {
                                *s += w[i] * dv;
                            }
                        }
                    });
                }
            }
        },
    );
    let n = bins.by_gauss.len() - 1;
    let parts = if bins.len() < 1 << 15 {
        1
    } else {
        4 * workers.threads()
    };
    let granges = balanced_ranges(
        (0..n).map(|g| (bins.by_gauss[g + 1] - bins.by_gauss[g]) as u64 + 1),
        n,
        parts,
    );
    let contrib = &contrib[..];
    workers.for_ranges(
        &granges,
        d_x,
        |g| g * c,
        |gs, chunk| {
            let base = gs.start;
            for g in gs {
                let row = &mut chunk[(g - base) * c..(g - base + 1) * c];
                for j in bins.by_gauss[g]..bins.by_gauss[g + 1] {
                    let pos = perm[j as usize] as usize;
                    for (r, v) in row.iter_mut().zip(&contrib[pos * c..pos * c + c]) {
                        *r += v;
                    }
                }
            }
        },
    );
}
