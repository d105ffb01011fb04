//! The front-to-back walk of one tile's splat list with the rasterizer's exact rules,
//! one pixel row of the tile at a time, with every pixel of the row in a SIMD lane.
//!
//! For each splat of the list (front to back) that may reach the row, the walk
//! evaluates σ, α = min(0.99, o·e^{−σ}) and the transmittance update for all the row's
//! pixels at once (16 lanes of f64 σ and f32 α; the loop is compiled for AVX-512 and
//! AVX2 as well and picked at run time). Each lane follows the per-pixel rules exactly:
//! a pair with σ < 0 or α < 1/255 is skipped, a pair whose `T·(1 − α)` would reach
//! 1e-4 ends the pixel (and is not used), every other pair contributes `w = α·T`. The
//! lanes are independent, so each pixel's weights, and their order, are those of a
//! walk over that pixel alone ([`walk_pixel`], the reference the tests compare with).
//!
//! A splat may reach a row only if the row lies within its ellipse σ ≤ ln(255·o)
//! (+1e-3): [`row_extent`] bounds that ellipse's vertical half-extent once per camera,
//! and [`TileWalker::gather`] lists every splat under the rows it may reach. Skipping
//! the other rows skips only pairs with α < 1/255.
//!
//! `e^{−σ}` is [`exp_neg`], our own f32 exponential (a polynomial, within 2 units in
//! the last place), identical in every lane and every build.

use lsplat_core::constants::{ALPHA_THRESHOLD, MAX_ALPHA, TRANSMITTANCE_STOP};
use multiversion::multiversion;

use crate::project::ProjSplat;

/// How far ahead [`TileWalker::gather`] prefetches.
const AHEAD: usize = 12;

/// Most pixels in a tile row (the largest supported tile edge).
pub const LANES: usize = 16;

/// Relative and absolute widening (pixels) of a splat's row extent.
const REL_MARGIN: f64 = 1e-6;
const ABS_MARGIN: f64 = 1e-6;
/// Margin of the cut over ln(255·o), far above the rounding of σ, `exp` and `o·e^{−σ}`.
const CUT_MARGIN: f64 = 1e-3;
/// σ above which e^{−σ} is evaluated as e^{−SIGMA_CAP} (still far below 1/255).
const SIGMA_CAP: f32 = 80.0;

/// The σ beyond which a splat of opacity `o` gives α < 1/255, with the margin:
/// ln(255·o) + 1e-3 (−∞ or NaN when o ≤ 0). Computed once per splat when the
/// geometry is uploaded (`CpuGeometry::cut_extent`, copied into [`ProjSplat::cut`]),
/// not once per camera or per tile that lists it.
pub fn alpha_cut(opacity: f32) -> f64 {
    (255.0 * opacity as f64).ln() + CUT_MARGIN
}

/// A bound on the vertical half-extent (pixels) of the region σ ≤ ln(255·o) + 1e-3 of
/// a splat with conic `(a, b, c)` and opacity `o`: rows farther from the centre hold
/// only pairs with α < 1/255. Infinite when the conic is not positive definite (every
/// row may be reached), negative when no pixel can be (o ≤ 0).
/// `cut` is the splat's [`alpha_cut`].
pub fn row_extent(conic: [f64; 3], opacity: f32, cut: f64) -> f32 {
    if opacity <= 0.0 {
        return -1.0;
    }
    let [a, b, c] = conic;
    let det = a * c - b * b;
    if !(a > 0.0 && det > 0.0 && cut.is_finite()) {
        return f32::INFINITY;
    }
    // min over dx of σ at row offset dy is ½·dy²·det/a.
    let ext2 = 2.0 * a * cut / det;
    if ext2 < 0.0 {
        return -1.0;
    }
    let e = ext2.sqrt() * (1.0 + REL_MARGIN) + ABS_MARGIN;
    // Rounded up, so the f32 never narrows the f64 bound.
    let f = e as f32;
    if (f as f64) < e { f.next_up() } else { f }
}

/// e^{−s} for s ≥ 0 in f32 (s above 80 is taken as 80, where e^{−s} is far below
/// any α threshold), within 2 units in the last place: 2^n·p(r) with n = round(−s·log2 e),
/// r = −s − n·ln 2 in two parts (|r| ≤ ln2/2), p a degree-7 polynomial fit of e^r.
#[inline(always)]
pub fn exp_neg(s: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer.
    const LN2_HI: f32 = 0.693_359_4; // 0.693359375: exact, few bits, so n·LN2_HI is exact.
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = -s.clamp(0.0, SIGMA_CAP);
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_2e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let e = p * (r * r) + r + 1.0;
    // n (−116..=0) sits in t's low mantissa bits; 2^n built from its exponent field.
    let k = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    e * f32::from_bits(((k + 127) as u32) << 23)
}

/// σ = ½(a·dx² + c·dy²) + b·dx·dy of conic `(a, b, c)` at offset `(dx, dy)` = splat
/// centre − pixel centre: the one expression every walk, and every product that
/// recomputes weights, evaluates (so they agree bitwise).
#[inline(always)]
pub fn sigma([a, b, c]: [f64; 3], dx: f64, dy: f64) -> f64 {
    0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
}

/// α = min(0.99, o·e^{−σ}) (the caller skips σ < 0 and α < 1/255).
#[inline(always)]
pub fn alpha(opacity: f32, sigma: f64) -> f32 {
    alpha_f32(opacity, sigma as f32)
}

/// [`alpha`] of σ already rounded to f32 (the same bits).
#[inline(always)]
pub fn alpha_f32(opacity: f32, sigma: f32) -> f32 {
    (opacity * exp_neg(sigma)).min(MAX_ALPHA)
}

/// A gathered splat: what the lanes read, and the chord of its cut ellipse.
#[derive(Clone, Copy, Debug, Default)]
struct Local {
    x: f64,
    y: f64,
    a: f64,
    b: f64,
    c: f64,
    opacity: f32,
    /// The cut ellipse σ ≤ ln(255·o) + 1e-3 meets row offset dy = y − py in the pixels
    /// px with (x + skew·dy − px)² ≤ reach − narrow·dy² (σ = ½a·u² + ½(det/a)·dy² with
    /// u = x + (b/a)·dy − px): skew = b/a, reach = 2·cut/a, narrow = det/a². `reach`
    /// is infinite when the conic is not positive definite (no pixel is ruled out).
    skew: f64,
    reach: f64,
    narrow: f64,
}

impl Local {
    fn new(s: &ProjSplat) -> Local {
        let [a, b, c] = s.conic;
        let det = a * c - b * b;
        let cut = s.cut;
        let (skew, reach, narrow) = if a > 0.0 && det > 0.0 && cut.is_finite() {
            (b / a, 2.0 * cut / a, det / (a * a))
        } else {
            (0.0, f64::INFINITY, 0.0)
        };
        Local {
            x: s.xy[0],
            y: s.xy[1],
            a,
            b,
            c,
            opacity: s.opacity,
            skew,
            reach,
            narrow,
        }
    }
}

/// A tile's splats gathered in list order, and per pixel row of the tile the
/// positions (in list order) of the splats that may reach it.
#[derive(Default)]
pub struct TileWalker {
    local: Vec<Local>,
    /// Per tile row: list positions.
    rows: Vec<Vec<u32>>,
    /// Pixel-centre x of lane 0, pixel-centre y of row 0.
    origin: [f64; 2],
}

impl TileWalker {
    /// Gathers the splats of `list` (a tile's list, front to back) for the tile whose
    /// top-left pixel is `(x0, y0)`, with `size` pixel rows and columns (at most
    /// [`LANES`]).
    pub fn gather(&mut self, splats: &[ProjSplat], list: &[u32], (x0, y0): (u32, u32), size: u32) {
        let size = size as usize;
        assert!(size <= LANES, "tile edge {size} above {LANES}");
        self.origin = [x0 as f64 + 0.5, y0 as f64 + 0.5];
        self.local.clear();
        self.rows.resize_with(size, Vec::new);
        for r in &mut self.rows {
            r.clear();
        }
        let top = self.origin[1];
        for (k, &g) in list.iter().enumerate() {
            // The list is in depth order, so its splats lie anywhere in memory: start
            // loading the one AHEAD places on.
            if let Some(&h) = list.get(k + AHEAD) {
                let p = splats.as_ptr().wrapping_add(h as usize).cast::<u8>();
                crate::operator::prefetch(p);
                crate::operator::prefetch(p.wrapping_add(std::mem::size_of::<ProjSplat>() - 1));
            }
            let s = &splats[g as usize];
            self.local.push(Local::new(s));
            let e = s.row_extent as f64;
            if e.is_nan() || e < 0.0 {
                continue;
            }
            // Rows r with |top + r − y| ≤ e.
            let (lo, hi) = (s.xy[1] - e - top, s.xy[1] + e - top);
            if !(hi >= 0.0 && lo <= (size - 1) as f64) {
                continue;
            }
            let r0 = if lo > 0.0 { lo.ceil() as usize } else { 0 };
            let r1 = if hi < (size - 1) as f64 {
                hi.floor() as usize
            } else {
                size - 1
            };
            if r0 <= r1 {
                for row in &mut self.rows[r0..=r1] {
                    row.push(k as u32);
                }
            }
        }
    }

    /// Walks pixel row `row` of the tile for the pixels of `lanes` (bit i: the pixel
    /// in column i). For each splat that contributes to some of them, in list order,
    /// calls `visit(k, w, m)`: `k` its position in the list, `m` the lanes it
    /// contributes to and `w[i]` its weight α·T at lane i (meaningful where `m` has
    /// bit i).
    #[inline(always)]
    pub fn walk_row<F: FnMut(usize, &[f32; LANES], u32)>(&self, row: usize, lanes: u32, visit: F) {
        walk_row_impl(&self.local, &self.rows[row], self.origin, row, lanes, visit);
    }

    /// The weights of pixel `(col, row)` of the tile, walked alone over the whole list
    /// (the reference of the row walk): `(k, w)` per contributing pair, in order.
    pub fn walk_pixel(&self, col: usize, row: usize) -> Vec<(usize, f32)> {
        let px = self.origin[0] + col as f64;
        let py = self.origin[1] + row as f64;
        let mut out = Vec::new();
        let mut t = 1.0f32;
        for (k, s) in self.local.iter().enumerate() {
            let sigma = sigma([s.a, s.b, s.c], s.x - px, s.y - py);
            if sigma < 0.0 {
                continue;
            }
            let alpha = alpha(s.opacity, sigma);
            if alpha < ALPHA_THRESHOLD {
                continue;
            }
            let next_t = t * (1.0 - alpha);
            if next_t <= TRANSMITTANCE_STOP {
                break;
            }
            out.push((k, alpha * t));
            t = next_t;
        }
        out
    }
}

/// The row walk (see [`TileWalker::walk_row`]), compiled for the CPU's widest vector
/// unit as well (the same operations in every lane and build, so the same bits).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma"))]
fn walk_row_impl<F: FnMut(usize, &[f32; LANES], u32)>(
    local: &[Local],
    cands: &[u32],
    origin: [f64; 2],
    row: usize,
    lanes: u32,
    mut visit: F,
) {
    let mut px = [0f64; LANES];
    for (i, p) in px.iter_mut().enumerate() {
        *p = origin[0] + i as f64;
    }
    let py = origin[1] + row as f64;
    let mut t = [1f32; LANES];
    // 1.0 in the lanes still walking, 0.0 in the others.
    let mut live = [0f32; LANES];
    for (i, l) in live.iter_mut().enumerate() {
        *l = if lanes >> i & 1 != 0 { 1.0 } else { 0.0 };
    }
    let mut open = lanes;
    if open == 0 {
        return;
    }
    // Pixel-centre x of the first and last lane still open.
    let span = |open: u32| {
        (
            origin[0] + open.trailing_zeros() as f64,
            origin[0] + (31 - open.leading_zeros()) as f64,
        )
    };
    let (mut left, mut right) = span(open);
    for &k in cands {
        if open == 0 {
            break;
        }
        let s = local[k as usize];
        let dy = s.y - py;
        // Skip a splat whose cut-ellipse chord on this row misses the open lanes: it
        // would give them only α < 1/255 (the cut's 1e-3 margin dwarfs the rounding).
        let mid = s.x + s.skew * dy;
        let gap = if mid < left {
            left - mid
        } else if mid > right {
            mid - right
        } else {
            0.0
        };
        if gap * gap > s.reach - s.narrow * dy * dy {
            continue;
        }
        let mut alphas = [0f32; LANES];
        for i in 0..LANES {
            let sigma = sigma([s.a, s.b, s.c], s.x - px[i], dy);
            let a = alpha(s.opacity, sigma);
            // Skipped pairs (σ < 0, α < 1/255, or a lane that has ended) get α = 0.
            let keep = sigma >= 0.0 && a >= ALPHA_THRESHOLD && live[i] != 0.0;
            alphas[i] = if keep { a } else { 0.0 };
        }
        let mut w = [0f32; LANES];
        let mut used = 0u32;
        let mut ended = 0u32;
        for i in 0..LANES {
            let a = alphas[i];
            let next = t[i] * (1.0 - a);
            let stop = a > 0.0 && next <= TRANSMITTANCE_STOP;
            let take = a > 0.0 && !stop;
            w[i] = a * t[i];
            t[i] = if take { next } else { t[i] };
            live[i] = if stop { 0.0 } else { live[i] };
            used |= (take as u32) << i;
            ended |= (stop as u32) << i;
        }
        if ended != 0 {
            open &= !ended;
            if open != 0 {
                (left, right) = span(open);
            }
        }
        if used != 0 {
            visit(k as usize, &w, used);
        }
    }
}

/// The lanes set in `m`, ascending.
#[inline(always)]
pub fn lanes_of(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(i)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    /// Random splats (round, elongated, rotated, faint, opaque) around a 16×16 tile
    /// (and an 8×8 one): the row walk gives every pixel exactly the pairs and weights
    /// of the walk over that pixel alone, for any subset of a row's pixels.
    #[test]
    fn row_walk_equals_the_per_pixel_walk() {
        let mut rng = Rng::new(41);
        for trial in 0..40 {
            let n = 200;
            let splats: Vec<ProjSplat> = (0..n)
                .map(|_| {
                    let s1 = rng.range(0.3, 12.0) as f64;
                    let s2 = if rng.f32() < 0.3 {
                        s1 * rng.range(0.01, 0.2) as f64
                    } else {
                        rng.range(0.3, 12.0) as f64
                    };
                    let th = rng.range(0.0, std::f32::consts::PI) as f64;
                    let (co, si) = (th.cos(), th.sin());
                    // Σ = R·diag(s1², s2²)·Rᵀ + 0.3·I, conic = Σ⁻¹.
                    let (v1, v2) = (s1 * s1, s2 * s2);
                    let sxx = co * co * v1 + si * si * v2 + 0.3;
                    let syy = si * si * v1 + co * co * v2 + 0.3;
                    let sxy = co * si * (v1 - v2);
                    let det = sxx * syy - sxy * sxy;
                    let conic = [syy / det, -sxy / det, sxx / det];
                    let opacity = if rng.f32() < 0.1 {
                        rng.range(0.0, 0.01)
                    } else {
                        rng.range(0.0, 1.0)
                    };
                    ProjSplat {
                        xy: [rng.range(-20.0, 36.0) as f64, rng.range(-20.0, 36.0) as f64],
                        conic,
                        opacity,
                        depth: 1.0,
                        rect: [0; 4],
                        row_extent: row_extent(conic, opacity, alpha_cut(opacity)),
                        cut: alpha_cut(opacity),
                    }
                })
                .collect();
            let list: Vec<u32> = (0..n as u32).collect();
            let size = if trial % 4 == 3 { 8 } else { 16 };
            let mut w = TileWalker::default();
            w.gather(&splats, &list, (0, 0), size);
            let mut visited = 0;
            for y in 0..size as usize {
                let lanes = if trial % 2 == 0 {
                    (1u32 << size) - 1
                } else {
                    rng.below(1 << size) as u32
                };
                let mut got = vec![Vec::new(); LANES];
                w.walk_row(y, lanes, |k, wt, m| {
                    for i in lanes_of(m) {
                        got[i].push((k, wt[i].to_bits()));
                    }
                });
                for (x, got) in got.iter().enumerate() {
                    let want: Vec<(usize, u32)> = if lanes >> x & 1 != 0 {
                        w.walk_pixel(x, y)
                            .into_iter()
                            .map(|(k, v)| (k, v.to_bits()))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    assert_eq!(got, &want, "trial {trial}, pixel ({x}, {y})");
                    visited += want.len();
                }
            }
            assert!(visited > 0);
        }
    }

    /// e^{−s} against the f64 exponential: within two units in the last place of f32
    /// over the whole range the walk uses, and mostly correctly rounded.
    #[test]
    fn exp_neg_is_within_two_ulp() {
        let (mut wrong, mut n) = (0u32, 0u32);
        let mut s = 0.0f32;
        while s <= 80.0 {
            let want = (-(s as f64)).exp();
            let got = exp_neg(s) as f64;
            let ulp = (want as f32).next_up() as f64 - want as f32 as f64;
            assert!((got - want).abs() <= 2.0 * ulp, "s = {s}: {got} vs {want}");
            wrong += (exp_neg(s) != want as f32) as u32;
            n += 1;
            s = s.next_up().max(s * (1.0 + 1e-6));
        }
        assert!(wrong * 5 < n, "{wrong} of {n} not correctly rounded");
        assert_eq!(exp_neg(0.0), 1.0);
        assert_eq!(exp_neg(-3.0), 1.0);
        assert_eq!(exp_neg(1e30), exp_neg(80.0));
        assert!(exp_neg(80.0) > 0.0 && exp_neg(80.0) < 1e-34);
    }

    #[test]
    fn row_extents_bound_the_cut_ellipse() {
        let mut rng = Rng::new(7);
        for _ in 0..500 {
            let (a, c) = (rng.range(0.01, 2.0) as f64, rng.range(0.01, 2.0) as f64);
            let b = rng.range(-0.99, 0.99) as f64 * (a * c).sqrt();
            let o = rng.range(0.01, 1.0);
            let e = row_extent([a, b, c], o, alpha_cut(o)) as f64;
            let cut = (255.0 * o as f64).ln();
            // The lowest σ on the row dy = e just outside the bound is above the cut.
            let dy = e * (1.0 + 1e-9);
            let dx = -b * dy / a;
            let sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy;
            assert!(sigma > cut, "σ {sigma} at the bound, cut {cut}");
        }
        assert_eq!(row_extent([1.0, 0.0, 1.0], 0.0, alpha_cut(0.0)), -1.0);
        assert_eq!(
            row_extent([1.0, 2.0, 1.0], 0.5, alpha_cut(0.5)),
            f32::INFINITY
        );
    }
}
