//! A frame's JPEG made on the device (`kernels/jpeg.cu`), from the picture the
//! viewer's ops shaded there: only the compressed bytes come back (~0.1–0.3 MB for
//! 1280×720 instead of the 2.8 MB picture), and the host writes the header. Each op
//! runs [`crate::jpeg`]'s integer steps, so CPU, simt and a GPU write the same bytes
//! as [`crate::jpeg::encode`].
//!
//! | op | items | arguments |
//! |---|---|---|
//! | `Blocks` | blocks | px (one u32 colour per pixel), tables, coefs (w, 64 per block, i32 bits) |
//! | `Huffman` | restart intervals | coefs, tables, slots (w), lens (w) |
//! | `Pack` | words of the joined intervals | slots, lens, offsets, out (w) |

use lsplat_device::check::at_least;
use lsplat_device::{Backend, DeviceOp, HostArgs, HostPool, OpArg, OpKernel, Result, Scalar};

use crate::frame::device::{at_least as grown, sized};
use crate::jpeg::{self, Layout};
use crate::ops::{PLUGIN, check_counts, unpack};

const SOURCE: &str = include_str!("../kernels/jpeg.cu");
const BLOCK: u32 = 128;

/// One step of the device JPEG.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JpegOp {
    /// Every block's quantised coefficients.
    Blocks(Layout),
    /// Every restart interval's code into its slot.
    Huffman(Layout),
    /// The intervals joined with RST markers (`total` bytes).
    Pack {
        /// The frame's layout.
        layout: Layout,
        /// Bytes of the joined intervals.
        total: usize,
    },
}

impl JpegOp {
    /// Every op (for compiling their kernels).
    pub fn all() -> Vec<JpegOp> {
        let layout = Layout::new(16, 16, 80).expect("a valid size");
        vec![
            JpegOp::Blocks(layout),
            JpegOp::Huffman(layout),
            JpegOp::Pack { layout, total: 0 },
        ]
    }

    /// Work items of a call.
    pub fn items(&self) -> usize {
        match *self {
            JpegOp::Blocks(l) => l.blocks(),
            JpegOp::Huffman(l) => l.segments(),
            JpegOp::Pack { total, .. } => total.div_ceil(4),
        }
    }

    fn layout(&self) -> Layout {
        match *self {
            JpegOp::Blocks(l) | JpegOp::Huffman(l) | JpegOp::Pack { layout: l, .. } => l,
        }
    }

    fn scalars(&self) -> Vec<Scalar> {
        let u = |v: usize| Scalar::U32(v as u32);
        let l = self.layout();
        match *self {
            JpegOp::Blocks(_) => vec![u(l.width), u(l.height), u(l.sub), u(l.mcu_x)],
            JpegOp::Huffman(_) => vec![u(l.sub), u(l.mcus()), u(l.restart), u(l.slot_bytes() / 4)],
            JpegOp::Pack { total, .. } => vec![u(l.segments()), u(l.slot_bytes() / 4), u(total)],
        }
    }

    fn buffers(&self) -> usize {
        match self {
            JpegOp::Blocks(_) => 3,
            JpegOp::Huffman(_) | JpegOp::Pack { .. } => 4,
        }
    }

    /// Runs the op on `dev` with `buffers` (in the table's order).
    pub fn run<B: Backend>(&self, dev: &B, mut buffers: Vec<OpArg<'_, B>>) -> Result<()> {
        buffers.extend(self.scalars().into_iter().map(OpArg::Scalar));
        dev.run_op(self, self.items(), &mut buffers)
    }
}

impl DeviceOp for JpegOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }

    fn name(&self) -> &'static str {
        match self {
            JpegOp::Blocks(_) => "jpeg_blocks",
            JpegOp::Huffman(_) => "jpeg_huffman",
            JpegOp::Pack { .. } => "jpeg_pack",
        }
    }

    fn kernel(&self) -> OpKernel {
        let d = |k: &str, v: usize| (k.to_string(), format!("{v}u"));
        OpKernel {
            source: SOURCE,
            entry: self.name(),
            block: BLOCK,
            defines: vec![
                d("JPEG_QUANT_AT", jpeg::QUANT_AT),
                d("JPEG_ZIGZAG_AT", jpeg::ZIGZAG_AT),
                d("JPEG_DC_AT", jpeg::DC_AT),
                d("JPEG_AC_AT", jpeg::AC_AT),
                d("JPEG_DCT_BITS", jpeg::DCT_BITS as usize),
                d("JPEG_PASS_BITS", jpeg::PASS_BITS as usize),
                d("JPEG_AC_MAX", jpeg::AC_MAX as usize),
            ],
        }
    }

    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        let args = self.buffers() + self.scalars().len();
        check_counts(n, lens.len(), args, items, self.items())?;
        let l = self.layout();
        let slot_words = l.slot_bytes() / 4;
        match *self {
            JpegOp::Blocks(_) => {
                at_least(n, "px", lens[0], l.width * l.height)?;
                at_least(n, "tables", lens[1], jpeg::TABLES_LEN)?;
                at_least(n, "coefs", lens[2], l.blocks() * 64)?;
            }
            JpegOp::Huffman(_) => {
                at_least(n, "coefs", lens[0], l.blocks() * 64)?;
                at_least(n, "tables", lens[1], jpeg::TABLES_LEN)?;
                at_least(n, "slots", lens[2], l.segments() * slot_words)?;
                at_least(n, "lens", lens[3], l.segments())?;
            }
            JpegOp::Pack { total, .. } => {
                at_least(n, "slots", lens[0], l.segments() * slot_words)?;
                at_least(n, "lens", lens[1], l.segments())?;
                at_least(n, "offsets", lens[2], l.segments() + 1)?;
                at_least(n, "out", lens[3], total.div_ceil(4))?;
            }
        }
        Ok(())
    }

    fn run_cpu(&self, _items: usize, a: &mut HostArgs<'_>, _pool: &dyn HostPool) -> Result<()> {
        let l = self.layout();
        let slot_words = l.slot_bytes() / 4;
        match *self {
            JpegOp::Blocks(_) => {
                let (px, tables, coefs) = (a.u32(0)?, a.u32(1)?, a.u32_mut(2)?);
                let pixel = |x: usize, y: usize| unpack(px[y * l.width + x]);
                let mut c = [0i32; 64];
                for (i, out) in coefs.chunks_exact_mut(64).take(l.blocks()).enumerate() {
                    jpeg::block(&l, tables, i, pixel, &mut c);
                    for (o, v) in out.iter_mut().zip(c) {
                        *o = v as u32;
                    }
                }
            }
            JpegOp::Huffman(_) => {
                let (coefs, tables) = (a.u32(0)?, a.u32(1)?);
                let (slots, lens) = (a.u32_mut(2)?, a.u32_mut(3)?);
                let coefs: Vec<i32> = coefs[..l.blocks() * 64].iter().map(|&v| v as i32).collect();
                let mut bytes = vec![0u8; l.slot_bytes()];
                for (s, slot) in slots
                    .chunks_exact_mut(slot_words)
                    .take(l.segments())
                    .enumerate()
                {
                    let len = jpeg::segment(&l, tables, &coefs, s, &mut bytes);
                    lens[s] = len as u32;
                    for (w, b) in slot
                        .iter_mut()
                        .zip(bytes[..len.next_multiple_of(4)].chunks_exact(4))
                    {
                        *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                }
            }
            JpegOp::Pack { total, .. } => {
                let (slots, lens, offsets) = (a.u32(0)?, a.u32(1)?, a.u32(2)?);
                let out = a.u32_mut(3)?;
                let byte = |p: usize| pack_byte(slots, lens, offsets, slot_words, p);
                for (j, w) in out[..total.div_ceil(4)].iter_mut().enumerate() {
                    *w = (0..4)
                        .filter(|b| 4 * j + b < total)
                        .fold(0, |acc, b| acc | (byte(4 * j + b) as u32) << (8 * b));
                }
            }
        }
        Ok(())
    }
}

/// Byte `p` of the joined intervals: interval bytes, or an RST marker after one.
fn pack_byte(slots: &[u32], lens: &[u32], offsets: &[u32], slot_words: usize, p: usize) -> u8 {
    let s = offsets.partition_point(|&o| o as usize <= p) - 1;
    let local = p - offsets[s] as usize;
    if local < lens[s] as usize {
        (slots[s * slot_words + local / 4] >> (8 * (local % 4))) as u8
    } else if local == lens[s] as usize {
        0xff
    } else {
        0xd0 + (s % 8) as u8
    }
}

/// Encodes the picture `px` (one u32 colour per pixel) on the device: the JPEG's
/// bytes, equal to [`jpeg::encode`]'s of the same pixels.
pub fn encode_on<B: Backend>(
    dev: &B,
    px: &B::Buf<u32>,
    bufs: &mut JpegBuffers<B>,
    width: u32,
    height: u32,
    quality: u8,
) -> crate::Result<Vec<u8>> {
    let l = Layout::new(width, height, quality)?;
    if bufs.quality != Some(quality) || bufs.tables.is_none() {
        bufs.tables = Some(dev.upload(&jpeg::tables(quality))?);
        bufs.quality = Some(quality);
    }
    let tables = bufs.tables.as_ref().expect("uploaded above");
    let coefs = grown(dev, &mut bufs.coefs, l.blocks() * 64)?;
    JpegOp::Blocks(l).run(
        dev,
        vec![OpArg::U32(px), OpArg::U32(tables), OpArg::U32Mut(coefs)],
    )?;
    let n = l.segments();
    let slots = grown(dev, &mut bufs.slots, n * l.slot_bytes() / 4)?;
    let lens = sized(dev, &mut bufs.lens, n)?;
    JpegOp::Huffman(l).run(
        dev,
        vec![
            OpArg::U32(coefs),
            OpArg::U32(tables),
            OpArg::U32Mut(slots),
            OpArg::U32Mut(lens),
        ],
    )?;
    let offsets = jpeg::offsets(&dev.download(&*lens)?);
    let total = offsets[n] as usize;
    let obuf = sized(dev, &mut bufs.offsets, n + 1)?;
    dev.upload_into(obuf, &offsets)?;
    // Sized in steps of 64 KB, so that most frames reuse the buffer.
    let out = sized(
        dev,
        &mut bufs.out,
        total.div_ceil(4).next_multiple_of(1 << 14),
    )?;
    JpegOp::Pack { layout: l, total }.run(
        dev,
        vec![
            OpArg::U32(slots),
            OpArg::U32(lens),
            OpArg::U32(obuf),
            OpArg::U32Mut(out),
        ],
    )?;
    let words = dev.download(out)?;
    let data: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take(total)
        .collect();
    Ok(jpeg::file(&l, quality, &data))
}

/// The device JPEG's buffers, kept between frames.
pub struct JpegBuffers<B: Backend> {
    quality: Option<u8>,
    tables: Option<B::Buf<u32>>,
    coefs: Option<B::Buf<u32>>,
    slots: Option<B::Buf<u32>>,
    lens: Option<B::Buf<u32>>,
    offsets: Option<B::Buf<u32>>,
    out: Option<B::Buf<u32>>,
}

impl<B: Backend> Default for JpegBuffers<B> {
    fn default() -> Self {
        JpegBuffers {
            quality: None,
            tables: None,
            coefs: None,
            slots: None,
            lens: None,
            offsets: None,
            out: None,
        }
    }
}
