//! Tile binning: every (tile, splat) intersection, sorted by tile then depth.

use lsplat_core::TileGrid;
use lsplat_device::DeviceError;

use crate::pool::{Workers, balanced_ranges, even_ranges};
use crate::project::{CpuProjection, ProjSplat};

/// Sorted tile lists of one camera, plus the Gaussian-major offsets of the same
/// intersections that the deterministic backward reduces over (its permutation,
/// [`gaussian_major`], is built by the backward itself: forward-only users such as
/// the viewer never pay for it).
#[derive(Clone, Debug, Default)]
pub struct CpuBins {
    /// `tile_count + 1` offsets into `sorted`.
    pub tile_offsets: Vec<u32>,
    /// Gaussian ids, by tile, front to back within a tile.
    pub sorted: Vec<u32>,
    /// `N + 1` offsets: Gaussian `g` owns intersections `by_gauss[g]..by_gauss[g + 1]`
    /// (its rectangle's tiles, row-major).
    pub by_gauss: Vec<u32>,
    cursor: Vec<u32>,
}

impl CpuBins {
    /// Number of intersections.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True when no splat touches a tile.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        4 * (self.tile_offsets.len() + self.sorted.len() + self.by_gauss.len())
    }

    /// The Gaussians of tile `t`, front to back.
    pub fn tile(&self, t: usize) -> &[u32] {
        &self.sorted[self.tile_offsets[t] as usize..self.tile_offsets[t + 1] as usize]
    }
}

fn rect_area(r: &[u32; 4]) -> u64 {
    (r[2] - r[0]) as u64 * (r[3] - r[1]) as u64
}

/// An unsigned key whose order is `f32::total_cmp`'s.
pub(crate) fn depth_key(depth: f32) -> u32 {
    let bits = depth.to_bits() as i32;
    // total_cmp's trick: flip the magnitude bits of negatives, then compare signed;
    // flipping the sign bit makes the signed order an unsigned one.
    let ordered = bits ^ (((bits >> 31) as u32) >> 1) as i32;
    (ordered as u32) ^ 0x8000_0000
}

/// Bins and sorts (reusing `out`'s memory). More Gaussian-tile pairs than u32
/// indices reach, or than the memory available holds, are an error (a huge image),
/// found before anything is allocated for them.
pub fn bin_and_sort(
    workers: &Workers,
    proj: &CpuProjection,
    grid: TileGrid,
    out: &mut CpuBins,
) -> Result<(), DeviceError> {
    let n = proj.splats.len();
    let n_tiles = grid.tile_count();
    let tiles_x = grid.tiles_x();
    // Gaussian-major offsets.
    out.by_gauss.clear();
    out.by_gauss.reserve(n + 1);
    out.by_gauss.push(0);
    let total: u64 = proj.splats.iter().map(|s| rect_area(&s.rect)).sum();
    if total > u32::MAX as u64 {
        return Err(DeviceError::shape(
            "bin_and_sort",
            format!(
                "{total} Gaussian-tile pairs on a {}x{} image exceed 2^32 (lower the image size)",
                grid.width, grid.height
            ),
        ));
    }
    // The pair lists (sorted and its permutation), 8 bytes per pair.
    lsplat_core::memory::check_fits("the tile lists", total, 8).map_err(|_| {
        DeviceError::OutOfMemory {
            bytes: (total * 8) as usize,
        }
    })?;
    let mut acc = 0u32;
    for s in &proj.splats {
        acc += rect_area(&s.rect) as u32;
        out.by_gauss.push(acc);
    }
    let total = total as usize;
    // Per-tile counts of each chunk of Gaussians (in parallel), then offsets.
    let chunks = if total < 1 << 14 {
        1
    } else {
        2 * workers.threads()
    };
    let granges = even_ranges(n, chunks);
    let chunks = granges.len();
    // Cursor row k (`n_tiles` values) belongs to the chunk of Gaussians granges[k].
    let row_of = |g: usize| granges.partition_point(|r| r.start < g) * n_tiles;
    out.cursor.clear();
    out.cursor.resize(chunks * n_tiles, 0);
    let splats = &proj.splats;
    workers.for_ranges(&granges, &mut out.cursor, row_of, |gr, counts| {
        for s in &splats[gr] {
            let r = s.rect;
            for ty in r[1]..r[3] {
                for tx in r[0]..r[2] {
                    counts[(ty * tiles_x + tx) as usize] += 1;
                }
            }
        }
    });
    // Tile t's pairs start at tile_offsets[t]; chunk k's among them after those of
    // chunks 0..k (cursor row k becomes chunk k's write positions).
    out.tile_offsets.clear();
    out.tile_offsets.reserve(n_tiles + 1);
    out.tile_offsets.push(0);
    let mut acc = 0u32;
    for t in 0..n_tiles {
        for k in 0..chunks {
            let c = &mut out.cursor[k * n_tiles + t];
            let count = *c;
            *c = acc;
            acc += count;
        }
        out.tile_offsets.push(acc);
    }
    // Scatter (in parallel; the order inside a tile is set by the sort below).
    out.sorted.clear();
    out.sorted.resize(total, 0);
    let dst = Disjoint(out.sorted.as_mut_ptr());
    let dst = &dst;
    workers.for_ranges(&granges, &mut out.cursor, row_of, |gr, cursor| {
        for g in gr {
            let r = splats[g].rect;
            for ty in r[1]..r[3] {
                for tx in r[0]..r[2] {
                    let t = (ty * tiles_x + tx) as usize;
                    let j = cursor[t] as usize;
                    assert!(j < total);
                    // SAFETY: `j` is in bounds (checked). Chunk k's positions in tile
                    // t are its own range of `sorted` (after the counts of chunks
                    // 0..k, before the next tile's), so no two tasks write the same
                    // element, and nothing reads `sorted` before they are joined.
                    unsafe { *dst.0.add(j) = g as u32 };
                    cursor[t] += 1;
                }
            }
        }
    });
    // Sort each tile front to back (ties by Gaussian id, so the order is total).
    let offsets = &out.tile_offsets;
    let ranges = pair_ranges(workers, offsets, 1 << 14);
    workers.for_ranges(
        &ranges,
        &mut out.sorted,
        |t| offsets[t] as usize,
        |tiles, chunk| {
            let base = offsets[tiles.start] as usize;
            // Sorted as integer keys (depth in total order, then id): the same order as
            // comparing `depth.total_cmp` then ids, without a lookup per comparison.
            let mut keys: Vec<u64> = Vec::new();
            for t in tiles {
                let seg = &mut chunk[offsets[t] as usize - base..offsets[t + 1] as usize - base];
                keys.clear();
                keys.extend(
                    seg.iter().map(|&g| {
                        (depth_key(proj.splats[g as usize].depth) as u64) << 32 | g as u64
                    }),
                );
                keys.sort_unstable();
                for (s, k) in seg.iter_mut().zip(&keys) {
                    *s = *k as u32;
                }
            }
        },
    );
    Ok(())
}

/// Tile ranges balanced by their pair counts (`offsets`: `tile_count + 1` offsets);
/// one range (run inline) below `inline_below` pairs.
fn pair_ranges(
    workers: &Workers,
    offsets: &[u32],
    inline_below: u32,
) -> Vec<std::ops::Range<usize>> {
    let n_tiles = offsets.len().saturating_sub(1);
    let total = offsets.last().copied().unwrap_or(0);
    let parts = if total < inline_below {
        1
    } else {
        4 * workers.threads()
    };
    balanced_ranges(
        (0..n_tiles).map(|t| (offsets[t + 1] - offsets[t]) as u64),
        n_tiles,
        parts,
    )
}

/// A pointer shared by the tasks of a parallel scatter ([`bin_and_sort`]'s pairs,
/// [`gaussian_major`]'s permutation), each writing its own elements.
struct Disjoint(*mut u32);
// SAFETY: the tasks write disjoint elements (see the two scatters) and nothing reads
// them until every task has finished (the pool's scope joins them).
unsafe impl Sync for Disjoint {}

/// The Gaussian-major view of `bins`: `perm[by_gauss[g] + j]` is the position in
/// `sorted` of Gaussian `g`'s intersection with the `j`-th tile of its rectangle
/// (row-major). Filled in parallel over tiles (`tiles_x` tiles per row).
pub fn gaussian_major(
    workers: &Workers,
    splats: &[ProjSplat],
    bins: &CpuBins,
    tiles_x: u32,
    perm: &mut Vec<u32>,
) {
    perm.clear();
    perm.resize(bins.len(), 0);
    let offsets = &bins.tile_offsets;
    let ranges = pair_ranges(workers, offsets, 1 << 15);
    let out = Disjoint(perm.as_mut_ptr());
    let out = &out;
    workers.for_ranges(
        &ranges,
        &mut [(); 0],
        |_| 0,
        |tiles, _| {
            for t in tiles {
                let (tx, ty) = (t as u32 % tiles_x, t as u32 / tiles_x);
                for pos in offsets[t]..offsets[t + 1] {
                    let g = bins.sorted[pos as usize] as usize;
                    let r = splats[g].rect;
                    let local = (ty - r[1]) * (r[2] - r[0]) + (tx - r[0]);
                    let j = (bins.by_gauss[g] + local) as usize;
                    assert!(j < bins.len());
                    // SAFETY: `j` is in bounds (checked), and each (Gaussian, tile)
                    // intersection has its own `j` (the Gaussian's offset plus the tile's
                    // place in its rectangle), visited by exactly one task: no two writes
                    // alias, and `perm` is not read before the tasks are joined.
                    unsafe { *out.0.add(j) = pos };
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_keys_order_as_total_cmp() {
        let v = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-30,
            -0.0,
            0.0,
            1e-38,
            0.5,
            0.5000001,
            7.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for a in v {
            for b in v {
                assert_eq!(
                    depth_key(a).cmp(&depth_key(b)),
                    a.total_cmp(&b),
                    "{a} vs {b}"
                );
            }
        }
    }
}
