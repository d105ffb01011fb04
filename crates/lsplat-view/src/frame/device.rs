//! The frame made where the rasterizer ran: each band's rendered rows stay on the
//! device, the viewer's ops ([`crate::ops`]) put colours and codes in frame order,
//! answer every pixel (a V1 level's code table interpolated on the device, its
//! missing vertices decoded on the host from a bit set of the cells the frame
//! touches; a linear level's dot products) and shade the picture, and only the RGB8
//! picture, or its JPEG made there too (`FrameRequest::jpeg`, [`crate::jpeg_ops`]),
//! and for a query the relevancy map, is read back. The pictures are the
//! host path's, bit for bit on simt (tested below).

use std::time::Instant;

use lsplat_device::{Backend, Element, OpArg};
use lsplat_query::picture::heat_top;

use super::{Frame, FrameRequest, Mode, Renderer, Timings, ms};
use crate::jpeg_ops::{JpegBuffers, encode_on};
use crate::ops::{ViewOp, byte_words, unpack_bytes};
use crate::scene::{Colours, Level, Semantic};
use crate::segment_ops::SegmentOp;
use crate::table::{DecodeStats, Reduce, TableState};
use crate::{Result, ViewError};
use lsplat_query::lerf;
use lsplat_render::colour::{MAX_DEGREE, SH_FACTORS};

/// The device path's buffers, kept between frames.
pub(super) struct Buffers<B: Backend> {
    /// Colours, one u32 per pixel.
    px: Option<B::Buf<u32>>,
    /// The shaded picture, one u32 per pixel.
    shaded: Option<B::Buf<u32>>,
    /// Values kept per pixel (opacity, code).
    vals: Option<B::Buf<f32>>,
    /// Dot products per pixel.
    dots: Option<B::Buf<f32>>,
    /// The relevancy map.
    map: Option<B::Buf<f32>>,
    /// The packed RGB8 picture.
    bytes: Option<B::Buf<u32>>,
    /// The touched cells' bits.
    bits: Option<B::Buf<u32>>,
    /// Small uploads: the grid, the targets, the PCA's parameters.
    grid: Option<B::Buf<f32>>,
    targets: Option<B::Buf<f32>>,
    pca: Option<B::Buf<f32>>,
    /// The code table on the device and the state of its values.
    table: Option<(B::Buf<f32>, TableState)>,
    /// The splats' means, SH DC, SH rest and the basis factors.
    sh: Option<[B::Buf<f32>; 4]>,
    /// The segmentation's box sums, blended map, range and integral image.
    hsum: Option<B::Buf<f64>>,
    blended: Option<B::Buf<f32>>,
    range: Option<B::Buf<f32>>,
    ii: Option<B::Buf<u32>>,
    /// The JPEG's tables, coefficients and intervals.
    jpeg: JpegBuffers<B>,
}

impl<B: Backend> Default for Buffers<B> {
    fn default() -> Self {
        Buffers {
            px: None,
            shaded: None,
            vals: None,
            dots: None,
            map: None,
            bytes: None,
            bits: None,
            grid: None,
            targets: None,
            pca: None,
            table: None,
            sh: None,
            hsum: None,
            blended: None,
            range: None,
            ii: None,
            jpeg: JpegBuffers::default(),
        }
    }
}

/// True when the device path makes this frame: every RGB frame, and the other modes
/// of levels with a text space answered without exact decoding.
pub(super) fn handles(level: &Level, req: &FrameRequest) -> bool {
    match (&level.semantic, req.mode) {
        (_, Mode::Rgb) => true,
        (Semantic::Linear(_), _) => true,
        (Semantic::Decoded(d), _) => !req.exact && d.code_dim() == 3,
        (Semantic::Plain(_), _) => false,
    }
}

/// `slot`'s buffer of exactly `len` elements (at least one), reallocated when the
/// length differs (for buffers read back whole).
pub(crate) fn sized<'a, B: Backend, T: Element>(
    dev: &B,
    slot: &'a mut Option<B::Buf<T>>,
    len: usize,
) -> Result<&'a mut B::Buf<T>> {
    resized(dev, slot, len, |have, want| have != want)
}

/// `slot`'s buffer of at least `len` elements, reallocated only to grow (for buffers
/// the device alone reads: a quick low-resolution frame between full ones reuses
/// them).
pub(crate) fn at_least<'a, B: Backend, T: Element>(
    dev: &B,
    slot: &'a mut Option<B::Buf<T>>,
    len: usize,
) -> Result<&'a mut B::Buf<T>> {
    resized(dev, slot, len, |have, want| have < want)
}

fn resized<'a, B: Backend, T: Element>(
    dev: &B,
    slot: &'a mut Option<B::Buf<T>>,
    len: usize,
    realloc: impl Fn(usize, usize) -> bool,
) -> Result<&'a mut B::Buf<T>> {
    let len = len.max(1);
    if slot.as_ref().is_none_or(|b| realloc(B::buf_len(b), len)) {
        *slot = None;
        *slot = Some(dev.alloc::<T>(len)?);
    }
    slot.as_mut()
        .ok_or_else(|| ViewError::Request("a device buffer went missing".into()))
}

/// `slot` holding `data`.
fn uploaded<'a, B: Backend>(
    dev: &B,
    slot: &'a mut Option<B::Buf<f32>>,
    data: &[f32],
) -> Result<&'a B::Buf<f32>> {
    let buf = sized(dev, slot, data.len())?;
    if !data.is_empty() {
        dev.upload_into(buf, data)?;
    }
    Ok(buf)
}

/// The cells whose bits are set.
fn set_bits(words: &[u32]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(i, &w)| {
        (0..32)
            .filter(move |b| w >> b & 1 == 1)
            .map(move |b| i * 32 + b)
    })
}

/// The RGB8 bytes of the picture `px` (one u32 per pixel).
fn read_picture<B: Backend>(
    dev: &B,
    px: &B::Buf<u32>,
    bytes: &mut Option<B::Buf<u32>>,
    pixels: usize,
) -> Result<Vec<u8>> {
    let words = byte_words(pixels);
    let out = sized(dev, bytes, words)?;
    ViewOp::Bytes { pixels }.run(dev, words, vec![OpArg::U32(px), OpArg::U32Mut(out)])?;
    Ok(unpack_bytes(&dev.download(out)?, pixels))
}

impl<B: Backend> Renderer<B> {
    /// With device frames and view-dependent SH colours, evaluates the colours seen
    /// from `eye` on the device into the first four values of the RGB rows and of
    /// every level's rows (only `level`'s with `Some`). False (nothing done) when the
    /// host evaluates them.
    pub(super) fn sh_on_device(&mut self, eye: [f32; 3], level: Option<u8>) -> Result<bool> {
        let scene = self.scene.clone();
        let Colours::Sh(sh) = &scene.colours else {
            return Ok(false);
        };
        if !self.device_frames || sh.view_independent() {
            return Ok(false);
        }
        let dev = &*self.dev;
        if self.dbufs.sh.is_none() {
            let means: Vec<f32> = scene.gaussians.means.iter().flatten().copied().collect();
            let dc: Vec<f32> = sh.dc.iter().flatten().copied().collect();
            self.dbufs.sh = Some([
                dev.upload(&means)?,
                dev.upload(&dc)?,
                dev.upload(&sh.rest)?,
                dev.upload(&SH_FACTORS)?,
            ]);
        }
        let Some([means, dc, rest, factors]) = &self.dbufs.sh else {
            return Ok(false);
        };
        let n = sh.len().min(scene.gaussians.len());
        let op = |stride| ViewOp::Sh {
            stride,
            k: sh.rest_per_channel(),
            deg: sh.degree.min(MAX_DEGREE) as usize,
            eye,
        };
        let run = |buf: &mut B::Buf<f32>, stride: usize| {
            let args = vec![
                OpArg::F32(means),
                OpArg::F32(dc),
                OpArg::F32(rest),
                OpArg::F32(factors),
                OpArg::F32Mut(buf),
            ];
            op(stride).run(dev, n, args)
        };
        if level.is_none() {
            run(&mut self.rgb_buf, 4)?;
        }
        for (l, (_, buf, stride)) in self.level_rows.iter_mut() {
            if level.is_none_or(|want| want == *l) {
                run(buf, *stride)?;
            }
        }
        Ok(true)
    }

    /// The frame of `req` at level `level` on the device (projection and binning
    /// done, band set `bi` of rows of `stride` values).
    pub(super) fn render_on_device(
        &mut self,
        req: &FrameRequest,
        level: &Level,
        bi: usize,
        stride: usize,
        targets: Option<(Vec<f32>, usize)>,
        tm: Timings,
    ) -> Result<Frame> {
        let mut b = std::mem::take(&mut self.dbufs);
        let frame = self.frame_with(&mut b, req, level, bi, stride, targets, tm);
        self.dbufs = b;
        frame
    }

    #[allow(clippy::too_many_arguments)]
    fn frame_with(
        &mut self,
        b: &mut Buffers<B>,
        req: &FrameRequest,
        level: &Level,
        bi: usize,
        stride: usize,
        targets: Option<(Vec<f32>, usize)>,
        mut tm: Timings,
    ) -> Result<Frame> {
        let dev = self.dev.clone();
        let dev = &*dev;
        let (w, h) = (req.camera.width as usize, req.camera.height as usize);
        let pixels = w * h;
        let nt = targets.as_ref().map_or(0, |t| t.1);
        let answers = req.mode != Mode::Rgb && nt > 0;
        let keep = match (&level.semantic, answers, req.mode) {
            (_, false, _) => 0,
            (Semantic::Decoded(_), true, _) => 4,
            (_, true, Mode::Features) => 1,
            _ => 0,
        };
        let linear = matches!(level.semantic, Semantic::Linear(_)) && answers;

        let t = Instant::now();
        let px = at_least(dev, &mut b.px, pixels)?;
        let vals = at_least(dev, &mut b.vals, pixels * keep)?;
        let dots = at_least(dev, &mut b.dots, pixels * nt)?;
        let tbuf = match (&targets, linear) {
            (Some((tv, _)), true) => uploaded(dev, &mut b.targets, tv)?,
            _ => uploaded(dev, &mut b.targets, &[0.0])?,
        };
        for band in 0..self.bands[bi].1.len() {
            if !self.rasterize_band(bi, band, level.level, stride)? {
                continue;
            }
            let (Some(out), bs) = (self.out.as_ref(), &self.bands[bi].1[band]) else {
                continue;
            };
            let (base, items, rows) = (bs.y0 as usize * w, bs.source.len(), bs.set.len);
            let op = ViewOp::Pixels {
                stride,
                base,
                keep,
                rows,
                pixels,
            };
            let args = vec![
                OpArg::F32(out),
                OpArg::U32(&bs.source_buf),
                OpArg::U32Mut(&mut *px),
                OpArg::F32Mut(&mut *vals),
            ];
            op.run(dev, items, args)?;
            if linear {
                let op = ViewOp::Dots {
                    stride,
                    base,
                    k: level.channels,
                    t: nt,
                    rows,
                    pixels,
                };
                let args = vec![
                    OpArg::F32(out),
                    OpArg::U32(&bs.source_buf),
                    OpArg::F32(tbuf),
                    OpArg::F32Mut(&mut *dots),
                ];
                op.run(dev, items, args)?;
            }
        }
        tm.rasterize = ms(t);

        let t = Instant::now();
        let mut decode = DecodeStats::default();
        let map = sized(dev, &mut b.map, pixels)?;
        match (&level.semantic, &targets) {
            (Semantic::Decoded(d), Some((tv, nt))) if answers => {
                let reduce = if req.mode.needs_query() {
                    Reduce::Relevancy
                } else {
                    Reduce::Dots
                };
                let (grid, cells) = d.grid();
                let gbuf = uploaded(dev, &mut b.grid, &grid)?;
                let bits = sized(dev, &mut b.bits, cells.pow(3).div_ceil(32))?;
                dev.fill(bits, 0)?;
                let args = vec![
                    OpArg::F32(&*vals),
                    OpArg::F32(gbuf),
                    OpArg::U32Mut(&mut *bits),
                ];
                ViewOp::Cells { cells }.run(dev, pixels, args)?;
                let words = dev.download(&*bits)?;
                let slot = &mut b.table;
                let (kept, vertices) = d.tabulate(
                    tv,
                    reduce,
                    set_bits(&words),
                    self.threads,
                    |values, state| match slot {
                        Some((buf, s)) if *s == state => Ok(()),
                        Some((buf, s)) if B::buf_len(buf) == values.len() => {
                            dev.upload_into(buf, values)?;
                            *s = state;
                            Ok::<(), ViewError>(())
                        }
                        _ => {
                            *slot = None;
                            *slot = Some((dev.upload(values)?, state));
                            Ok(())
                        }
                    },
                )?;
                kept?;
                decode.vertices = vertices;
                let Some((table, _)) = &b.table else {
                    return Err(ViewError::Request("the code table went missing".into()));
                };
                let width = reduce.width(*nt);
                let out = if width == 1 { &mut *map } else { &mut *dots };
                let args = vec![
                    OpArg::F32(&*vals),
                    OpArg::F32(gbuf),
                    OpArg::F32(table),
                    OpArg::F32Mut(out),
                ];
                ViewOp::Lookup { cells, t: width }.run(dev, pixels, args)?;
            }
            (Semantic::Linear(_), Some(_)) if answers && req.mode.needs_query() => {
                let args = vec![OpArg::F32(&*dots), OpArg::F32Mut(&mut *map)];
                ViewOp::Relevancy.run(dev, pixels, args)?;
            }
            _ => {}
        }
        let map_host = if req.mode.needs_query() {
            Some(dev.download(&*map)?)
        } else {
            None
        };
        tm.relevancy = if answers { ms(t) } else { 0.0 };

        let t = Instant::now();
        let shaded = at_least(dev, &mut b.shaded, pixels)?;
        let shown: Option<&B::Buf<u32>> = match (req.mode, &map_host) {
            (Mode::Relevancy, Some(m)) => {
                let args = vec![
                    OpArg::U32(&*px),
                    OpArg::F32(&*map),
                    OpArg::U32Mut(&mut *shaded),
                ];
                ViewOp::Heat { top: heat_top(m) }.run(dev, pixels, args)?;
                Some(shaded)
            }
            (Mode::Segmentation, Some(_)) => {
                let (k, r) = (lerf::BOX_SIZE, lerf::VOTE_RADIUS);
                let hsum = at_least(dev, &mut b.hsum, pixels)?;
                let blended = at_least(dev, &mut b.blended, pixels)?;
                let range = at_least(dev, &mut b.range, 2)?;
                let ii = at_least(dev, &mut b.ii, (w + 1) * (h + 1))?;
                let map = &*map;
                SegmentOp::BoxRows { w, h, k }
                    .run(dev, vec![OpArg::F32(map), OpArg::F64Mut(hsum)])?;
                let args = vec![OpArg::F32(map), OpArg::F64(hsum), OpArg::F32Mut(blended)];
                SegmentOp::BoxCols { w, h, k }.run(dev, args)?;
                let args = vec![OpArg::F32(blended), OpArg::F32Mut(range)];
                SegmentOp::MinMax { n: pixels }.run(dev, args)?;
                let args = vec![OpArg::F32(blended), OpArg::F32(range), OpArg::U32Mut(ii)];
                let thr = req.threshold;
                SegmentOp::VoteRows { w, h, thr }.run(dev, args)?;
                SegmentOp::VoteCols { w, h }.run(dev, vec![OpArg::U32Mut(ii)])?;
                let args = vec![
                    OpArg::U32(ii),
                    OpArg::U32(&*px),
                    OpArg::U32Mut(&mut *shaded),
                ];
                SegmentOp::Vote { w, h, r }.run(dev, args)?;
                Some(shaded)
            }
            (Mode::Features, _) => match (&level.pca, answers) {
                (Some(pca), true) => {
                    let mut params = pca.offset.to_vec();
                    params.extend_from_slice(&pca.lo);
                    params.extend_from_slice(&pca.hi);
                    let pbuf = uploaded(dev, &mut b.pca, &params)?;
                    let args = vec![
                        OpArg::F32(&*dots),
                        OpArg::F32(&*vals),
                        OpArg::F32(pbuf),
                        OpArg::U32Mut(&mut *shaded),
                    ];
                    ViewOp::Pca { t: nt, keep }.run(dev, pixels, args)?;
                    Some(shaded)
                }
                // A text space too narrow for three axes: black.
                _ => None,
            },
            _ => Some(px),
        };
        let (picture, jpeg) = match (shown, req.jpeg) {
            (Some(buf), Some(quality)) => {
                let te = Instant::now();
                let (fw, fh) = (req.camera.width, req.camera.height);
                let jpeg = encode_on(dev, buf, &mut b.jpeg, fw, fh, quality)?;
                tm.encode = ms(te);
                (Vec::new(), Some(jpeg))
            }
            (Some(buf), None) => (read_picture(dev, buf, &mut b.bytes, pixels)?, None),
            (None, _) => (vec![0u8; pixels * 3], None),
        };
        tm.shade = ms(t) - tm.encode;
        Ok(Frame {
            width: req.camera.width,
            height: req.camera.height,
            rgb: picture,
            jpeg,
            relevancy: map_host,
            timings: tm,
            decode,
        })
    }
}

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;
