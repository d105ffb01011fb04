//! The viewer's device ops (`kernels/view.cu`): a frame's pictures made where the
//! rasterizer ran, so a GPU sends back only the RGB8 picture and the relevancy map.
//! Each op is a kernel plus a native implementation over host slices
//! ([`lsplat_device::DeviceOp`]); [`crate::frame`] uses them on backends whose
//! buffers are not host memory, and keeps its own threaded host path on the CPU.
//!
//! A pixel's colour is one u32, `r | g << 8 | b << 16`. Every op mirrors the host
//! path's arithmetic in the same order (`round_u8`, `Linear::dots`, the code table's
//! `locate`/`lookup`/corner sums, `relevancy`, `turbo`, `Pca::rgb`), so simt gives
//! the host path's bits; a CUDA device differs only in `expf` (the relevancy of a
//! linear level).
//!
//! | op | items | arguments |
//! |---|---|---|
//! | `Sh` | Gaussians | means, dc, rest, factors, rows (first 4 of each written), `stride`, `k`, `deg`, eye `x`, `y`, `z` |
//! | `Pixels` | band pixels | out, source, px (w), vals (w), `stride`, `base`, `keep`, `rows` |
//! | `Dots` | band pixels | out, source, targets, dots (w), `stride`, `base`, `k`, `t`, `rows` |
//! | `Cells` | pixels | vals, grid, bits (OR-ed), `cells` |
//! | `Lookup` | pixels | vals, grid, table, out (w), `cells`, `t` |
//! | `Relevancy` | pixels | dots, map (w) |
//! | `Heat` | pixels | px, map, out (w), `top` |
//! | `Pca` | pixels | dots, vals, pca, out (w), `t`, `keep` |
//! | `Bytes` | ⌈3·pixels/4⌉ | px, bytes (w), `pixels` |

use lsplat_device::Scalar;
use lsplat_device::check::at_least;
use lsplat_device::{Backend, DeviceError, DeviceOp, HostArgs, HostPool, OpArg, OpKernel, Result};
use lsplat_query::picture::round_u8;
use lsplat_render::colour::{MAX_DEGREE, SH_FACTORS, direction, eval};

use crate::answers::relevancy;

/// The ops' plugin name (in messages and kernel caches).
pub const PLUGIN: &str = "view";
/// Opacity below which a pixel is background (the features picture is black there).
pub const ALPHA_MIN: f32 = 1e-6;
const SOURCE: &str = include_str!("../kernels/view.cu");
const BLOCK: u32 = 256;

/// One of the viewer's ops, with the sizes its call is checked against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ViewOp {
    /// The splats' SH colours seen from `eye` into the first four values of rows.
    Sh {
        /// Values per row.
        stride: usize,
        /// SH coefficients per channel in `rest`.
        k: usize,
        /// Degree evaluated (≤ 3).
        deg: usize,
        /// The camera centre.
        eye: [f32; 3],
    },
    /// A band's colours (and `keep` values from channel 3) into frame order.
    Pixels {
        /// Values per rendered row.
        stride: usize,
        /// First frame pixel of the band.
        base: usize,
        /// Values kept per pixel.
        keep: usize,
        /// Rendered rows.
        rows: usize,
        /// Frame pixels.
        pixels: usize,
    },
    /// A linear level's dot products with `t` targets over `k` channels.
    Dots {
        /// Values per rendered row.
        stride: usize,
        /// First frame pixel of the band.
        base: usize,
        /// Channels.
        k: usize,
        /// Targets.
        t: usize,
        /// Rendered rows.
        rows: usize,
        /// Frame pixels.
        pixels: usize,
    },
    /// Marks the code-table cells the pixels' codes fall in.
    Cells {
        /// Cells per axis.
        cells: usize,
    },
    /// The code table's interpolation (`t` = 1 or 3 values per vertex).
    Lookup {
        /// Cells per axis.
        cells: usize,
        /// Values per vertex.
        t: usize,
    },
    /// LangSplat's relevancy of five dot products per pixel.
    Relevancy,
    /// The heat map over the colours, scaled to the map's `top`.
    Heat {
        /// The top of the scale ([`lsplat_query::picture::heat_top`] of the map).
        top: f32,
    },
    /// The PCA colours of three dot products per pixel (`t` per pixel).
    Pca {
        /// Dot products per pixel.
        t: usize,
        /// Values kept per pixel (the opacity first).
        keep: usize,
    },
    /// The picture as packed RGB8 bytes.
    Bytes {
        /// Pixels.
        pixels: usize,
    },
}

impl ViewOp {
    /// Every op (sizes are placeholders: for compiling their kernels).
    pub fn all() -> Vec<ViewOp> {
        let (stride, base, keep, rows, pixels, k, t, cells) = (0, 0, 0, 0, 0, 0, 0, 1);
        vec![
            ViewOp::Sh {
                stride: 4,
                k,
                deg: 0,
                eye: [0.0; 3],
            },
            ViewOp::Pixels {
                stride,
                base,
                keep,
                rows,
                pixels,
            },
            ViewOp::Dots {
                stride,
                base,
                k,
                t,
                rows,
                pixels,
            },
            ViewOp::Cells { cells },
            ViewOp::Lookup { cells, t },
            ViewOp::Relevancy,
            ViewOp::Heat { top: 1.0 },
            ViewOp::Pca { t, keep },
            ViewOp::Bytes { pixels },
        ]
    }

    /// The scalars that follow the buffers (from the op's own sizes, so a call cannot
    /// disagree with what was checked).
    fn scalars(&self) -> Vec<Scalar> {
        let u = |v: usize| Scalar::U32(v as u32);
        match *self {
            ViewOp::Sh {
                stride,
                k,
                deg,
                eye,
            } => {
                let mut v = vec![u(stride), u(k), u(deg)];
                v.extend(eye.map(Scalar::F32));
                v
            }
            ViewOp::Pixels {
                stride,
                base,
                keep,
                rows,
                ..
            } => vec![u(stride), u(base), u(keep), u(rows)],
            ViewOp::Dots {
                stride,
                base,
                k,
                t,
                rows,
                ..
            } => vec![u(stride), u(base), u(k), u(t), u(rows)],
            ViewOp::Cells { cells } => vec![u(cells)],
            ViewOp::Lookup { cells, t } => vec![u(cells), u(t)],
            ViewOp::Relevancy => vec![],
            ViewOp::Heat { top } => vec![Scalar::F32(top)],
            ViewOp::Pca { t, keep } => vec![u(t), u(keep)],
            ViewOp::Bytes { pixels } => vec![u(pixels)],
        }
    }

    /// Runs the op over `items` on `dev` with `buffers` (in the table's order).
    pub fn run<B: Backend>(
        &self,
        dev: &B,
        items: usize,
        mut buffers: Vec<OpArg<'_, B>>,
    ) -> Result<()> {
        buffers.extend(self.scalars().into_iter().map(OpArg::Scalar));
        dev.run_op(self, items, &mut buffers)
    }
}

/// Words of the packed RGB8 picture of `pixels` pixels.
pub fn byte_words(pixels: usize) -> usize {
    (pixels * 3).div_ceil(4)
}

/// A colour as the ops hold it.
#[inline]
pub fn pack(c: [u8; 3]) -> u32 {
    c[0] as u32 | (c[1] as u32) << 8 | (c[2] as u32) << 16
}

/// A colour of the ops as RGB8.
#[inline]
pub fn unpack(c: u32) -> [u8; 3] {
    [c as u8, (c >> 8) as u8, (c >> 16) as u8]
}

#[inline]
fn unit_u8(v: f32) -> u8 {
    round_u8(v.clamp(0.0, 1.0) * 255.0)
}

/// The table cell and fractions of a code (as `table::Decoded::locate`).
#[inline]
fn locate(code: &[f32], grid: &[f32], cells: usize) -> ([usize; 3], [f32; 3]) {
    let (mut i, mut f) = ([0usize; 3], [0f32; 3]);
    for k in 0..3 {
        let u = ((code[k] - grid[k]) / grid[3 + k]).clamp(0.0, cells as f32);
        let cell = (u as usize).min(cells - 1);
        i[k] = cell;
        f[k] = u - cell as f32;
    }
    (i, f)
}

fn wrong_count(op: &'static str, got: usize, want: usize) -> DeviceError {
    DeviceError::shape(op, format!("{got} arguments, {want} expected"))
}

/// The argument and item counts of a call of an op that knows its own items.
pub(crate) fn check_counts(
    op: &'static str,
    args: usize,
    want_args: usize,
    items: usize,
    want_items: usize,
) -> Result<()> {
    if args != want_args {
        return Err(wrong_count(op, args, want_args));
    }
    if items != want_items {
        return Err(DeviceError::shape(
            op,
            format!("{items} items, {want_items} expected"),
        ));
    }
    Ok(())
}

impl DeviceOp for ViewOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }

    fn name(&self) -> &'static str {
        match self {
            ViewOp::Sh { .. } => "view_sh",
            ViewOp::Pixels { .. } => "view_pixels",
            ViewOp::Dots { .. } => "view_dots",
            ViewOp::Cells { .. } => "view_cells",
            ViewOp::Lookup { .. } => "view_lookup",
            ViewOp::Relevancy => "view_relevancy",
            ViewOp::Heat { .. } => "view_heat",
            ViewOp::Pca { .. } => "view_pca",
            ViewOp::Bytes { .. } => "view_bytes",
        }
    }

    fn kernel(&self) -> OpKernel {
        OpKernel {
            source: SOURCE,
            entry: self.name(),
            block: BLOCK,
            defines: vec![
                (
                    "VIEW_TEMPERATURE".into(),
                    format!("{:?}f", lsplat_query::relevancy::TEMPERATURE),
                ),
                ("VIEW_ALPHA_MIN".into(), format!("{ALPHA_MIN:?}f")),
                (
                    "VIEW_REDUCE".into(),
                    format!("{}u", crate::segment_ops::REDUCE),
                ),
            ],
        }
    }

    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        let buffers = match self {
            ViewOp::Sh { .. } => 5,
            ViewOp::Pixels { .. } | ViewOp::Dots { .. } | ViewOp::Lookup { .. } => 4,
            ViewOp::Pca { .. } => 4,
            ViewOp::Cells { .. } | ViewOp::Heat { .. } => 3,
            ViewOp::Relevancy | ViewOp::Bytes { .. } => 2,
        };
        let args = buffers + self.scalars().len();
        if lens.len() != args {
            return Err(wrong_count(n, lens.len(), args));
        }
        match *self {
            ViewOp::Sh { stride, k, deg, .. } => {
                at_least(n, "means", lens[0], items * 3)?;
                at_least(n, "dc", lens[1], items * 3)?;
                at_least(n, "rest", lens[2], items * 3 * k)?;
                at_least(n, "factors", lens[3], SH_FACTORS.len())?;
                at_least(n, "rows", lens[4], items * stride)?;
                at_least(n, "row width", stride, 4)?;
                if deg > MAX_DEGREE as usize {
                    return Err(DeviceError::shape(n, format!("SH degree {deg}")));
                }
            }
            ViewOp::Pixels {
                stride,
                base,
                keep,
                rows,
                pixels,
            } => {
                at_least(n, "rendered rows", lens[0], rows * stride)?;
                at_least(n, "source", lens[1], items)?;
                at_least(n, "pixels", pixels, base + items)?;
                at_least(n, "px", lens[2], pixels)?;
                at_least(n, "vals", lens[3], pixels * keep)?;
                if stride < 3 + keep.max(1) {
                    return Err(DeviceError::shape(
                        n,
                        format!("rows of {stride} values hold no colour and {keep} more"),
                    ));
                }
            }
            ViewOp::Dots {
                stride,
                base,
                k,
                t,
                rows,
                pixels,
            } => {
                at_least(n, "rendered rows", lens[0], rows * stride)?;
                at_least(n, "source", lens[1], items)?;
                at_least(n, "targets", lens[2], t * k)?;
                at_least(n, "pixels", pixels, base + items)?;
                at_least(n, "dots", lens[3], pixels * t)?;
                at_least(n, "row width", stride, 4 + k)?;
            }
            ViewOp::Cells { cells } => {
                at_least(n, "vals", lens[0], items * 4)?;
                at_least(n, "grid", lens[1], 6)?;
                at_least(n, "bits", lens[2], cells.pow(3).div_ceil(32))?;
                at_least(n, "cells", cells, 1)?;
            }
            ViewOp::Lookup { cells, t } => {
                at_least(n, "vals", lens[0], items * 4)?;
                at_least(n, "grid", lens[1], 6)?;
                at_least(n, "table", lens[2], (cells + 1).pow(3) * t)?;
                at_least(n, "out", lens[3], items * t)?;
                at_least(n, "cells", cells, 1)?;
                if t != 1 && t != 3 {
                    return Err(DeviceError::shape(n, format!("{t} values per vertex")));
                }
            }
            ViewOp::Relevancy => {
                at_least(n, "dots", lens[0], items * 5)?;
                at_least(n, "map", lens[1], items)?;
            }
            ViewOp::Heat { .. } => {
                at_least(n, "px", lens[0], items)?;
                at_least(n, "map", lens[1], items)?;
                at_least(n, "out", lens[2], items)?;
            }
            ViewOp::Pca { t, keep } => {
                at_least(n, "dot products per pixel", t, 3)?;
                at_least(n, "values kept per pixel", keep, 1)?;
                at_least(n, "dots", lens[0], items * t)?;
                at_least(n, "vals", lens[1], items * keep)?;
                at_least(n, "pca", lens[2], 9)?;
                at_least(n, "out", lens[3], items)?;
            }
            ViewOp::Bytes { pixels } => {
                at_least(n, "words", byte_words(pixels), items)?;
                at_least(n, "px", lens[0], pixels)?;
                at_least(n, "bytes", lens[1], items)?;
            }
        }
        Ok(())
    }

    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, _pool: &dyn HostPool) -> Result<()> {
        match *self {
            ViewOp::Sh {
                stride,
                k,
                deg,
                eye,
            } => {
                let (means, dc, rest) = (a.f32(0)?, a.f32(1)?, a.f32(2)?);
                let rows = a.f32_mut(4)?;
                for (g, row) in rows.chunks_exact_mut(stride).take(items).enumerate() {
                    let mean = [means[g * 3], means[g * 3 + 1], means[g * 3 + 2]];
                    let c = [dc[g * 3], dc[g * 3 + 1], dc[g * 3 + 2]];
                    let r = &rest[g * 3 * k..(g + 1) * 3 * k];
                    let rgb = eval(deg as u32, c, r, direction(mean, eye));
                    row[..3].copy_from_slice(&rgb);
                    row[3] = 1.0;
                }
            }
            ViewOp::Pixels {
                stride,
                base,
                keep,
                rows,
                ..
            } => {
                let (out, source) = (a.f32(0)?, a.u32(1)?);
                let (px, vals) = (a.u32_mut(2)?, a.f32_mut(3)?);
                for (q, &s) in source[..items].iter().enumerate() {
                    let p = base + q;
                    let v = &mut vals[p * keep..(p + 1) * keep];
                    if s as usize >= rows {
                        px[p] = 0;
                        v.fill(0.0);
                        continue;
                    }
                    let r = &out[s as usize * stride..(s as usize + 1) * stride];
                    px[p] = pack([unit_u8(r[0]), unit_u8(r[1]), unit_u8(r[2])]);
                    v.copy_from_slice(&r[3..3 + keep]);
                }
            }
            ViewOp::Dots {
                stride,
                base,
                k,
                t,
                rows,
                ..
            } => {
                let (out, source, targets) = (a.f32(0)?, a.u32(1)?, a.f32(2)?);
                let dots = a.f32_mut(3)?;
                for (q, &s) in source[..items].iter().enumerate() {
                    let o = &mut dots[(base + q) * t..(base + q + 1) * t];
                    o.fill(0.0);
                    if s as usize >= rows {
                        continue;
                    }
                    let y = &out[s as usize * stride + 4..s as usize * stride + 4 + k];
                    let n2: f32 = y.iter().map(|v| v * v).sum();
                    if n2 <= 0.0 {
                        continue;
                    }
                    let inv = 1.0 / n2.sqrt();
                    for (s, tau) in o.iter_mut().zip(targets.chunks_exact(k)) {
                        *s = crate::answers::dot(y, tau) * inv;
                    }
                }
            }
            ViewOp::Cells { cells } => {
                let (vals, grid, bits) = (a.f32(0)?, a.f32(1)?, a.u32_mut(2)?);
                for v in vals[..items * 4].chunks_exact(4) {
                    let (i, _) = locate(&v[1..4], grid, cells);
                    let cell = (i[0] * cells + i[1]) * cells + i[2];
                    bits[cell / 32] |= 1 << (cell % 32);
                }
            }
            ViewOp::Lookup { cells, t } => {
                let (vals, grid, table) = (a.f32(0)?, a.f32(1)?, a.f32(2)?);
                let out = a.f32_mut(3)?;
                let r = cells + 1;
                for (v, o) in vals[..items * 4]
                    .chunks_exact(4)
                    .zip(out.chunks_exact_mut(t))
                {
                    let (i, f) = locate(&v[1..4], grid, cells);
                    let base = (i[0] * r + i[1]) * r + i[2];
                    if t == 1 {
                        o[0] = crate::table::lookup(table, r, base, f);
                    } else {
                        o.copy_from_slice(&crate::table::blend::<3>(table, base, r, f));
                    }
                }
            }
            ViewOp::Relevancy => {
                let (dots, map) = (a.f32(0)?, a.f32_mut(1)?);
                for (d, m) in dots[..items * 5].chunks_exact(5).zip(map.iter_mut()) {
                    *m = relevancy(d[4], &d[..4]);
                }
            }
            ViewOp::Heat { .. } => {
                let (px, map, out) = (a.u32(0)?, a.f32(1)?, a.u32_mut(2)?);
                let top = a.scalar_f32(3)?;
                for ((c, r), o) in px[..items].iter().zip(map).zip(out.iter_mut()) {
                    let mut rgb = [0u8; 3];
                    lsplat_query::picture::heat_over_into(
                        std::slice::from_ref(r),
                        &unpack(*c),
                        top,
                        &mut rgb,
                    );
                    *o = pack(rgb);
                }
            }
            ViewOp::Pca { t, keep } => {
                let (dots, vals, pca) = (a.f32(0)?, a.f32(1)?, a.f32(2)?);
                let out = a.u32_mut(3)?;
                for (p, o) in out[..items].iter_mut().enumerate() {
                    *o = pack(pca_rgb(&dots[p * t..p * t + 3], vals[p * keep], pca));
                }
            }
            ViewOp::Bytes { pixels } => {
                let (px, bytes) = (a.u32(0)?, a.u32_mut(1)?);
                for (w, o) in bytes[..items].iter_mut().enumerate() {
                    let mut word = 0u32;
                    for j in 0..4 {
                        let b = w * 4 + j;
                        if b >= pixels * 3 {
                            break;
                        }
                        word |= (unpack(px[b / 3])[b % 3] as u32) << (8 * j);
                    }
                    *o = word;
                }
            }
        }
        Ok(())
    }
}

/// `Pca::rgb` from the packed parameters `[offset 3, lo 3, hi 3]`.
fn pca_rgb(proj: &[f32], alpha: f32, pca: &[f32]) -> [u8; 3] {
    if alpha <= ALPHA_MIN {
        return [0; 3];
    }
    let a = alpha.min(1.0);
    [0, 1, 2].map(|k| {
        let v = (proj[k] - pca[k] - pca[3 + k]) / (pca[6 + k] - pca[3 + k]);
        round_u8(v.clamp(0.0, 1.0) * a * 255.0)
    })
}

/// The RGB8 bytes of a downloaded packed picture.
pub fn unpack_bytes(words: &[u32], pixels: usize) -> Vec<u8> {
    let mut out: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    out.truncate(pixels * 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_device::HostArg;

    #[test]
    fn packing_round_trips_and_bytes_follow_the_pixels() {
        let px: Vec<u32> = (0..5u32)
            .map(|i| pack([i as u8, 10 + i as u8, 200]))
            .collect();
        let words = byte_words(5);
        let mut bytes = vec![0u32; words];
        let mut args = HostArgs::new(
            "view_bytes",
            [
                HostArg::U32(&px),
                HostArg::U32Mut(&mut bytes),
                HostArg::Scalar(Scalar::U32(5)),
            ],
        );
        ViewOp::Bytes { pixels: 5 }
            .run_cpu(words, &mut args, &lsplat_device::op::SerialPool)
            .unwrap();
        let want: Vec<u8> = (0..5u8).flat_map(|i| [i, 10 + i, 200]).collect();
        assert_eq!(unpack_bytes(&bytes, 5), want);
        assert_eq!(unpack(pack([1, 2, 3])), [1, 2, 3]);
    }

    #[test]
    fn calls_of_the_wrong_size_are_refused() {
        let op = ViewOp::Lookup { cells: 4, t: 1 };
        assert!(op.check(10, &[40, 6, 125, 10, 0, 0]).is_ok());
        assert!(
            op.check(10, &[40, 6, 124, 10, 0, 0]).is_err(),
            "short table"
        );
        assert!(op.check(10, &[40, 6, 125, 9, 0, 0]).is_err(), "short out");
        assert!(
            ViewOp::Lookup { cells: 4, t: 2 }
                .check(10, &[40, 6, 250, 20, 0, 0])
                .is_err()
        );
        assert!(ViewOp::Heat { top: 1.0 }.check(3, &[3, 3, 3, 0]).is_ok());
        assert!(
            ViewOp::Heat { top: 1.0 }.check(3, &[3, 3, 3]).is_err(),
            "no top"
        );
    }
}
