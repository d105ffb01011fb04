//! Re-projection for the operators that store no weights (`recompute`): before each
//! product, the Gaussians an operator lists are projected again for its camera with
//! [`project_one`], the function that projected them when it was built, so every
//! recomputed weight is bitwise the one the walk found.

use crate::format::{FILLER, RSplat};
use crate::operator::CpuOperator;
use crate::pool::Workers;
use crate::project::{Source, project_one};
use crate::walk::{alpha_f32, sigma};

/// Gaussian `g` of `src` projected for its camera, as the walk reads it.
fn splat(src: &Source, g: usize) -> RSplat {
    let geom = &src.geometry;
    let opacity = geom.opacity[g];
    let (_, extent) = geom.cut_extent[g];
    match project_one(geom.means[g], &geom.cov3d[g], opacity, extent, &src.camera) {
        Some(s) => RSplat {
            x: s.xy[0],
            y: s.xy[1],
            conic: s.conic,
            opacity,
        },
        // Not reached: a listed Gaussian was projected from the same geometry and
        // camera when the operator was built. A zero opacity would give weight 0.
        None => RSplat::default(),
    }
}

/// Fills `table` (resized to the operator's columns; no allocation once warm) with the
/// re-projected splats of the Gaussians `op` lists, the `visible` ranges `ranges` on
/// the workers. Does nothing for an operator that stores its weights.
pub(crate) fn reproject(
    workers: &Workers,
    op: &CpuOperator,
    ranges: &[std::ops::Range<usize>],
    table: &mut Vec<RSplat>,
) {
    let Some(src) = op.source() else {
        return;
    };
    table.resize(op.cols(), RSplat::default());
    let vis = op.visible_gaussians();
    let bound = |i: usize| {
        if i < vis.len() {
            vis[i] as usize
        } else {
            vis.last().map_or(0, |&g| g as usize + 1)
        }
    };
    workers.for_ranges(ranges, table, bound, |is, chunk| {
        let base = bound(is.start);
        for &g in &vis[is] {
            chunk[g as usize - base] = splat(src, g as usize);
        }
    });
}

/// A new table with the splats of `gaussians` re-projected for the camera of `op`
/// (a `recompute` operator), on the calling thread (for tests and tools).
pub(crate) fn reproject_alone(op: &CpuOperator, gaussians: &[u32]) -> Vec<RSplat> {
    let mut table = vec![RSplat::default(); op.cols()];
    if let Some(src) = op.source() {
        for &g in gaussians {
            table[g as usize] = splat(src, g as usize);
        }
    }
    table
}

/// How far ahead the gather of a block's splats prefetches.
const AHEAD: usize = 8;

/// Fills `buf.alphas` with the α of every entry of the block's rows `rows` (from the
/// block's first entry; 0 for fillers). The block's splats are first gathered in list
/// order (`buf.splats`: each read once per block, not once per entry, with one
/// transparent splat after them that fillers point to); then every entry's σ is
/// computed as the walk computes it ([`crate::walk::sigma`], in f64, rounded to f32 as
/// the walk rounds it), and last every α ([`crate::walk::alpha_f32`]) in one pass over
/// the block that the compiler vectorises, so each α is bitwise the walk's. Compiled
/// for the CPU's widest vector unit as well (the same operations).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx2+fma",
    "x86_64+avx2+fma"
))]
pub(crate) fn block_alphas<'a>(
    e: &crate::format::Recomputed<'a>,
    list: &[u32],
    rows: std::ops::Range<usize>,
    row_ptr: &[u32],
    buf: &mut crate::format::BlockBuf,
) {
    let first = row_ptr[rows.start] as usize;
    let entries = row_ptr[rows.end] as usize - first;
    buf.splats.clear();
    buf.splats.reserve(list.len() + 1);
    for (i, &g) in list.iter().enumerate() {
        if let Some(&h) = list.get(i + AHEAD) {
            crate::operator::prefetch(e.splats.as_ptr().wrapping_add(h as usize));
        }
        buf.splats.push(e.splats[g as usize]);
    }
    // What fillers read: σ = 0 and opacity 0, so α = 0.
    buf.splats.push(RSplat::default());
    let (splats, none) = (&buf.splats[..], list.len());
    let (sig, opacity) = (&mut buf.alphas, &mut buf.opacity);
    sig.clear();
    sig.resize(entries, 0.0);
    opacity.clear();
    opacity.resize(entries, 0.0);
    for r in rows {
        let p = e.pixels[r];
        // The pixel centre as the walk makes it: an integer plus 0.5, exact.
        let (px, py) = ((p & 0xffff) as f64 + 0.5, (p >> 16) as f64 + 0.5);
        let ks = row_ptr[r] as usize..row_ptr[r + 1] as usize;
        let (sig, opacity) = (
            &mut sig[ks.start - first..],
            &mut opacity[ks.start - first..],
        );
        let mut pos = 0usize;
        for (i, &g) in e.gaps[ks].iter().enumerate() {
            let j = pos + g as usize;
            let real = g != FILLER;
            pos = j + real as usize;
            let s = &splats[if real { j } else { none }];
            let (dx, dy) = if real {
                (s.x - px, s.y - py)
            } else {
                (0.0, 0.0)
            };
            sig[i] = sigma(s.conic, dx, dy) as f32;
            opacity[i] = s.opacity;
        }
    }
    for (a, &o) in sig.iter_mut().zip(opacity.iter()) {
        *a = alpha_f32(o, *a);
    }
}
