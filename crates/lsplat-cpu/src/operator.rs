//! The cached sparse operator W of one camera, stored once (no transposed copy).
//!
//! Rows (valid pixels, tile-major) are grouped in **blocks**: the rows of a strip of
//! up to [`GROUP_TILES`] consecutive tiles, ended early once its list is long (see
//! [`BLOCK_TARGET`]; a tile is split only if it would use more than 65 536
//! Gaussians). Each block keeps
//! the list of distinct Gaussians its rows use, and every entry stores a u16 index
//! into that list plus its weight: 2 + 2 or 4 bytes per non-zero whatever the number of
//! Gaussians. Every product works block by block in a small block-local buffer:
//! - `W·x` gathers the block's rows of `x` once, then each row sums its entries from
//!   that buffer (entries in front-to-back order, so `W·x` equals the rasterizer's
//!   compositing bitwise);
//! - `Wᵀ·d` accumulates each row's `w·d` into the block buffer and adds it to the
//!   output once per (block, Gaussian);
//! - the fused step does both with the per-pixel loss in between, reading each entry
//!   once.
//!
//! A transposed product writes each block's per-Gaussian sums to the block's own
//! slots (disjoint, so blocks run in any order on any number of workers), then every
//! Gaussian adds its slots in block order. Results are bitwise reproducible and do
//! not depend on the number of workers; no transposed copy of W is kept.
//!
//! The products with a k-sparse input (`crate::sparse_input`) reuse the blocks and the
//! two-pass transposed scheme.

use std::borrow::Cow;

use half::{bf16, f16};
use lsplat_core::config::WeightPrecision;

use crate::format::{BlockBuf, Entries, FILLER, with_entries};
pub use crate::format::{Positions, W16, Weight, Weights};
use crate::project::Source;
use crate::store::{Layout, SpillWriter, Store, mapped};
use multiversion::multiversion;

use crate::bins::CpuBins;
use crate::channels::{Channels, with_lanes};
use crate::optim::LossScales;
use crate::pool::{Workers, balanced_ranges, split_mut};
use crate::project::ProjSplat;
use crate::raster::{Pixels, TaskScratch, TileScratch, tile_ranges};
use crate::walk::{LANES, lanes_of};

/// Most distinct Gaussians of one block (u16 local indices).
const BLOCK_GAUSSIANS: usize = 1 << 16;

/// Consecutive tiles (a strip of the tile grid) whose rows may share one block: a
/// Gaussian that covers several of them is listed, gathered and reduced once per
/// block instead of once per tile.
const GROUP_TILES: usize = 4;

/// A block ends after the tile that brings its list to this many Gaussians, so its
/// buffers (`list × lanes` floats, twice) stay in the core's cache.
const BLOCK_TARGET: usize = 2048;

/// `ranges` of tiles moved to whole [`GROUP_TILES`] groups (blocks never cross a
/// group, so the blocks, and with them every sum, do not depend on the split).
fn group_ranges(ranges: Vec<std::ops::Range<usize>>, tiles: usize) -> Vec<std::ops::Range<usize>> {
    let up = |t: usize| (t.div_ceil(GROUP_TILES) * GROUP_TILES).min(tiles);
    let mut out: Vec<std::ops::Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (a, b) = (out.last().map_or(0, |l| l.end), up(r.end));
        if b > a {
            out.push(a..b);
        }
    }
    if let Some(l) = out.last_mut() {
        l.end = tiles;
    }
    out
}

/// W of one camera in row blocks. Built only by [`build`], which establishes the
/// invariants the products rely on: row and block offsets are ascending and end at
/// the lengths of the entry and list arrays, every local index is below its block's
/// list length, and every listed Gaussian is below `cols`.
///
/// Its large arrays live in memory or, once [`CpuOperator::spill`]ed, in a file mapped
/// into memory (read the same way; see `crate::store`).
#[derive(Clone, Debug)]
pub struct CpuOperator {
    rows: usize,
    cols: usize,
    /// Row offsets into the entries (`rows + 1`).
    row_ptr: Store<u32>,
    /// First row of each block (`blocks + 1`).
    pub(crate) block_rows: Vec<u32>,
    /// Offsets of each block's Gaussian list in `gaussians` (`blocks + 1`).
    block_gaussians: Vec<u32>,
    /// The distinct Gaussians of every block, block after block, each block's in
    /// front-to-back order (so the positions of a row's entries ascend).
    gaussians: Store<u32>,
    /// Per entry: its Gaussian's position in the block's list.
    local: Positions,
    /// Per entry: its weight α·T.
    weights: Weights,
    /// Filler entries (weight 0) of the compact layout.
    fillers: usize,
    /// The Gaussians any block lists, ascending.
    visible: Store<u32>,
    /// Offsets into `positions` per entry of `visible` (`visible.len() + 1`).
    visible_ptr: Store<u32>,
    /// For each visible Gaussian, its positions in `gaussians`, ascending.
    positions: Store<u32>,
    /// The products' work split for the worker count of the build.
    splits: Splits,
    /// `recompute` only: each row's pixel, `x | y << 16`.
    pixels: Store<u32>,
    /// `recompute` only: the geometry and camera the products re-project.
    source: Option<Source>,
}

/// How the products split an operator's work for one worker count: made once by
/// [`build`] rather than by a pass over the blocks and Gaussians in every product.
#[derive(Clone, Debug, Default)]
struct Splits {
    threads: usize,
    blocks: Vec<std::ops::Range<usize>>,
    visible: Vec<std::ops::Range<usize>>,
}

impl CpuOperator {
    /// Rows (pixels of the set).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (Gaussians).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Entries of the blocks' Gaussian lists (each Gaussian once per block using it).
    pub fn listed(&self) -> usize {
        self.gaussians.len()
    }

    /// Gaussians with at least one non-zero weight.
    pub fn visible(&self) -> usize {
        self.visible.len()
    }

    /// Non-zeros.
    pub fn nnz(&self) -> usize {
        self.entries() - self.fillers
    }

    /// Stored entries: the non-zeros and the compact layout's fillers.
    pub fn entries(&self) -> usize {
        *self.row_ptr.last().unwrap_or(&0) as usize
    }

    /// How the entries' positions are stored.
    pub(crate) fn entry_positions(&self) -> &Positions {
        &self.local
    }

    /// How the entries' weights are stored.
    pub(crate) fn entry_weights(&self) -> &Weights {
        &self.weights
    }

    /// `recompute` only: each row's pixel, `x | y << 16` (empty otherwise).
    pub(crate) fn row_pixels(&self) -> &Store<u32> {
        &self.pixels
    }

    /// `recompute` only: the geometry and camera it was built for.
    pub(crate) fn source(&self) -> Option<&Source> {
        self.source.as_ref()
    }

    /// The Gaussians any block lists, ascending.
    pub(crate) fn visible_gaussians(&self) -> &[u32] {
        &self.visible
    }

    /// Whether the operator is read from a file mapped into memory.
    pub fn is_spilled(&self) -> bool {
        matches!(self.gaussians, Store::Mapped { .. })
    }

    /// Hands the pages a product read from a spilled operator back to the kernel (no
    /// effect in memory).
    pub(crate) fn release(&self) {
        if let Store::Mapped { map, .. } = &self.gaussians {
            map.release();
        }
    }

    /// Asks the kernel to start reading a spilled operator (no effect in memory).
    pub fn prefetch_pages(&self) {
        if let Store::Mapped { map, .. } = &self.gaussians {
            map.will_need();
        }
    }

    /// The same operator read from a new file in `dir` (`stem` names it), written
    /// after checking the disk has room for it, then mapped and unlinked: products on
    /// it give the same bits. Errors name the directory and say when the disk is full.
    /// With `probe`, also the disk's read bandwidth measured on the file (see
    /// [`SpillWriter::finish`]).
    pub fn spill(
        &self,
        dir: &std::path::Path,
        stem: &str,
        probe: bool,
    ) -> Result<(CpuOperator, Option<f64>), String> {
        let mut lay = Layout::default();
        let o_row = lay.add(&self.row_ptr);
        let o_g = lay.add(&self.gaussians);
        let o_vis = lay.add(&self.visible);
        let o_vptr = lay.add(&self.visible_ptr);
        let o_pos = lay.add(&self.positions);
        let o_local = match &self.local {
            Positions::U16(v) => lay.add(v),
            Positions::Gaps(v) => lay.add(v),
        };
        let o_w = match &self.weights {
            Weights::F32(v) => lay.add(v),
            Weights::F16(v) => lay.add(v),
            Weights::Bf16(v) => lay.add(v),
            Weights::W16(v) => lay.add(v),
            Weights::Recomputed => 0,
        };
        let o_px = lay.add(&self.pixels);
        let mut w = SpillWriter::create(dir, stem, lay.len())?;
        w.put(o_row, &self.row_ptr)?;
        w.put(o_g, &self.gaussians)?;
        w.put(o_vis, &self.visible)?;
        w.put(o_vptr, &self.visible_ptr)?;
        w.put(o_pos, &self.positions)?;
        match &self.local {
            Positions::U16(v) => w.put(o_local, v)?,
            Positions::Gaps(v) => w.put(o_local, v)?,
        }
        match &self.weights {
            Weights::F32(v) => w.put(o_w, v)?,
            Weights::F16(v) => w.put(o_w, v)?,
            Weights::Bf16(v) => w.put(o_w, v)?,
            Weights::W16(v) => w.put(o_w, v)?,
            Weights::Recomputed => {}
        }
        w.put(o_px, &self.pixels)?;
        let (map, bandwidth) = w.finish(probe)?;
        let op = CpuOperator {
            rows: self.rows,
            cols: self.cols,
            row_ptr: mapped(&map, o_row, &self.row_ptr),
            block_rows: self.block_rows.clone(),
            block_gaussians: self.block_gaussians.clone(),
            gaussians: mapped(&map, o_g, &self.gaussians),
            local: match &self.local {
                Positions::U16(v) => Positions::U16(mapped(&map, o_local, v)),
                Positions::Gaps(v) => Positions::Gaps(mapped(&map, o_local, v)),
            },
            weights: match &self.weights {
                Weights::F32(v) => Weights::F32(mapped(&map, o_w, v)),
                Weights::F16(v) => Weights::F16(mapped(&map, o_w, v)),
                Weights::Bf16(v) => Weights::Bf16(mapped(&map, o_w, v)),
                Weights::W16(v) => Weights::W16(mapped(&map, o_w, v)),
                Weights::Recomputed => Weights::Recomputed,
            },
            fillers: self.fillers,
            visible: mapped(&map, o_vis, &self.visible),
            visible_ptr: mapped(&map, o_vptr, &self.visible_ptr),
            positions: mapped(&map, o_pos, &self.positions),
            splits: self.splits.clone(),
            pixels: mapped(&map, o_px, &self.pixels),
            source: self.source.clone(),
        };
        Ok((op, bandwidth))
    }

    /// Bytes it occupies in memory: all of [`CpuOperator::bytes`] until spilled, then
    /// only its block tables (its pages are mapped in while a product runs).
    pub fn resident_bytes(&self) -> usize {
        if self.is_spilled() {
            4 * (self.block_rows.len() + self.block_gaussians.len())
        } else {
            self.bytes()
        }
    }

    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.block_rows.len() - 1
    }

    /// Bytes held (in memory or on disk).
    pub fn bytes(&self) -> usize {
        4 * (self.row_ptr.len()
            + self.block_rows.len()
            + self.block_gaussians.len()
            + self.gaussians.len()
            + self.visible.len()
            + self.visible_ptr.len()
            + self.positions.len()
            + self.pixels.len())
            + self.local.byte_len()
            + self.weights.byte_len()
    }

    /// Bytes of the entries alone (positions and weights, fillers included).
    pub fn entry_bytes(&self) -> usize {
        self.local.byte_len() + self.weights.byte_len()
    }

    /// The row `r` as `(gaussian, weight)` pairs in f32, without the gap-coded
    /// layouts' fillers (for tests and tools).
    pub fn row(&self, r: usize) -> Vec<(u32, f32)> {
        let b = self.block_rows.partition_point(|&s| s as usize <= r) - 1;
        let (row_ptr, cols, weights) = self.rows_csr(b..b + 1, Some(r));
        debug_assert_eq!(row_ptr.len(), 2);
        cols.into_iter().zip(weights).collect()
    }

    /// The operator in compressed sparse rows: row offsets (`rows + 1`), each entry's
    /// Gaussian and its weight in f32. Rows are in the pixel set's order and each row's
    /// entries in compositing order (front to back), the order the products sum them.
    /// The gap-coded layouts' filler entries are left out.
    pub fn to_csr(&self) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        self.rows_csr(0..self.blocks(), None)
    }

    /// The rows of `blocks` (only row `only` when set) in CSR, fillers left out.
    // The cursor is `()` for the layouts that need no decoding state.
    #[allow(clippy::let_unit_value)]
    fn rows_csr(
        &self,
        blocks: std::ops::Range<usize>,
        only: Option<usize>,
    ) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        let (mut cols, mut weights) = (Vec::new(), Vec::new());
        let mut row_ptr = vec![0u32];
        let gaps = matches!(self.local, Positions::Gaps(_));
        let mut buf = BlockBuf::default();
        let listed = &self.gaussians[self.block_gaussians[blocks.start] as usize
            ..self.block_gaussians[blocks.end] as usize];
        with_entries!(self, crate::recompute::reproject_alone(self, listed), e => {
            for b in blocks {
                let blk = block(self, e, b, &mut buf);
                for r in blk.rows.clone() {
                    if only.is_some_and(|o| o != r) {
                        continue;
                    }
                    let mut cur = blk.start(r);
                    for k in self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize {
                        // SAFETY: k is the next entry of row r, decoded from its start.
                        let (j, w) = unsafe { e.get(k, &mut cur) };
                        if gaps && w == 0.0 {
                            continue;
                        }
                        cols.push(blk.list[j]);
                        weights.push(w);
                    }
                    row_ptr.push(cols.len() as u32);
                }
            }
        });
        (row_ptr, cols, weights)
    }

    fn block_cost(&self, b: usize) -> u64 {
        let rows = (self.block_rows[b + 1] - self.block_rows[b]) as u64;
        let nnz = (self.row_ptr[self.block_rows[b + 1] as usize]
            - self.row_ptr[self.block_rows[b] as usize]) as u64;
        let list = (self.block_gaussians[b + 1] - self.block_gaussians[b]) as u64;
        nnz + 2 * list + rows + 4
    }

    /// Block ranges for a product, balanced by work (one when small).
    pub(crate) fn ranges(&self, workers: &Workers) -> Cow<'_, [std::ops::Range<usize>]> {
        if self.splits.threads == workers.threads() {
            return Cow::Borrowed(&self.splits.blocks);
        }
        Cow::Owned(self.block_split(workers))
    }

    fn block_split(&self, workers: &Workers) -> Vec<std::ops::Range<usize>> {
        let n = self.blocks();
        let parts = if self.entries() < 1 << 15 {
            1
        } else {
            8 * workers.threads()
        };
        balanced_ranges((0..n).map(|b| self.block_cost(b)), n, parts)
    }

    /// Ranges of `visible` for the reduction, balanced by slots.
    fn visible_ranges(&self, workers: &Workers) -> Cow<'_, [std::ops::Range<usize>]> {
        if self.splits.threads == workers.threads() {
            return Cow::Borrowed(&self.splits.visible);
        }
        Cow::Owned(self.visible_split(workers))
    }

    fn visible_split(&self, workers: &Workers) -> Vec<std::ops::Range<usize>> {
        let n = self.visible.len();
        let parts = if self.positions.len() < 1 << 14 {
            1
        } else {
            4 * workers.threads()
        };
        let cost = (0..n).map(|i| (self.visible_ptr[i + 1] - self.visible_ptr[i]) as u64 + 1);
        balanced_ranges(cost, n, parts)
    }
}

/// What one build task produced for its tiles. Kept between builds (in
/// [`BuildScratch`]), so its buffers are reused instead of grown, and their pages
/// faulted in, again for every camera.
#[derive(Default)]
pub struct Part {
    lens: Vec<u32>,
    /// Per row: its pixel, `x | y << 16`.
    pixels: Vec<u32>,
    local: Vec<u16>,
    weights: Vec<f32>,
    /// (rows, distinct Gaussians) of each block.
    blocks: Vec<(u32, u32)>,
    gaussians: Vec<u32>,
    /// Gaussian → index in the current block's list (+1; 0 = none): all zero between
    /// blocks.
    slot: Vec<u32>,
    /// First entry of the current block.
    entry_start: usize,
    /// Sort keys and the old → new position map of a closing block.
    keys: Vec<u64>,
    moved: Vec<u16>,
}

impl Part {
    /// Empties the part for a build over `gaussians` Gaussians, keeping its buffers.
    fn reset(&mut self, gaussians: usize) {
        self.lens.clear();
        self.pixels.clear();
        self.local.clear();
        self.weights.clear();
        self.blocks.clear();
        self.entry_start = 0;
        self.gaussians.clear();
        if self.slot.len() != gaussians || self.slot.iter().any(|&s| s != 0) {
            self.slot.clear();
            self.slot.resize(gaussians, 0);
        }
    }

    /// Ends the current block (started at list entry `start`, `rows` rows so far):
    /// sorts its list front to back (depth order, then id: every tile list's order, so
    /// each row's positions ascend) and renumbers its entries.
    fn close(&mut self, splats: &[ProjSplat], start: &mut usize, rows: &mut u32) {
        if *rows > 0 {
            self.blocks
                .push((*rows, (self.gaussians.len() - *start) as u32));
        }
        for &g in &self.gaussians[*start..] {
            self.slot[g as usize] = 0;
        }
        let list = &mut self.gaussians[*start..];
        self.keys.clear();
        self.keys.extend(list.iter().enumerate().map(|(i, &g)| {
            (crate::bins::depth_key(splats[g as usize].depth) as u64) << 32 | i as u64
        }));
        self.keys
            .sort_unstable_by_key(|&k| (k >> 32, list[(k & 0xffff_ffff) as usize]));
        self.moved.clear();
        self.moved.resize(list.len(), 0);
        for (new, &k) in self.keys.iter().enumerate() {
            self.moved[(k & 0xffff_ffff) as usize] = new as u16;
        }
        let old: Vec<u32> = list.to_vec();
        for (new, &k) in self.keys.iter().enumerate() {
            list[new] = old[(k & 0xffff_ffff) as usize];
        }
        for l in &mut self.local[self.entry_start..] {
            *l = self.moved[*l as usize];
        }
        self.entry_start = self.local.len();
        *start = self.gaussians.len();
        *rows = 0;
    }
}

/// The build tasks' parts, reused from one build to the next (one build at a time
/// holds them all, from its first task until its parts are concatenated).
pub struct BuildScratch(std::sync::Mutex<TaskScratch<Part>>);

impl BuildScratch {
    /// Parts for up to `tasks` build tasks.
    pub fn new(tasks: usize) -> Self {
        BuildScratch(std::sync::Mutex::new(TaskScratch::new(tasks)))
    }
}

/// Builds W for the pixel set with exactly the rasterizer's rules.
pub fn build(
    workers: &Workers,
    scratch: &TileScratch,
    kept: &BuildScratch,
    splats: &[ProjSplat],
    bins: &CpuBins,
    px: Pixels<'_>,
    gaussians: usize,
    precision: WeightPrecision,
    source: Option<&Source>,
) -> Result<CpuOperator, String> {
    if precision == WeightPrecision::Recompute {
        if source.is_none() {
            return Err(
                "a `recompute` operator needs a projection made by `project` \
                        (it re-projects its geometry and camera)"
                    .into(),
            );
        }
        if px.grid.width > 1 << 16 || px.grid.height > 1 << 16 {
            return Err(format!(
                "a `recompute` operator supports images up to 65536 pixels a side, not {}x{}",
                px.grid.width, px.grid.height
            ));
        }
    }
    let ranges = group_ranges(tile_ranges(workers, &px, bins), px.tile_offsets.len() - 1);
    let offs = px.tile_offsets;
    let kept = kept.0.lock().unwrap_or_else(|e| e.into_inner());
    workers.map_ranges(&ranges, |tiles| {
        let mut part = kept.slot(&ranges, &tiles);
        part.reset(gaussians);
        let mut walker = scratch.slot(&ranges, &tiles);
        // Per lane: the pairs of the pixel in that column of the current row.
        let mut lane_rows: [Vec<(u32, f32)>; LANES] = Default::default();
        let mut block_start = 0;
        let mut block_rows = 0u32;
        let end = tiles.end;
        let ts = px.grid.tile_size;
        for t in tiles {
            if offs[t] != offs[t + 1] {
                let list = bins.tile(t);
                let (x0, y0) = px.tile_origin(t);
                walker.gather(splats, list, (x0, y0), ts);
                for r in px.tile_rows(t) {
                    for l in lanes_of(r.lanes) {
                        lane_rows[l].clear();
                    }
                    walker.walk_row(r.row, r.lanes, |k, w, m| {
                        for i in lanes_of(m) {
                            lane_rows[i].push((list[k], w[i]));
                        }
                    });
                    for l in lanes_of(r.lanes) {
                        let row = &lane_rows[l];
                        let distinct = part.gaussians.len() - block_start;
                        if block_rows > 0 && distinct + row.len() > BLOCK_GAUSSIANS {
                            part.close(splats, &mut block_start, &mut block_rows);
                        }
                        let part = &mut *part;
                        for &(g, w) in row {
                            let s = &mut part.slot[g as usize];
                            if *s == 0 {
                                part.gaussians.push(g);
                                *s = (part.gaussians.len() - block_start) as u32;
                            }
                            part.local.push((*s - 1) as u16);
                            part.weights.push(w);
                        }
                        part.lens.push(row.len() as u32);
                        part.pixels
                            .push((x0 + l as u32) | (y0 + r.row as u32) << 16);
                        block_rows += 1;
                    }
                }
            }
            // A block ends with its tile group, or earlier once its list is long
            // enough: both depend only on the group's tiles, never on the split.
            let distinct = part.gaussians.len() - block_start;
            if (t + 1) % GROUP_TILES == 0 || t + 1 == end || distinct >= BLOCK_TARGET {
                part.close(splats, &mut block_start, &mut block_rows);
            }
        }
    });
    // Each range had its own part (at most as many ranges as parts).
    let parts: Vec<_> = ranges.iter().map(|r| kept.slot(&ranges, r)).collect();
    let parts: Vec<&Part> = parts.iter().map(|g| &**g).collect();
    let rows = px.pixels.len();
    let nnz: usize = parts.iter().map(|p| p.local.len()).sum();
    if nnz >= u32::MAX as usize {
        return Err(format!(
            "operator has {nnz} non-zeros; at most 2^32 - 1 are supported per camera"
        ));
    }
    let listed: usize = parts.iter().map(|p| p.gaussians.len()).sum();
    if listed >= u32::MAX as usize {
        return Err(format!(
            "operator blocks list {listed} Gaussians; at most 2^32 - 1 are supported"
        ));
    }
    let mut row_ptr = Vec::with_capacity(rows + 1);
    row_ptr.push(0u32);
    let mut block_rows = vec![0u32];
    let mut block_gaussians = vec![0u32];
    let (mut acc, mut r, mut g) = (0u32, 0u32, 0u32);
    for p in &parts {
        for &l in &p.lens {
            acc += l;
            row_ptr.push(acc);
        }
        for &(nr, ng) in &p.blocks {
            r += nr;
            g += ng;
            block_rows.push(r);
            block_gaussians.push(g);
        }
    }
    let lists = concat(&parts, |p| &p.gaussians, |g| g);
    let (visible, visible_ptr, positions) = transpose_lists(&lists, gaussians);
    let mut fillers = 0;
    let (local, weights) = match precision {
        WeightPrecision::F32 => (
            Positions::U16(concat(&parts, |p| &p.local, |k| k).into()),
            Weights::F32(concat(&parts, |q| &q.weights, |w| w).into()),
        ),
        WeightPrecision::F16 => (
            Positions::U16(concat(&parts, |p| &p.local, |k| k).into()),
            Weights::F16(concat(&parts, |q| &q.weights, f16::from_f32).into()),
        ),
        WeightPrecision::Bf16 => (
            Positions::U16(concat(&parts, |p| &p.local, |k| k).into()),
            Weights::Bf16(concat(&parts, |q| &q.weights, bf16::from_f32).into()),
        ),
        WeightPrecision::Compact => {
            let (gaps, w16, f) = gap_code(&parts, &mut row_ptr, true);
            fillers = f;
            (Positions::Gaps(gaps.into()), Weights::W16(w16.into()))
        }
        WeightPrecision::Recompute => {
            let (gaps, _, f) = gap_code(&parts, &mut row_ptr, false);
            fillers = f;
            (Positions::Gaps(gaps.into()), Weights::Recomputed)
        }
    };
    let (pixels, source) = if precision == WeightPrecision::Recompute {
        (concat(&parts, |p| &p.pixels, |v| v).into(), source.cloned())
    } else {
        (Store::default(), None)
    };
    if row_ptr.last().is_some_and(|&e| e as usize != nnz + fillers)
        || fillers > u32::MAX as usize - nnz
    {
        return Err(format!(
            "operator has {nnz} non-zeros and {fillers} fillers; at most 2^32 - 1 entries are supported per camera"
        ));
    }
    let mut op = CpuOperator {
        rows,
        cols: gaussians,
        row_ptr: row_ptr.into(),
        block_rows,
        block_gaussians,
        gaussians: lists.into(),
        local,
        weights,
        fillers,
        visible: visible.into(),
        visible_ptr: visible_ptr.into(),
        positions: positions.into(),
        splits: Splits::default(),
        pixels,
        source,
    };
    op.splits = Splits {
        threads: workers.threads(),
        blocks: op.block_split(workers),
        visible: op.visible_split(workers),
    };
    Ok(op)
}

/// The gap-coded entries of the parts: per entry the gap to the row's previous
/// position and, `with_weights` (`compact`), its [`W16`] weight, fillers of weight 0
/// bridging gaps above 255 (each advances by 256); without (`recompute`), no weights and
/// [`FILLER`] bytes bridging gaps above 254 (each advances by 255). `row_ptr` is
/// rewritten to count the fillers. Returns (gaps, weights, fillers).
fn gap_code(
    parts: &[&Part],
    row_ptr: &mut [u32],
    with_weights: bool,
) -> (Vec<u8>, Vec<W16>, usize) {
    let nnz: usize = parts.iter().map(|p| p.local.len()).sum();
    let mut gaps = Vec::with_capacity(nnz + nnz / 64);
    let mut weights = Vec::with_capacity(if with_weights { nnz + nnz / 64 } else { 0 });
    // The largest gap one entry codes.
    let most = if with_weights {
        255
    } else {
        FILLER as usize - 1
    };
    let mut r = 0;
    for p in parts {
        let mut k = 0;
        for &len in &p.lens {
            let mut cur = 0usize;
            for (&j, &w) in p.local[k..k + len as usize]
                .iter()
                .zip(&p.weights[k..k + len as usize])
            {
                let j = j as usize;
                assert!(j >= cur, "a row's positions must ascend");
                let mut gap = j - cur;
                while gap > most {
                    if with_weights {
                        gaps.push(255);
                        weights.push(W16(0));
                        gap -= 256;
                    } else {
                        gaps.push(FILLER);
                        gap -= FILLER as usize;
                    }
                }
                gaps.push(gap as u8);
                if with_weights {
                    weights.push(W16::from_f32(w));
                }
                cur = j + 1;
            }
            k += len as usize;
            row_ptr[r + 1] = gaps.len().min(u32::MAX as usize) as u32;
            r += 1;
        }
    }
    let fillers = gaps.len() - nnz;
    (gaps, weights, fillers)
}

/// One field of every part, converted by `f`, in one allocation of the exact size
/// (a collect over chained parts would grow, and copy, its buffer many times).
fn concat<T: Copy, U>(
    parts: &[&Part],
    field: impl Fn(&Part) -> &[T],
    f: impl Fn(T) -> U,
) -> Vec<U> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| field(p).len()).sum());
    for p in parts {
        out.extend(field(p).iter().map(|&v| f(v)));
    }
    out
}

/// The Gaussians of the block lists, ascending, each with its positions in `lists`
/// (ascending): a counting sort.
fn transpose_lists(lists: &[u32], gaussians: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut count = vec![0u32; gaussians + 1];
    for &g in lists {
        count[g as usize + 1] += 1;
    }
    let visible: Vec<u32> = (0..gaussians as u32)
        .filter(|&g| count[g as usize + 1] > 0)
        .collect();
    for g in 0..gaussians {
        count[g + 1] += count[g];
    }
    let mut visible_ptr = Vec::with_capacity(visible.len() + 1);
    visible_ptr.extend(visible.iter().map(|&g| count[g as usize]));
    visible_ptr.push(lists.len() as u32);
    let mut positions = vec![0u32; lists.len()];
    for (pos, &g) in lists.iter().enumerate() {
        let slot = &mut count[g as usize];
        positions[*slot as usize] = pos as u32;
        *slot += 1;
    }
    (visible, visible_ptr, positions)
}

/// One block of the operator, borrowed.
pub(crate) struct Block<'a, E> {
    /// Its rows.
    pub(crate) rows: std::ops::Range<usize>,
    /// The operator's row offsets (index with the block's rows).
    pub(crate) row_ptr: &'a [u32],
    /// Its distinct Gaussians.
    pub(crate) list: &'a [u32],
    /// The operator's entries (index with the block's entries): list positions below
    /// `list.len()` and weights.
    pub(crate) e: E,
    /// What [`Entries::prepare`] made for the block (`recompute`: each entry's α, from
    /// the block's first entry; empty for the layouts that store weights).
    pub(crate) alphas: &'a [f32],
}

impl<E: Entries> Block<'_, E> {
    /// The decoding state before row `r`'s first entry.
    #[inline(always)]
    pub(crate) fn start(&self, r: usize) -> E::Cursor {
        self.e.start(self, r)
    }
}

/// Block `b` of `op` with its entries `e`, prepared in `buf` (a per-task buffer).
pub(crate) fn block<'a, E: Entries>(
    op: &'a CpuOperator,
    e: E,
    b: usize,
    buf: &'a mut BlockBuf,
) -> Block<'a, E> {
    let rows = op.block_rows[b] as usize..op.block_rows[b + 1] as usize;
    let list = &op.gaussians[op.block_gaussians[b] as usize..op.block_gaussians[b + 1] as usize];
    e.prepare(list, rows.clone(), &op.row_ptr, buf);
    Block {
        rows,
        row_ptr: &op.row_ptr,
        list,
        e,
        alphas: &buf.alphas[..],
    }
}

/// Copies the block's rows of `x` (`[N, c]`) into `lx` (`[list, lanes]`, padding
/// lanes zero).
#[inline(always)]
fn gather_rows(list: &[u32], x: &[f32], c: usize, lanes: usize, lx: &mut Vec<f32>) {
    lx.clear();
    gather_more(list, x, c, lanes, lx);
}

#[inline(always)]
fn zeros<C: Channels>(_: C) -> C::Acc {
    C::zeros()
}

/// `acc += w_k·lx[j_k]` for entries `ks` of a block (`cur`: the row's decoding state
/// before `ks.start`).
///
/// # Safety
/// `ks` are consecutive entries of one row of the block, decoded from `cur` (so every
/// position `j_k` is below its list length), and `lx` holds `list length × lanes`
/// floats with `lanes = ch.n()`.
#[inline(always)]
unsafe fn sum_entries<E: Entries, C: Channels>(
    ch: C,
    acc: &mut C::Acc,
    blk: &Block<'_, E>,
    ks: std::ops::Range<usize>,
    cur: &mut E::Cursor,
    lx: &[f32],
) {
    let lanes = ch.n();
    let x = lx.as_ptr();
    for k in ks {
        // SAFETY: k is an entry of the row (caller); `build` makes every decoded
        // position smaller than the block's list, and lx holds list × lanes floats.
        unsafe {
            let (j, w) = blk.e.get(k, cur);
            ch.axpy_ptr(acc, w, x.add(j * lanes));
        }
    }
}

/// `acc = Σ_k w_k·lx[j_k]` over row `r` of the block.
#[inline(always)]
fn row_sum<E: Entries, C: Channels>(ch: C, blk: &Block<'_, E>, r: usize, lx: &[f32]) -> C::Acc {
    assert!(blk.rows.contains(&r) && lx.len() >= blk.list.len() * ch.n());
    let mut acc = C::zeros();
    let ks = blk.row_ptr[r] as usize..blk.row_ptr[r + 1] as usize;
    // SAFETY: ks are all the entries of row r of the block, decoded from the start;
    // lx checked.
    unsafe { sum_entries(ch, &mut acc, blk, ks, &mut blk.start(r), lx) };
    acc
}

/// Rows summed together by [`block_row_sums`].
const ROW_LANES: usize = 4;

/// Calls `f(r, acc)` once for every row `r` of the block, **in no particular order**,
/// with `acc = Σ_k w_k·lx[local_k]` summed in entry order, so each result is bitwise
/// that of [`row_sum`]. Four rows are summed together (four independent chains), so
/// the adds of one row do not wait on each other: whenever a row ends, its chain
/// takes the next row of the block, and only the last three rows of a block run
/// alone.
#[inline(always)]
fn block_row_sums<E: Entries, C: Channels>(
    ch: C,
    blk: &Block<'_, E>,
    lx: &[f32],
    mut f: impl FnMut(usize, &C::Acc),
) {
    let lanes = ch.n();
    assert!(lx.len() >= blk.list.len() * lanes);
    assert!(blk.rows.end < blk.row_ptr.len());
    let ptr = blk.row_ptr;
    let x = lx.as_ptr();
    let (mut next, end) = (blk.rows.start, blk.rows.end);
    if end - next >= ROW_LANES {
        let mut row = [0usize; ROW_LANES];
        let mut k = [0usize; ROW_LANES];
        let mut e = [0usize; ROW_LANES];
        // Each chain's decoding state within its current row.
        let mut cur = [blk.start(next); ROW_LANES];
        for q in 0..ROW_LANES {
            (row[q], k[q], e[q]) = (next, ptr[next] as usize, ptr[next + 1] as usize);
            cur[q] = blk.start(next);
            next += 1;
        }
        let mut acc = [C::zeros(); ROW_LANES];
        'rows: loop {
            let m = (0..ROW_LANES).map(|q| e[q] - k[q]).min().unwrap_or(0);
            // The chains as plain locals while they run (`f` takes references into
            // `acc`, which would otherwise keep them in memory).
            let mut chains = acc;
            for i in 0..m {
                for (q, a) in chains.iter_mut().enumerate() {
                    // SAFETY: k[q] + i < e[q], the next entry of row row[q] of the
                    // block, decoded from cur[q]; `build` bounds the positions by the
                    // list, lx checked above.
                    unsafe {
                        let (j, w) = blk.e.get(k[q] + i, &mut cur[q]);
                        ch.axpy_ptr(a, w, x.add(j * lanes));
                    }
                }
            }
            acc = chains;
            let mut out_of_rows = false;
            for q in 0..ROW_LANES {
                k[q] += m;
                if k[q] == e[q] && !out_of_rows {
                    f(row[q], &acc[q]);
                    acc[q] = C::zeros();
                    if next == end {
                        out_of_rows = true;
                        row[q] = usize::MAX;
                    } else {
                        (row[q], k[q], e[q]) = (next, ptr[next] as usize, ptr[next + 1] as usize);
                        cur[q] = blk.start(next);
                        next += 1;
                    }
                }
            }
            if out_of_rows {
                break 'rows;
            }
        }
        // The rows still open when the block ran out of rows end one at a time.
        for q in 0..ROW_LANES {
            if row[q] != usize::MAX {
                // SAFETY: k[q]..e[q] are the remaining entries of row row[q], whose
                // decoding state is cur[q].
                unsafe { sum_entries(ch, &mut acc[q], blk, k[q]..e[q], &mut cur[q], lx) };
                f(row[q], &acc[q]);
            }
        }
    }
    for r in next..end {
        f(r, &row_sum(ch, blk, r, lx));
    }
}

/// `ld[j_k] += w_k·d` over row `r` of the block.
#[inline(always)]
fn row_scatter<E: Entries, C: Channels>(
    ch: C,
    blk: &Block<'_, E>,
    r: usize,
    d: &C::Acc,
    ld: &mut [f32],
) {
    let lanes = ch.n();
    assert!(blk.rows.contains(&r) && ld.len() >= blk.list.len() * lanes);
    // Local copies, so the writes through `out` cannot make the compiler reload them.
    let (e, d) = (blk.e, *d);
    let out = ld.as_mut_ptr();
    let mut cur = blk.start(r);
    for k in blk.row_ptr[r] as usize..blk.row_ptr[r + 1] as usize {
        // SAFETY: k is the next entry of row r of the block, decoded from cur;
        // `build` bounds the positions by the list and ld holds list × lanes floats
        // (checked), owned here.
        unsafe {
            let (j, w) = e.get(k, &mut cur);
            ch.scatter_ptr(out.add(j * lanes), w, &d);
        }
    }
}

/// Work buffers of the products: per-task block buffers and the per-slot sums of the
/// transposed products.
pub struct ProductScratch {
    pub(crate) locals: TaskScratch<Vec<f32>>,
    /// Per-task block-local column indices (sparse-input products).
    pub(crate) indices: TaskScratch<Vec<u32>>,
    /// Per-task prepared blocks ([`Block::alphas`]).
    pub(crate) alphas: TaskScratch<BlockBuf>,
    slots: std::sync::Mutex<Vec<f32>>,
    block_sums: std::sync::Mutex<Vec<(f64, f64)>>,
    /// The re-projected splats of a `recompute` operator (per Gaussian).
    splats: std::sync::Mutex<Vec<crate::format::RSplat>>,
}

impl ProductScratch {
    /// Scratch for `tasks` concurrent tasks.
    pub fn new(tasks: usize) -> Self {
        ProductScratch {
            locals: TaskScratch::new(tasks),
            indices: TaskScratch::new(tasks),
            alphas: TaskScratch::new(tasks),
            slots: Default::default(),
            block_sums: Default::default(),
            splats: Default::default(),
        }
    }

    /// The splats of `op` (a `recompute` operator) re-projected for its camera, in the
    /// scratch's table (held until the guard drops).
    pub(crate) fn reprojected(
        &self,
        workers: &Workers,
        op: &CpuOperator,
    ) -> std::sync::MutexGuard<'_, Vec<crate::format::RSplat>> {
        let mut table = self.splats.lock().unwrap_or_else(|e| e.into_inner());
        crate::recompute::reproject(workers, op, &op.visible_ranges(workers), &mut table);
        table
    }
}

/// `out = W·x` (overwrites `out[..rows·c]`).
pub fn spmm(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    x: &[f32],
    c: usize,
    out: &mut [f32],
) {
    with_entries!(op, scratch.reprojected(workers, op), e => spmm_typed(workers, scratch, op, e, x, c, out));
    op.release();
}

fn spmm_typed<E: Entries>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    x: &[f32],
    c: usize,
    out: &mut [f32],
) {
    with_lanes!(c, ch => {
        let lanes = ch.n();
        let ranges = op.ranges(workers);
        workers.for_ranges(
            &ranges,
            out,
            |b| op.block_rows[b] as usize * c,
            |blocks, chunk| {
                let base = op.block_rows[blocks.start] as usize;
                let mut lx = scratch.locals.slot(&ranges, &blocks);
                let mut buf = scratch.alphas.slot(&ranges, &blocks);
                for b in blocks {
                    let blk = block(op, e, b, &mut buf);
                    gather_rows(blk.list, x, c, lanes, &mut lx);
                    let first = (blk.rows.start - base) * c;
                    let out = &mut chunk[first..first + blk.rows.len() * c];
                    forward_block(ch, &blk, &lx, c, out);
                }
            },
        );
    })
}

/// `out = W_b·lx` over the rows of block `b` (`out`: `[rows, c]`, from the block's
/// first row). Compiled for the CPU's widest vector unit as well (the same
/// operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn forward_block<E: Entries, C: Channels>(
    ch: C,
    blk: &Block<'_, E>,
    lx: &[f32],
    c: usize,
    out: &mut [f32],
) {
    let first = blk.rows.start;
    block_row_sums(ch, blk, lx, |r, acc| {
        let o = (r - first) * c;
        out[o..o + c].copy_from_slice(&ch.view(acc)[..c]);
    });
}

/// `ld += W_bᵀ·d_out` over the rows of block `b` (`d_out`: `[rows, c]` of the whole
/// operator). Compiled for the CPU's widest vector unit as well.
#[multiversion(targets("x86_64+avx2+fma"))]
fn scatter_block<E: Entries, C: Channels>(
    ch: C,
    blk: &Block<'_, E>,
    d_out: &[f32],
    c: usize,
    ld: &mut [f32],
) {
    for r in blk.rows.clone() {
        let mut d = zeros(ch);
        ch.view_mut(&mut d)[..c].copy_from_slice(&d_out[r * c..r * c + c]);
        row_scatter(ch, blk, r, &d, ld);
    }
}

/// `out[g] += Σ slots[positions]` for the visible Gaussians `is` (`out` starts at
/// Gaussian `vis[is.start]`). Compiled for the CPU's widest vector unit as well.
#[multiversion(targets("x86_64+avx2+fma"))]
fn reduce_slots<C: Channels>(
    ch: C,
    op: &CpuOperator,
    slots: &[f32],
    c: usize,
    is: std::ops::Range<usize>,
    base: usize,
    out: &mut [f32],
) {
    let lanes = ch.n();
    let (vis, positions) = (&op.visible, &op.positions);
    assert!(slots.len() == op.gaussians.len() * lanes);
    let end = is.end;
    for i in is {
        // A Gaussian's slots lie in different blocks, far apart: fetch those of the
        // Gaussian `AHEAD` places on while this one is summed.
        if i + AHEAD < end {
            let (q0, q1) = (
                op.visible_ptr[i + AHEAD] as usize,
                op.visible_ptr[i + AHEAD + 1] as usize,
            );
            for &pos in &positions[q0..q1] {
                let at = slots.as_ptr().wrapping_add(pos as usize * lanes);
                prefetch(at);
                prefetch(at.wrapping_add(lanes - 1));
            }
        }
        let (p0, p1) = (op.visible_ptr[i] as usize, op.visible_ptr[i + 1] as usize);
        let mut acc = C::zeros();
        for &pos in &positions[p0..p1] {
            // SAFETY: `build` makes every position smaller than the number of
            // listed Gaussians, and slots holds that many × lanes floats (checked).
            unsafe { ch.axpy_ptr(&mut acc, 1.0, slots.as_ptr().add(pos as usize * lanes)) };
        }
        let g = vis[i] as usize * c - base;
        for (o, a) in out[g..g + c].iter_mut().zip(ch.view(&acc)) {
            *o += a;
        }
    }
}

/// A transposed product in two deterministic passes: `per_block(b, ld, work, buf)`
/// adds block `b`'s products into its accumulator `ld` (`[list, lanes]`, zeroed: the
/// block's own slots) and returns the block's loss terms (`work` is scratch, `buf`
/// the task's buffer for [`block`]); then
/// each visible Gaussian adds its slots to `d_x` in block order. Returns the loss
/// terms summed in block order.
fn transposed<C: Channels>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    ch: C,
    c: usize,
    d_x: &mut [f32],
    per_block: impl Fn(usize, &mut [f32], &mut Vec<f32>, &mut BlockBuf) -> (f64, f64) + Sync,
) -> (f64, f64) {
    transposed_with(workers, scratch, &scratch.locals, op, ch, c, d_x, per_block)
}

/// [`transposed`] with the per-task `work` scratch taken from `work` (`d_x` is
/// `[N, c]` with `c ≤ ch.n()` lanes per slot).
pub(crate) fn transposed_with<C: Channels, T: Default + Send>(
    workers: &Workers,
    scratch: &ProductScratch,
    work: &TaskScratch<T>,
    op: &CpuOperator,
    ch: C,
    c: usize,
    d_x: &mut [f32],
    per_block: impl Fn(usize, &mut [f32], &mut T, &mut BlockBuf) -> (f64, f64) + Sync,
) -> (f64, f64) {
    let lanes = ch.n();
    let ranges = op.ranges(workers);
    let mut slots = scratch.slots.lock().unwrap_or_else(|e| e.into_inner());
    // Each block zeroes its own slots just before filling them (while they are in
    // cache), so the buffer is only grown here, never cleared as a whole.
    slots.resize(op.gaussians.len() * lanes, 0.0);
    let mut sums = scratch.block_sums.lock().unwrap_or_else(|e| e.into_inner());
    sums.clear();
    sums.resize(op.blocks(), (0.0, 0.0));
    let jobs: Vec<_> = split_mut(&ranges, &mut slots, |b| {
        op.block_gaussians[b] as usize * lanes
    })
    .into_iter()
    .zip(split_mut(&ranges, &mut sums, |b| b))
    .collect();
    workers.run_jobs(jobs, |((blocks, out), (_, sums))| {
        let mut work = work.slot(&ranges, &blocks);
        let mut buf = scratch.alphas.slot(&ranges, &blocks);
        let base = op.block_gaussians[blocks.start] as usize;
        for (b, s) in blocks.zip(sums.iter_mut()) {
            let (g0, g1) = (
                op.block_gaussians[b] as usize,
                op.block_gaussians[b + 1] as usize,
            );
            let ld = &mut out[(g0 - base) * lanes..(g1 - base) * lanes];
            ld.fill(0.0);
            *s = per_block(b, ld, &mut work, &mut buf);
        }
    });
    let slots = &slots[..];
    let vranges = op.visible_ranges(workers);
    let vis = &op.visible;
    let bound = |i: usize| {
        if i < vis.len() {
            vis[i] as usize * c
        } else {
            vis.last().map_or(0, |&g| (g as usize + 1) * c)
        }
    };
    workers.for_ranges(&vranges, d_x, bound, |is, chunk| {
        let base = bound(is.start);
        reduce_slots(ch, op, slots, c, is, base, chunk);
    });
    sums.iter().fold((0.0, 0.0), |a, s| (a.0 + s.0, a.1 + s.1))
}

/// `d_x += Wᵀ·d_out`.
pub fn spmm_t(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    d_out: &[f32],
    c: usize,
    d_x: &mut [f32],
) {
    with_entries!(op, scratch.reprojected(workers, op), e => spmm_t_typed(workers, scratch, op, e, d_out, c, d_x));
    op.release();
}

fn spmm_t_typed<E: Entries>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    d_out: &[f32],
    c: usize,
    d_x: &mut [f32],
) {
    with_lanes!(c, ch => {
        transposed(workers, scratch, op, ch, c, d_x, |b, ld, _, buf| {
            scatter_block(ch, &block(op, e, b, buf), d_out, c, ld);
            (0.0, 0.0)
        });
    })
}

/// The fused forward → per-pixel loss → backward over the operator's rows: for each
/// row, `F = W_r·x`, the loss of `F` against `table[mask[r]]` (its weighted gradient
/// `d`), and `d_x += W_rᵀ·d`. Returns the summed (L1, 1 − cos) terms.
pub fn fused_loss_step(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    x: &[f32],
    mask: &[u32],
    table: &[f32],
    c: usize,
    scales: &LossScales,
    d_x: &mut [f32],
) -> (f64, f64) {
    let sums = with_entries!(op, scratch.reprojected(workers, op), e => fused_typed(workers, scratch, op, e, x, mask, table, c, scales, d_x));
    op.release();
    sums
}

fn fused_typed<E: Entries>(
    workers: &Workers,
    scratch: &ProductScratch,
    op: &CpuOperator,
    e: E,
    x: &[f32],
    mask: &[u32],
    table: &[f32],
    c: usize,
    scales: &LossScales,
    d_x: &mut [f32],
) -> (f64, f64) {
    with_lanes!(c, ch => {
        transposed(workers, scratch, op, ch, c, d_x, |b, ld, work, buf| {
            let rows = Rows { x, mask, table, c, scales };
            fused_block(ch, &block(op, e, b, buf), &rows, ld, work)
        })
    })
}

/// What the fused step reads besides the operator.
struct Rows<'a> {
    x: &'a [f32],
    mask: &'a [u32],
    table: &'a [f32],
    c: usize,
    scales: &'a LossScales,
}

/// One block of the fused step: the block's rows of `x` gathered into `work`, every
/// row's `F` summed (rows interleaved) into `work` after them, then row by row in
/// order the loss and `ld += W_rᵀ·d`. Compiled for the CPU's widest vector unit as
/// well (the same operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn fused_block<E: Entries, C: Channels>(
    ch: C,
    blk: &Block<'_, E>,
    rows: &Rows<'_>,
    ld: &mut [f32],
    work: &mut Vec<f32>,
) -> (f64, f64) {
    let (lanes, c) = (ch.n(), rows.c);
    gather_rows(blk.list, rows.x, c, lanes, work);
    let listed = work.len();
    let first = blk.rows.start;
    work.resize(listed + blk.rows.len() * lanes, 0.0);
    let (lx, fx) = work.split_at_mut(listed);
    block_row_sums(ch, blk, lx, |r, acc| {
        let o = (r - first) * lanes;
        fx[o..o + lanes].copy_from_slice(ch.view(acc));
    });
    let mut sums = (0.0f64, 0.0f64);
    for (r, f) in blk.rows.clone().zip(fx.chunks_exact(lanes)) {
        let m = rows.mask[r] as usize;
        let mut d = zeros(ch);
        rows.scales.row(
            &f[..c],
            &rows.table[m * c..m * c + c],
            &mut ch.view_mut(&mut d)[..c],
            &mut sums,
        );
        row_scatter(ch, blk, r, &d, ld);
    }
    sums
}

/// How far ahead the gathers prefetch (Gaussians).
const AHEAD: usize = 8;

/// Asks the CPU to start loading the cache line holding `p` into its caches.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is only a hint: it never dereferences the address and
        // never faults, whatever `p` points to.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Appends the block's rows of `x` to `buf` (`[list, lanes]`, padding lanes zero).
#[inline(always)]
fn gather_more(list: &[u32], x: &[f32], c: usize, lanes: usize, buf: &mut Vec<f32>) {
    let start = buf.len();
    buf.resize(start + list.len() * lanes, 0.0);
    for (j, (dst, &g)) in buf[start..].chunks_exact_mut(lanes).zip(list).enumerate() {
        if let Some(&h) = list.get(j + AHEAD) {
            prefetch(x.as_ptr().wrapping_add(h as usize * c));
        }
        let src = &x[g as usize * c..g as usize * c + c];
        // An element loop: `copy_from_slice` calls memcpy, slow for 3 floats.
        for (d, v) in dst.iter_mut().zip(src) {
            *d = *v;
        }
    }
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

    #[test]
    fn tile_ranges_move_to_whole_groups() {
        let g = GROUP_TILES;
        let ranges = group_ranges(
            vec![0..3, 3..g + 1, g + 1..g + 2, g + 2..5 * g + 3],
            5 * g + 3,
        );
        // Every tile once, in order, each range ending on a group boundary (or the end).
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(5 * g + 3));
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(w[0].end % g, 0, "{ranges:?}");
        }
        assert!(ranges.iter().all(|r| !r.is_empty()));
        let short = group_ranges(std::iter::once(0..2).collect(), 2);
        assert_eq!(short.len(), 1);
        assert_eq!(short[0], 0..2);
        assert!(group_ranges(Vec::new(), 0).is_empty());
    }

    #[test]
    fn block_lists_transpose_to_ascending_positions() {
        let (vis, ptr, pos) = transpose_lists(&[5, 2, 7, 2, 5, 9], 10);
        assert_eq!(vis, vec![2, 5, 7, 9]);
        assert_eq!(ptr, vec![0, 2, 4, 5, 6]);
        assert_eq!(pos, vec![1, 3, 0, 4, 2, 5]);
    }
}
