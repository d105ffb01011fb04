//! Baseline JPEG written in independent pieces, so that a GPU can make a frame's
//! JPEG where the picture is (`kernels/jpeg.cu`, [`crate::jpeg_ops`]) and the host
//! can spread one over its threads:
//!
//! 1. every 8×8 block on its own: colour conversion (JFIF's YCbCr in 16-bit fixed
//!    point), 2×2 chroma averaging (4:2:0 below quality 90, 4:4:4 from 90), an
//!    integer DCT, quantisation (Annex K's tables at IJG's quality scaling) and the
//!    zigzag order;
//! 2. every restart interval on its own: Huffman coding with Annex K's typical tables
//!    (the DC predictions restart with each interval, which is what makes the
//!    intervals independent), byte stuffing, padding with 1 bits;
//! 3. the intervals joined with RST markers behind the header.
//!
//! Every step is integer arithmetic, so the CPU, simt and a GPU write the same bytes.

use crate::{Result, ViewError};

/// Quality from which chroma is kept at full resolution (4:4:4).
pub const FULL_CHROMA_QUALITY: u8 = 90;
/// Fixed-point bits of the DCT matrix.
pub(crate) const DCT_BITS: u32 = 13;
/// Fractional bits kept between the DCT's row and column passes.
pub(crate) const PASS_BITS: u32 = 5;
/// Largest quantised AC magnitude baseline JPEG codes (category 10).
pub(crate) const AC_MAX: i32 = 1023;
/// Most bytes one block's code takes: DC ≤ 11 + 11 bits, 63 AC ≤ 16 + 10 bits each,
/// doubled for byte stuffing.
pub const MAX_BLOCK_BYTES: usize = 2 * (22usize + 63 * 26).div_ceil(8);
/// Intervals a frame is cut into, at most (each is one GPU thread's work).
const TARGET_SEGMENTS: usize = 1024;
/// Fewest MCUs per interval (an RST marker and the padding cost ~2.5 bytes).
const MIN_RESTART: usize = 8;

/// Entries of the tables buffer: the DCT matrix, two quantisation tables (natural
/// order), the zigzag order, the codes (`code | length << 16`) of the DC luma, DC
/// chroma, AC luma and AC chroma symbols, and the quantisers' reciprocals (the host's
/// division; the kernel divides).
pub const TABLES_LEN: usize = RECIP_AT + 128;
/// Where the quantisation tables start in that buffer.
pub const QUANT_AT: usize = 64;
/// Where the zigzag order starts.
pub const ZIGZAG_AT: usize = QUANT_AT + 128;
/// Where the DC codes start.
pub const DC_AT: usize = ZIGZAG_AT + 64;
/// Where the AC codes start.
pub const AC_AT: usize = DC_AT + 32;
/// Where the reciprocals of the quantisation tables start ([`RECIP`]).
pub const RECIP_AT: usize = AC_AT + 512;

const LUMA_Q: [u8; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
    92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const CHROMA_Q: [u8; 64] = {
    let mut t = [99u8; 64];
    let head: [[u8; 4]; 4] = [
        [17, 18, 24, 47],
        [18, 21, 26, 66],
        [24, 26, 56, 99],
        [47, 66, 99, 99],
    ];
    let mut r = 0;
    while r < 4 {
        let mut c = 0;
        while c < 4 {
            t[r * 8 + c] = head[r][c];
            c += 1;
        }
        r += 1;
    }
    t
};

/// Annex K.3's typical Huffman tables: code counts per length 1–16, then symbols.
const DC_LUMA_BITS: [u8; 16] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const DC_CHROMA_BITS: [u8; 16] = [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0];
const DC_VALS: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
const AC_LUMA_BITS: [u8; 16] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d];
const AC_LUMA_VALS: [u8; 162] = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];
const AC_CHROMA_BITS: [u8; 16] = [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77];
const AC_CHROMA_VALS: [u8; 162] = [
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
    0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
    0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
    0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
    0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
    0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
    0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
    0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];

/// The zigzag order: the natural (row-major) index of each coded coefficient.
pub const ZIGZAG: [u8; 64] = {
    let mut z = [0u8; 64];
    let (mut k, mut s) = (0, 0);
    while s < 15 {
        // Anti-diagonal s, walked up-right when s is even, down-left when odd.
        let mut i = 0;
        while i <= s {
            let (r, c) = if s % 2 == 0 { (s - i, i) } else { (i, s - i) };
            if r < 8 && c < 8 {
                z[k] = (r * 8 + c) as u8;
                k += 1;
            }
            i += 1;
        }
        s += 1;
    }
    z
};

/// How a frame is cut into blocks, MCUs and restart intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Luma blocks per MCU side: 2 (4:2:0) or 1 (4:4:4).
    pub sub: usize,
    /// MCUs per row.
    pub mcu_x: usize,
    /// MCU rows.
    pub mcu_y: usize,
    /// MCUs per restart interval.
    pub restart: usize,
}

impl Layout {
    /// The layout of a `width`×`height` frame at `quality`.
    pub fn new(width: u32, height: u32, quality: u8) -> Result<Layout> {
        if width == 0 || height == 0 || width > 65535 || height > 65535 {
            return Err(ViewError::Encode(format!(
                "a {width}x{height} frame: JPEG needs 1 to 65535 pixels a side"
            )));
        }
        let sub = if quality >= FULL_CHROMA_QUALITY { 1 } else { 2 };
        let (mcu_x, mcu_y) = (
            (width as usize).div_ceil(8 * sub),
            (height as usize).div_ceil(8 * sub),
        );
        let restart = (mcu_x * mcu_y)
            .div_ceil(TARGET_SEGMENTS)
            .clamp(MIN_RESTART, 65535);
        Ok(Layout {
            width: width as usize,
            height: height as usize,
            sub,
            mcu_x,
            mcu_y,
            restart,
        })
    }

    /// Blocks per MCU (luma, then Cb, then Cr).
    pub fn blocks_per_mcu(&self) -> usize {
        self.sub * self.sub + 2
    }

    /// MCUs in the frame.
    pub fn mcus(&self) -> usize {
        self.mcu_x * self.mcu_y
    }

    /// Blocks in the frame.
    pub fn blocks(&self) -> usize {
        self.mcus() * self.blocks_per_mcu()
    }

    /// Restart intervals.
    pub fn segments(&self) -> usize {
        self.mcus().div_ceil(self.restart)
    }

    /// Bytes reserved for one interval's code (its worst case), a multiple of 4.
    pub fn slot_bytes(&self) -> usize {
        (self.restart * self.blocks_per_mcu() * MAX_BLOCK_BYTES + 1).next_multiple_of(4)
    }
}

/// The quantisation table of a component at `quality` (1–100), natural order.
pub fn quant_table(chroma: bool, quality: u8) -> [u8; 64] {
    let q = quality.clamp(1, 100) as u32;
    let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
    let base = if chroma { &CHROMA_Q } else { &LUMA_Q };
    base.map(|t| ((t as u32 * scale + 50) / 100).clamp(1, 255) as u8)
}

/// The DCT matrix `M[u][x] = round(2^13 · c(u)/2 · cos((2x+1)uπ/16))`.
pub fn dct_matrix() -> [i32; 64] {
    let mut m = [0i32; 64];
    for u in 0..8 {
        let c = if u == 0 { 0.5f64.sqrt() } else { 1.0 };
        for x in 0..8 {
            let v = 0.5 * c * (((2 * x + 1) * u) as f64 * std::f64::consts::PI / 16.0).cos();
            m[u * 8 + x] = (v * (1u32 << DCT_BITS) as f64).round() as i32;
        }
    }
    m
}

/// The canonical codes of a table (Annex C): `code | length << 16` per symbol.
fn codes(bits: &[u8; 16], vals: &[u8], out: &mut [u32]) {
    let mut code = 0u32;
    let mut k = 0;
    for (len, &n) in bits.iter().enumerate() {
        for _ in 0..n {
            out[vals[k] as usize] = code | ((len as u32 + 1) << 16);
            code += 1;
            k += 1;
        }
        code <<= 1;
    }
}

/// The tables buffer ([`TABLES_LEN`] words) the block and interval steps read.
pub fn tables(quality: u8) -> Vec<u32> {
    let mut t = vec![0u32; TABLES_LEN];
    for (o, m) in t.iter_mut().zip(dct_matrix()) {
        *o = m as u32;
    }
    for (c, chroma) in [false, true].into_iter().enumerate() {
        let q = quant_table(chroma, quality);
        for (o, v) in t[QUANT_AT + 64 * c..][..64].iter_mut().zip(q) {
            *o = v as u32;
        }
        for (o, v) in t[RECIP_AT + 64 * c..][..64].iter_mut().zip(q) {
            *o = RECIP[v as usize];
        }
    }
    for (o, &z) in t[ZIGZAG_AT..DC_AT].iter_mut().zip(&ZIGZAG) {
        *o = z as u32;
    }
    codes(&DC_LUMA_BITS, &DC_VALS, &mut t[DC_AT..DC_AT + 16]);
    codes(&DC_CHROMA_BITS, &DC_VALS, &mut t[DC_AT + 16..DC_AT + 32]);
    codes(&AC_LUMA_BITS, &AC_LUMA_VALS, &mut t[AC_AT..AC_AT + 256]);
    codes(
        &AC_CHROMA_BITS,
        &AC_CHROMA_VALS,
        &mut t[AC_AT + 256..AC_AT + 512],
    );
    t
}

/// JFIF's Y (k = 0), Cb (1) or Cr (2) of a pixel in 16-bit fixed point.
#[inline]
pub fn component(c: [u8; 3], k: usize) -> i32 {
    let (r, g, b) = (c[0] as i32, c[1] as i32, c[2] as i32);
    match k {
        0 => (19595 * r + 38470 * g + 7471 * b + 32768) >> 16,
        1 => (-11059 * r - 21709 * g + 32768 * b + (128 << 16) + 32767) >> 16,
        _ => (32768 * r - 27439 * g - 5329 * b + (128 << 16) + 32767) >> 16,
    }
}

/// `ceil(2^20 / q)`: `t / q` is `(t · RECIP[q]) >> 20` exactly for every `t < 2^12`
/// and `q ≤ 255` (the error, under `t / 2^20 < 2^-8`, stays below the `1/q` to the
/// next integer, and the product fits in 32 bits), so the host quantises eight
/// coefficients at a time without dividing.
const RECIP: [u32; 256] = {
    let mut r = [0u32; 256];
    let mut q = 1;
    while q < 256 {
        r[q] = (1u32 << 20).div_ceil(q as u32);
        q += 1;
    }
    r
};

/// The quantised coefficients of block `index` (zigzag order) of a frame whose
/// pixel (x, y) is `pixel(x, y)`.
pub fn block(
    layout: &Layout,
    tables: &[u32],
    index: usize,
    pixel: impl Fn(usize, usize) -> [u8; 3],
    out: &mut [i32; 64],
) {
    let bpm = layout.blocks_per_mcu();
    let (mcu, b) = (index / bpm, index % bpm);
    let (mx, my) = (mcu % layout.mcu_x, mcu / layout.mcu_x);
    let s = layout.sub;
    let at = |x: usize, y: usize| pixel(x.min(layout.width - 1), y.min(layout.height - 1));
    let luma = b < s * s;
    let mut f = [[0i32; 8]; 8];
    for (r, row) in f.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = if luma {
                let x = mx * 8 * s + (b % s) * 8 + c;
                let y = my * 8 * s + (b / s) * 8 + r;
                component(at(x, y), 0)
            } else {
                let k = b - s * s + 1;
                let (x, y) = ((mx * 8 + c) * s, (my * 8 + r) * s);
                let mut sum = 0;
                for dy in 0..s {
                    for dx in 0..s {
                        sum += component(at(x + dx, y + dy), k);
                    }
                }
                if s == 2 { (sum + 2) >> 2 } else { sum }
            } - 128;
        }
    }
    dct_quantise(&f, tables, luma, out);
}

/// The DCT of level-shifted samples, quantised, in zigzag order. The sums are exact
/// integers, so any order of the products gives the kernel's values: these loops run
/// 8 lanes at a time (AVX2 where the CPU has it).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn dct_quantise(f: &[[i32; 8]; 8], tables: &[u32], luma: bool, out: &mut [i32; 64]) {
    let m: [[i32; 8]; 8] =
        std::array::from_fn(|u| std::array::from_fn(|x| tables[u * 8 + x] as i32));
    let mt: [[i32; 8]; 8] = std::array::from_fn(|x| std::array::from_fn(|u| m[u][x]));
    let mut rows = [[0i32; 8]; 8];
    for (fr, out) in f.iter().zip(rows.iter_mut()) {
        let mut acc = [0i32; 8];
        for (&v, mrow) in fr.iter().zip(&mt) {
            for (a, &w) in acc.iter_mut().zip(mrow) {
                *a += v * w;
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = (a + (1 << (DCT_BITS - PASS_BITS - 1))) >> (DCT_BITS - PASS_BITS);
        }
    }
    let mut full = [[0i32; 8]; 8];
    for (mv, out) in m.iter().zip(full.iter_mut()) {
        for (&w, row) in mv.iter().zip(&rows) {
            for (a, &r) in out.iter_mut().zip(row) {
                *a += r * w;
            }
        }
    }
    let at = if luma { 0 } else { 64 };
    let (q, recip) = (
        &tables[QUANT_AT + at..][..64],
        &tables[RECIP_AT + at..][..64],
    );
    const HALF: u32 = DCT_BITS + PASS_BITS - 1;
    // (|acc| + d/2) / d for d = q · 2^(HALF+1), as ⌊⌊n / 2^(HALF+1)⌋ / q⌋, in
    // natural order; then the zigzag.
    let mut natural = [0i32; 64];
    for (((o, a), qv), rv) in natural
        .chunks_exact_mut(8)
        .zip(&full)
        .zip(q.chunks_exact(8))
        .zip(recip.chunks_exact(8))
    {
        for (((o, &acc), &qz), &r) in o.iter_mut().zip(a).zip(qv).zip(rv) {
            let t = (acc.unsigned_abs() + (qz << HALF)) >> (HALF + 1);
            let mag = ((t * r) >> 20) as i32;
            let mag = mag.min(AC_MAX);
            *o = if acc < 0 { -mag } else { mag };
        }
    }
    // The DC coefficient is not clamped (its differences are coded up to 2047).
    let (acc, qz) = (full[0][0], q[0]);
    let t = (acc.unsigned_abs() + (qz << HALF)) >> (HALF + 1);
    let dc = ((t * recip[0]) >> 20) as i32;
    natural[0] = if acc < 0 { -dc } else { dc };
    for (o, &z) in out.iter_mut().zip(&ZIGZAG) {
        *o = natural[z as usize];
    }
}

/// A bit writer into a byte slot, with JPEG's byte stuffing (bits are gathered 32 at
/// a time; the bytes are the kernel's, which writes them one by one).
struct Bits<'a> {
    out: &'a mut [u8],
    len: usize,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    #[inline]
    fn byte(&mut self, byte: u8) {
        self.out[self.len] = byte;
        self.len += 1;
        if byte == 0xff {
            self.out[self.len] = 0;
            self.len += 1;
        }
    }

    #[inline]
    fn put(&mut self, code: u32, len: u32) {
        self.acc = (self.acc << len) | u64::from(code & ((1u32 << len) - 1));
        self.n += len;
        if self.n >= 32 {
            self.n -= 32;
            let word = ((self.acc >> self.n) as u32).to_be_bytes();
            if word.contains(&0xff) {
                for b in word {
                    self.byte(b);
                }
            } else {
                self.out[self.len..self.len + 4].copy_from_slice(&word);
                self.len += 4;
            }
        }
    }

    #[inline]
    fn code(&mut self, c: u32) {
        self.put(c & 0xffff, c >> 16);
    }

    fn finish(mut self) -> usize {
        while self.n >= 8 {
            self.n -= 8;
            self.byte((self.acc >> self.n) as u8);
        }
        if self.n > 0 {
            let pad = 8 - self.n;
            self.byte(((self.acc << pad) as u8) | ((1u8 << pad) - 1));
            self.n = 0;
        }
        self.len
    }
}

/// Bits of `|v|` (JPEG's size category).
#[inline]
fn category(v: i32) -> u32 {
    32 - v.unsigned_abs().leading_zeros()
}

/// Huffman-codes restart interval `segment` of the coefficients `coefs` (all blocks,
/// zigzag order) into `out` (at least [`Layout::slot_bytes`]); returns its length.
pub fn segment(
    layout: &Layout,
    tables: &[u32],
    coefs: &[i32],
    segment: usize,
    out: &mut [u8],
) -> usize {
    let bpm = layout.blocks_per_mcu();
    let first = segment * layout.restart;
    let last = (first + layout.restart).min(layout.mcus());
    let mut bits = Bits {
        out,
        len: 0,
        acc: 0,
        n: 0,
    };
    let mut pred = [0i32; 3];
    for mcu in first..last {
        for b in 0..bpm {
            let comp = b.saturating_sub(layout.sub * layout.sub - 1);
            let t = usize::from(comp > 0);
            let c = &coefs[(mcu * bpm + b) * 64..][..64];
            let diff = c[0] - pred[comp];
            pred[comp] = c[0];
            let cat = category(diff);
            bits.code(tables[DC_AT + 16 * t + cat as usize]);
            if cat > 0 {
                bits.put((if diff < 0 { diff - 1 } else { diff }) as u32, cat);
            }
            let ac = &tables[AC_AT + 256 * t..][..256];
            let mut run = 0;
            for &v in &c[1..] {
                if v == 0 {
                    run += 1;
                    continue;
                }
                while run > 15 {
                    bits.code(ac[0xf0]);
                    run -= 16;
                }
                let cat = category(v);
                bits.code(ac[(run << 4 | cat) as usize]);
                bits.put((if v < 0 { v - 1 } else { v }) as u32, cat);
                run = 0;
            }
            if run > 0 {
                bits.code(ac[0]);
            }
        }
    }
    bits.finish()
}

/// The interval offsets of joined code: interval `i` starts at `offsets[i]`, an RST
/// marker follows every interval but the last, and `offsets[n]` is the total.
pub fn offsets(lens: &[u32]) -> Vec<u32> {
    let mut o = Vec::with_capacity(lens.len() + 1);
    let mut at = 0u32;
    for (i, &l) in lens.iter().enumerate() {
        o.push(at);
        at += l + if i + 1 < lens.len() { 2 } else { 0 };
    }
    o.push(at);
    o
}

/// One MCU row's Y, Cb and Cr, edges repeated to whole MCUs (the host's way to the
/// same samples [`block`] reads one pixel at a time).
#[derive(Default)]
struct Planes {
    width: usize,
    planes: [Vec<i32>; 3],
}

impl Planes {
    /// Converts MCU row `my` of `rgb`.
    fn fill(&mut self, layout: &Layout, rgb: &[u8], my: usize) {
        let s = layout.sub;
        let (w, rows) = (layout.mcu_x * 8 * s, 8 * s);
        self.width = w;
        for p in &mut self.planes {
            p.resize(w * rows, 0);
        }
        let [py, pb, pr] = &mut self.planes;
        for r in 0..rows {
            let y = (my * rows + r).min(layout.height - 1);
            let src = &rgb[y * layout.width * 3..(y + 1) * layout.width * 3];
            let (oy, ob, or) = (
                &mut py[r * w..(r + 1) * w],
                &mut pb[r * w..(r + 1) * w],
                &mut pr[r * w..(r + 1) * w],
            );
            for (x, px) in src.chunks_exact(3).enumerate() {
                let c = [px[0], px[1], px[2]];
                (oy[x], ob[x], or[x]) = (component(c, 0), component(c, 1), component(c, 2));
            }
            for x in layout.width..w {
                (oy[x], ob[x], or[x]) = (oy[x - 1], ob[x - 1], or[x - 1]);
            }
        }
    }

    /// The row's blocks, MCU by MCU, into `out`.
    fn coefs(&self, layout: &Layout, tables: &[u32], out: &mut [i32]) {
        let (s, w) = (layout.sub, self.width);
        let mut blocks = out.chunks_exact_mut(64);
        for mx in 0..layout.mcu_x {
            for b in 0..layout.blocks_per_mcu() {
                let luma = b < s * s;
                let mut f = [[0i32; 8]; 8];
                for (r, row) in f.iter_mut().enumerate() {
                    for (c, v) in row.iter_mut().enumerate() {
                        *v = if luma {
                            self.planes[0][((b / s) * 8 + r) * w + mx * 8 * s + (b % s) * 8 + c]
                        } else {
                            let plane = &self.planes[b - s * s + 1];
                            let (x, y) = ((mx * 8 + c) * s, r * s);
                            if s == 2 {
                                let at = |dx: usize, dy: usize| plane[(y + dy) * w + x + dx];
                                (at(0, 0) + at(1, 0) + at(0, 1) + at(1, 1) + 2) >> 2
                            } else {
                                plane[y * w + x]
                            }
                        } - 128;
                    }
                }
                let o: &mut [i32; 64] = blocks
                    .next()
                    .and_then(|o| o.try_into().ok())
                    .expect("a block per MCU and component");
                dct_quantise(&f, tables, luma, o);
            }
        }
    }
}

/// The file's bytes before the entropy-coded data: SOI, JFIF, the quantisation and
/// Huffman tables, the frame, the restart interval and the scan header.
pub fn header(layout: &Layout, quality: u8) -> Vec<u8> {
    let mut h = vec![0xff, 0xd8];
    let mut seg = |marker: u8, body: &[u8]| {
        h.extend([0xff, marker]);
        h.extend(((body.len() + 2) as u16).to_be_bytes());
        h.extend(body);
    };
    seg(0xe0, b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
    let mut dqt = Vec::with_capacity(130);
    for (c, chroma) in [false, true].into_iter().enumerate() {
        let q = quant_table(chroma, quality);
        dqt.push(c as u8);
        dqt.extend(ZIGZAG.iter().map(|&z| q[z as usize]));
    }
    seg(0xdb, &dqt);
    let (w, h16) = (
        (layout.width as u16).to_be_bytes(),
        (layout.height as u16).to_be_bytes(),
    );
    let s = (layout.sub as u8) << 4 | layout.sub as u8;
    seg(
        0xc0,
        &[
            8, h16[0], h16[1], w[0], w[1], 3, 1, s, 0, 2, 0x11, 1, 3, 0x11, 1,
        ],
    );
    let mut dht = Vec::new();
    for (class_id, bits, vals) in [
        (0x00u8, &DC_LUMA_BITS, &DC_VALS[..]),
        (0x10, &AC_LUMA_BITS, &AC_LUMA_VALS[..]),
        (0x01, &DC_CHROMA_BITS, &DC_VALS[..]),
        (0x11, &AC_CHROMA_BITS, &AC_CHROMA_VALS[..]),
    ] {
        dht.push(class_id);
        dht.extend(bits);
        dht.extend(vals);
    }
    seg(0xc4, &dht);
    seg(0xdd, &(layout.restart as u16).to_be_bytes());
    seg(0xda, &[3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]);
    h
}

/// A whole JPEG from the joined intervals (`data`, RST markers included).
pub fn file(layout: &Layout, quality: u8, data: &[u8]) -> Vec<u8> {
    let mut f = header(layout, quality);
    f.reserve(data.len() + 2);
    f.extend_from_slice(data);
    f.extend([0xff, 0xd9]);
    f
}

/// Encodes an RGB8 frame on `threads` threads (the bytes do not depend on them).
pub fn encode(rgb: &[u8], width: u32, height: u32, quality: u8, threads: usize) -> Result<Vec<u8>> {
    let layout = Layout::new(width, height, quality)?;
    if rgb.len() != layout.width * layout.height * 3 {
        return Err(ViewError::Encode(format!(
            "{} bytes for a {width}x{height} RGB frame",
            rgb.len()
        )));
    }
    let tables = tables(quality);
    let threads = threads.max(1);
    let row_len = layout.mcu_x * layout.blocks_per_mcu() * 64;
    let mut coefs = vec![0i32; layout.blocks() * 64];
    let per = layout.mcu_y.div_ceil(threads) * row_len;
    std::thread::scope(|s| {
        for (c, chunk) in coefs.chunks_mut(per).enumerate() {
            let tables = &tables;
            s.spawn(move || {
                let mut planes = Planes::default();
                for (i, out) in chunk.chunks_exact_mut(row_len).enumerate() {
                    let my = c * (per / row_len) + i;
                    planes.fill(&layout, rgb, my);
                    planes.coefs(&layout, tables, out);
                }
            });
        }
    });
    let n = layout.segments();
    let slot = layout.slot_bytes();
    let per = n.div_ceil(threads);
    let mut parts: Vec<Vec<u8>> = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|first| {
                let (tables, coefs) = (&tables, &coefs);
                s.spawn(move || {
                    let mut buf = vec![0u8; slot];
                    let mut data = Vec::new();
                    for i in first..(first + per).min(n) {
                        let len = segment(&layout, tables, coefs, i, &mut buf);
                        data.extend_from_slice(&buf[..len]);
                        if i + 1 < n {
                            data.extend([0xff, 0xd0 + (i % 8) as u8]);
                        }
                    }
                    data
                })
            })
            .collect();
        parts = handles
            .into_iter()
            .map(|h| h.join().expect("a JPEG thread panicked"))
            .collect();
    });
    Ok(file(&layout, quality, &parts.concat()))
}

#[cfg(test)]
#[path = "jpeg_tests.rs"]
mod tests;
