//! The segmentation picture on the device (`kernels/view.cu`): LangSplat's 30×30 box
//! blend, the normalised threshold and the 7×7 majority vote of a relevancy map
//! ([`lsplat_query::lerf`]), then the picture over the colours. Each op mirrors the
//! host's code operation for operation (the box's running sums in float64 along the
//! same rows and columns, an exact integer integral image for the vote), so the mask
//! is the host's, bit for bit.
//!
//! | op | items | arguments |
//! |---|---|---|
//! | `BoxRows` | h | map, hsum (f64, w), `w`, `k` |
//! | `BoxCols` | w | map, hsum (f64), blended (w), `w`, `h`, `k` |
//! | `MinMax` | [`REDUCE`] (one block) | blended, mm (w, 2), `n` |
//! | `VoteRows` | h | blended, mm, ii (w, `(h+1)(w+1)`), `w`, `thr` |
//! | `VoteCols` | w + 1 | ii (rw), `w`, `h` |
//! | `Vote` | w·h | ii, px, out (w), `w`, `h`, `r` |

use lsplat_device::Scalar;
use lsplat_device::check::at_least;
use lsplat_device::{Backend, DeviceOp, HostArgs, HostPool, OpArg, OpKernel, Result};

use lsplat_query::lerf::reflect101;

use crate::ops::{PLUGIN, check_counts, pack, unpack};

/// Threads of the block that finds the blended map's range (`VIEW_REDUCE`).
pub const REDUCE: usize = 256;

/// One op of the device segmentation, with the sizes its call is checked against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SegmentOp {
    /// The box's horizontal running sums.
    BoxRows {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Box side.
        k: usize,
    },
    /// The box's vertical running sums and the blend.
    BoxCols {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Box side.
        k: usize,
    },
    /// The blended map's minimum and the maximum above it.
    MinMax {
        /// Pixels.
        n: usize,
    },
    /// The threshold's row sums into the integral image.
    VoteRows {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Threshold on the normalised map.
        thr: f32,
    },
    /// The integral image's column sums.
    VoteCols {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
    },
    /// The vote and the picture.
    Vote {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Vote radius.
        r: usize,
    },
}

impl SegmentOp {
    /// Every op (sizes are placeholders: for compiling their kernels).
    pub fn all() -> Vec<SegmentOp> {
        let (w, h, k) = (1, 1, 1);
        vec![
            SegmentOp::BoxRows { w, h, k },
            SegmentOp::BoxCols { w, h, k },
            SegmentOp::MinMax { n: 1 },
            SegmentOp::VoteRows { w, h, thr: 0.5 },
            SegmentOp::VoteCols { w, h },
            SegmentOp::Vote { w, h, r: 1 },
        ]
    }

    /// Work items of a call.
    pub fn items(&self) -> usize {
        match *self {
            SegmentOp::BoxRows { h, .. } | SegmentOp::VoteRows { h, .. } => h,
            SegmentOp::BoxCols { w, .. } => w,
            SegmentOp::VoteCols { w, .. } => w + 1,
            SegmentOp::MinMax { .. } => REDUCE,
            SegmentOp::Vote { w, h, .. } => w * h,
        }
    }

    fn scalars(&self) -> Vec<Scalar> {
        let u = |v: usize| Scalar::U32(v as u32);
        match *self {
            SegmentOp::BoxRows { w, k, .. } => vec![u(w), u(k)],
            SegmentOp::BoxCols { w, h, k } => vec![u(w), u(h), u(k)],
            SegmentOp::MinMax { n } => vec![u(n)],
            SegmentOp::VoteRows { w, thr, .. } => vec![u(w), Scalar::F32(thr)],
            SegmentOp::VoteCols { w, h } => vec![u(w), u(h)],
            SegmentOp::Vote { w, h, r } => vec![u(w), u(h), u(r)],
        }
    }

    fn buffers(&self) -> usize {
        match self {
            SegmentOp::BoxRows { .. } | SegmentOp::MinMax { .. } => 2,
            SegmentOp::BoxCols { .. } | SegmentOp::VoteRows { .. } | SegmentOp::Vote { .. } => 3,
            SegmentOp::VoteCols { .. } => 1,
        }
    }

    /// Runs the op on `dev` with `buffers` (in the table's order).
    pub fn run<B: Backend>(&self, dev: &B, mut buffers: Vec<OpArg<'_, B>>) -> Result<()> {
        buffers.extend(self.scalars().into_iter().map(OpArg::Scalar));
        dev.run_op(self, self.items(), &mut buffers)
    }
}

impl DeviceOp for SegmentOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }

    fn name(&self) -> &'static str {
        match self {
            SegmentOp::BoxRows { .. } => "view_box_rows",
            SegmentOp::BoxCols { .. } => "view_box_cols",
            SegmentOp::MinMax { .. } => "view_minmax",
            SegmentOp::VoteRows { .. } => "view_vote_rows",
            SegmentOp::VoteCols { .. } => "view_vote_cols",
            SegmentOp::Vote { .. } => "view_vote",
        }
    }

    fn kernel(&self) -> OpKernel {
        let mut k = crate::ops::ViewOp::Relevancy.kernel();
        k.entry = self.name();
        k.block = if matches!(self, SegmentOp::MinMax { .. }) {
            REDUCE as u32
        } else {
            k.block
        };
        k
    }

    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        let args = self.buffers() + self.scalars().len();
        check_counts(n, lens.len(), args, items, self.items())?;
        match *self {
            SegmentOp::BoxRows { w, h, k } | SegmentOp::BoxCols { w, h, k } => {
                at_least(n, "box side", k, 1)?;
                at_least(n, "map", lens[0], w * h)?;
                at_least(n, "hsum", lens[1], w * h)?;
                if matches!(self, SegmentOp::BoxCols { .. }) {
                    at_least(n, "blended", lens[2], w * h)?;
                }
            }
            SegmentOp::MinMax { n: len } => {
                at_least(n, "values", lens[0], len)?;
                at_least(n, "mm", lens[1], 2)?;
            }
            SegmentOp::VoteRows { w, h, .. } => {
                at_least(n, "blended", lens[0], w * h)?;
                at_least(n, "mm", lens[1], 2)?;
                at_least(n, "ii", lens[2], (w + 1) * (h + 1))?;
            }
            SegmentOp::VoteCols { w, h } => at_least(n, "ii", lens[0], (w + 1) * (h + 1))?,
            SegmentOp::Vote { w, h, .. } => {
                at_least(n, "ii", lens[0], (w + 1) * (h + 1))?;
                at_least(n, "px", lens[1], w * h)?;
                at_least(n, "out", lens[2], w * h)?;
                at_least(n, "width", w, 1)?;
                at_least(n, "height", h, 1)?;
            }
        }
        Ok(())
    }

    fn run_cpu(&self, _items: usize, a: &mut HostArgs<'_>, _pool: &dyn HostPool) -> Result<()> {
        match *self {
            SegmentOp::BoxRows { w, h, k } => {
                let (map, hsum) = (a.f32(0)?, a.f64_mut(1)?);
                let half = (k / 2) as isize;
                for y in 0..h {
                    let row = &map[y * w..(y + 1) * w];
                    let out = &mut hsum[y * w..(y + 1) * w];
                    let at = |p: isize| f64::from(row[reflect101(p, w)]);
                    let mut s: f64 = (0..k as isize).map(|j| at(j - half)).sum();
                    for (x, o) in out.iter_mut().enumerate() {
                        *o = s;
                        if x + 1 < w {
                            s += at((x + k) as isize - half) - at(x as isize - half);
                        }
                    }
                }
            }
            SegmentOp::BoxCols { w, h, k } => {
                let (map, hsum, blended) = (a.f32(0)?, a.f64(1)?, a.f32_mut(2)?);
                let half = (k / 2) as isize;
                let norm = (k * k) as f64;
                for x in 0..w {
                    let at = |q: isize| hsum[reflect101(q, h) * w + x];
                    let mut acc = 0f64;
                    for j in 0..k as isize {
                        acc += at(j - half);
                    }
                    for y in 0..h {
                        let p = y * w + x;
                        let f = (acc / norm) as f32;
                        blended[p] = 0.5 * (f + map[p]);
                        if y + 1 < h {
                            acc += at((y + k) as isize - half) - at(y as isize - half);
                        }
                    }
                }
            }
            SegmentOp::MinMax { n } => {
                let (v, mm) = (a.f32(0)?, a.f32_mut(1)?);
                let lo = v[..n].iter().copied().fold(f32::INFINITY, f32::min);
                mm[0] = lo;
                mm[1] = v[..n].iter().fold(f32::NEG_INFINITY, |m, x| m.max(x - lo));
            }
            SegmentOp::VoteRows { w, h, thr } => {
                let (blended, mm, ii) = (a.f32(0)?, a.f32(1)?, a.u32_mut(2)?);
                let (lo, span) = (mm[0], mm[1] + 1e-9);
                ii[..=w].fill(0);
                for y in 0..h {
                    let row = &mut ii[(y + 1) * (w + 1)..(y + 2) * (w + 1)];
                    row[0] = 0;
                    let mut s = 0u32;
                    for x in 0..w {
                        let nv = ((blended[y * w + x] - lo) / span) * 2.0 - 1.0;
                        s += u32::from(nv.clamp(0.0, 1.0) > thr);
                        row[x + 1] = s;
                    }
                }
            }
            SegmentOp::VoteCols { w, h } => {
                let ii = a.u32_mut(0)?;
                for y in 1..=h {
                    for x in 0..=w {
                        ii[y * (w + 1) + x] += ii[(y - 1) * (w + 1) + x];
                    }
                }
            }
            SegmentOp::Vote { w, h, r } => {
                let (ii, px, out) = (a.u32(0)?, a.u32(1)?, a.u32_mut(2)?);
                for (p, o) in out[..w * h].iter_mut().enumerate() {
                    let (y, x) = (p / w, p % w);
                    let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h - 1));
                    let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(w - 1));
                    let inside = y1 > y0 && x1 > x0 && {
                        let at = |yy: usize, xx: usize| ii[yy * (w + 1) + xx];
                        let ones = at(y1, x1) + at(y0, x0) - at(y0, x1) - at(y1, x0);
                        let area = ((y1 - y0) * (x1 - x0)) as u32;
                        ones > area - ones
                    };
                    let mut rgb = [0u8; 3];
                    crate::frame::segment_pixel(u8::from(inside), &unpack(px[p]), &mut rgb);
                    *o = pack(rgb);
                }
            }
        }
        Ok(())
    }
}
