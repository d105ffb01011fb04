//! The per-pixel front-to-back walk of one tile's splat list, with the rasterizer's
//! exact rules, made cheap for the many splats of a list that cannot reach a pixel.
//!
//! A pair (pixel, splat) contributes only if σ ≤ ln(255·o) (else α < 1/255). For a
//! positive-definite conic the pixels with σ ≤ cut form an ellipse, so per pixel row
//! each splat has an x-interval of candidates (empty for most rows). The walker
//! computes these intervals once per row in f64, widened by a margin far above their
//! rounding, and the pixels of that row test only the splats whose interval holds
//! them; each of those then gets the exact test. Every skipped pair is one the exact
//! test rejects, so the walk visits exactly the pairs the plain walk visits.

use lsplat_core::constants::{ALPHA_THRESHOLD, MAX_ALPHA, TRANSMITTANCE_STOP};

use crate::project::ProjSplat;

/// Relative and absolute widening (pixels) of the candidate intervals.
const REL_MARGIN: f64 = 1e-6;
const ABS_MARGIN: f64 = 1e-6;
/// Margin of `cut` over ln(255·o), far above the rounding of σ, `exp` and `o·e^{−σ}`.
const CUT_MARGIN: f64 = 1e-3;

/// A projected splat as the walk reads it.
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkSplat {
    /// Screen-space centre.
    pub xy: [f64; 2],
    /// Inverse 2D covariance `(a, b, c)`.
    pub conic: [f64; 3],
    /// Opacity.
    pub opacity: f32,
    /// A σ above which α = o·e^{−σ} is certainly below 1/255: ln(255·o) + 1e-3.
    pub cut: f32,
    /// Pixel-centre rows `py` whose pixels may have σ ≤ cut (`[py0, py1]`; the whole
    /// line when the conic is not positive definite).
    pub rows: [f64; 2],
}

impl WalkSplat {
    fn new(s: &ProjSplat) -> Self {
        let cut = if s.opacity > 0.0 {
            ((255.0 * s.opacity as f64).ln() + CUT_MARGIN) as f32
        } else {
            f32::NEG_INFINITY
        };
        let [a, b, c] = s.conic;
        let det = a * c - b * b;
        // min over dx of σ at row offset dy is ½·dy²·det/a.
        let rows = if a > 0.0 && det > 0.0 && (cut as f64).is_finite() {
            let ext2 = 2.0 * a * cut as f64 / det;
            if ext2 < 0.0 {
                [f64::INFINITY, f64::NEG_INFINITY]
            } else {
                let e = ext2.sqrt() * (1.0 + REL_MARGIN) + ABS_MARGIN;
                [s.xy[1] - e, s.xy[1] + e]
            }
        } else if cut == f32::NEG_INFINITY && a > 0.0 && det > 0.0 {
            [f64::INFINITY, f64::NEG_INFINITY]
        } else {
            [f64::NEG_INFINITY, f64::INFINITY]
        };
        WalkSplat {
            xy: s.xy,
            conic: s.conic,
            opacity: s.opacity,
            cut,
            rows,
        }
    }

    /// The pixel-centre x-interval of row `py` where σ ≤ cut may hold.
    #[inline]
    fn columns(&self, py: f64) -> [f64; 2] {
        let [a, b, c] = self.conic;
        let det = a * c - b * b;
        if !(a > 0.0 && det > 0.0 && (self.cut as f64).is_finite()) {
            return [f64::NEG_INFINITY, f64::INFINITY];
        }
        // ½a·dx² + b·dy·dx + ½c·dy² − cut ≤ 0 with dx = x − px, dy = y − py.
        let dy = self.xy[1] - py;
        let disc = 2.0 * a * self.cut as f64 - det * dy * dy;
        if disc < 0.0 {
            // Only rounding can put a row with a negative discriminant inside the
            // row range: keep a margin-wide interval around the minimum.
            let m = self.xy[0] + b * dy / a;
            let e = ABS_MARGIN + REL_MARGIN * m.abs();
            return [m - e, m + e];
        }
        let r = disc.sqrt() / a;
        let mid = b * dy / a; // dx at the minimum is −b·dy/a, so px = x + b·dy/a.
        let e = r * (1.0 + REL_MARGIN) + ABS_MARGIN + REL_MARGIN * (self.xy[0] + mid).abs();
        [self.xy[0] + mid - e, self.xy[0] + mid + e]
    }
}

/// One candidate of a row: position in the tile list and its x-interval.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    k: u32,
    x: [f64; 2],
}

/// A tile's splats gathered in list order and the candidates of the current row.
#[derive(Default)]
pub struct TileWalker {
    local: Vec<WalkSplat>,
    row: Option<f64>,
    candidates: Vec<Candidate>,
}

impl TileWalker {
    /// Gathers the splats of `list` (a tile's list, front to back).
    pub fn gather(&mut self, splats: &[ProjSplat], list: &[u32]) {
        self.local.clear();
        self.local
            .extend(list.iter().map(|&g| WalkSplat::new(&splats[g as usize])));
        self.row = None;
    }

    fn set_row(&mut self, py: f64) {
        self.candidates.clear();
        for (k, s) in self.local.iter().enumerate() {
            if py >= s.rows[0] && py <= s.rows[1] {
                self.candidates.push(Candidate {
                    k: k as u32,
                    x: s.columns(py),
                });
            }
        }
        self.row = Some(py);
    }

    /// Walks pixel centre `(px, py)` over the gathered list with the rasterizer's
    /// rules and calls `visit(k, g, w)` for each contributing pair: `k` is the
    /// position in `list`, `g = list[k]` the Gaussian, `w = α·T` its weight.
    #[inline(always)]
    pub fn walk(&mut self, list: &[u32], px: f64, py: f64, mut visit: impl FnMut(usize, u32, f32)) {
        if self.row != Some(py) {
            self.set_row(py);
        }
        let mut t = 1.0f32;
        for cand in &self.candidates {
            if px < cand.x[0] || px > cand.x[1] {
                continue;
            }
            let k = cand.k as usize;
            let s = &self.local[k];
            let dx = s.xy[0] - px;
            let dy = s.xy[1] - py;
            let sigma = 0.5 * (s.conic[0] * dx * dx + s.conic[2] * dy * dy) + s.conic[1] * dx * dy;
            // σ < 0 is skipped; so is σ > cut (α < 1/255 for sure), without an `exp`.
            if sigma < 0.0 || sigma > s.cut as f64 {
                continue;
            }
            let alpha = (s.opacity * (-(sigma as f32)).exp()).min(MAX_ALPHA);
            if alpha < ALPHA_THRESHOLD {
                continue;
            }
            let next_t = t * (1.0 - alpha);
            if next_t <= TRANSMITTANCE_STOP {
                break;
            }
            visit(k, list[k], alpha * t);
            t = next_t;
        }
    }
}

/// The plain walk over every splat of the list (the reference for the tests).
pub fn walk_plain(
    walker: &TileWalker,
    list: &[u32],
    px: f64,
    py: f64,
    mut visit: impl FnMut(usize, u32, f32),
) {
    let mut t = 1.0f32;
    for (k, s) in walker.local.iter().enumerate() {
        let dx = s.xy[0] - px;
        let dy = s.xy[1] - py;
        let sigma = 0.5 * (s.conic[0] * dx * dx + s.conic[2] * dy * dy) + s.conic[1] * dx * dy;
        if sigma < 0.0 {
            continue;
        }
        let alpha = (s.opacity * (-(sigma as f32)).exp()).min(MAX_ALPHA);
        if alpha < ALPHA_THRESHOLD {
            continue;
        }
        let next_t = t * (1.0 - alpha);
        if next_t <= TRANSMITTANCE_STOP {
            break;
        }
        visit(k, list[k], alpha * t);
        t = next_t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    /// Random splats (round, elongated, rotated, faint, opaque) around a 16×16 tile:
    /// the candidate walk visits exactly the pairs and weights of the plain walk.
    #[test]
    fn candidate_walk_equals_the_plain_walk() {
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
                    ProjSplat {
                        xy: [rng.range(-20.0, 36.0) as f64, rng.range(-20.0, 36.0) as f64],
                        conic: [syy / det, -sxy / det, sxx / det],
                        opacity: if rng.f32() < 0.1 {
                            rng.range(0.0, 0.01)
                        } else {
                            rng.range(0.0, 1.0)
                        },
                        depth: 1.0,
                        rect: [0; 4],
                    }
                })
                .collect();
            let list: Vec<u32> = (0..n as u32).collect();
            let mut w = TileWalker::default();
            w.gather(&splats, &list);
            let mut visited = 0;
            for y in 0..16 {
                for x in 0..16 {
                    let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
                    let mut a = Vec::new();
                    walk_plain(&w, &list, px, py, |k, g, wt| a.push((k, g, wt.to_bits())));
                    let mut b = Vec::new();
                    w.walk(&list, px, py, |k, g, wt| b.push((k, g, wt.to_bits())));
                    assert_eq!(a, b, "trial {trial}, pixel ({x}, {y})");
                    visited += a.len();
                }
            }
            assert!(visited > 0);
        }
    }
}
