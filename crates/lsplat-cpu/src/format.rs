//! How the CPU operator stores its entries: list positions and weights.
//!
//! - `f32` (exact), `f16`, `bf16`: per entry a u16 position in its block's Gaussian
//!   list and the weight (6 or 4 bytes).
//! - `compact`: per entry one byte, the gap to the previous entry's position in the
//!   same row (block lists are in front-to-back order, so a row's positions ascend),
//!   and a 16-bit weight [`W16`] (3 bytes). A gap above 255 is bridged by filler
//!   entries of weight 0 that advance the position by 256 each.
//! - `recompute`: per entry one byte, the gap as in `compact` but bridged by fillers
//!   (byte 255) that advance the position by 255 and are no entry; no weights. Each
//!   product re-projects the camera's visible Gaussians ([`RSplat`]) and recomputes
//!   every weight α·T along the row with the walk's own arithmetic, so the weights,
//!   and the products, are bitwise those of `f32`.

use half::{bf16, f16};

use std::ops::Range;

use crate::operator::Block;
use crate::store::{Pod, Store};

/// Weight storage.
#[derive(Clone, Debug)]
pub enum Weights {
    /// Exact.
    F32(Store<f32>),
    /// IEEE half.
    F16(Store<f16>),
    /// bfloat16.
    Bf16(Store<bf16>),
    /// [`W16`] (the compact layout).
    W16(Store<W16>),
    /// None: recomputed by every product (the `recompute` layout).
    Recomputed,
}

/// A weight in `[0, 2)` in 16 bits: 5 exponent bits (bias 31, no sign) and 11
/// mantissa bits, rounded to nearest (ties to even). Weights `α·T` lie in
/// `[(1/255)·1e-4, 0.99]`, all normal here, so the relative error is at most 2⁻¹²
/// (half of f16's 2⁻¹¹, which spends a bit on the sign and goes subnormal below 6e-5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct W16(pub u16);

// SAFETY: repr(transparent) over u16: no padding, every bit pattern a value.
unsafe impl Pod for W16 {}

/// 2⁹⁶: an f32 exponent field moved from bias 127 to bias 31.
const W16_SCALE: f32 = 7.922_816_3e28;

impl W16 {
    /// `w` (finite, in `[0, 2)`) rounded to the nearest W16; 0 below 2⁻³¹.
    pub fn from_f32(w: f32) -> W16 {
        debug_assert!((0.0..2.0).contains(&w), "weight {w} outside [0, 2)");
        let b = w.to_bits();
        // Round the 12 dropped mantissa bits to nearest, ties to even.
        let r = b + 0x7ff + ((b >> 12) & 1);
        let e = (r >> 23) as i32 - 127 + 31;
        if e <= 0 {
            return W16(0);
        }
        W16(((r >> 12) - (96 << 11)) as u16)
    }
}

/// A weight element.
pub trait Weight: Copy + Send + Sync {
    /// As f32.
    fn get(self) -> f32;
}
impl Weight for f32 {
    #[inline(always)]
    fn get(self) -> f32 {
        self
    }
}
impl Weight for f16 {
    /// Branch-free widening for finite values (weights are finite): the 15 magnitude
    /// bits shifted into an f32 and rescaled by 2¹¹² is exact for normal and subnormal
    /// halves alike, and much faster than a conversion without F16C instructions.
    #[inline(always)]
    fn get(self) -> f32 {
        let h = self.to_bits() as u32;
        let magnitude = f32::from_bits((h & 0x7fff) << 13) * f32::from_bits(0x7780_0000);
        f32::from_bits(magnitude.to_bits() | ((h & 0x8000) << 16))
    }
}
impl Weight for bf16 {
    #[inline(always)]
    fn get(self) -> f32 {
        self.to_f32()
    }
}
impl Weight for W16 {
    /// Exact: the 16 bits shifted into an f32 (exponent field 0–31, subnormal at 0)
    /// and rescaled by 2⁹⁶.
    #[inline(always)]
    fn get(self) -> f32 {
        f32::from_bits((self.0 as u32) << 12) * W16_SCALE
    }
}

impl Weights {
    /// Bytes per weight.
    pub fn elem_bytes(&self) -> usize {
        match self {
            Weights::F32(_) => 4,
            Weights::Recomputed => 0,
            _ => 2,
        }
    }

    /// Bytes held.
    pub fn byte_len(&self) -> usize {
        match self {
            Weights::F32(v) => v.byte_len(),
            Weights::F16(v) => v.byte_len(),
            Weights::Bf16(v) => v.byte_len(),
            Weights::W16(v) => v.byte_len(),
            Weights::Recomputed => 0,
        }
    }
}

/// Entry positions in the block lists.
#[derive(Clone, Debug)]
pub enum Positions {
    /// The position itself.
    U16(Store<u16>),
    /// The gap to the row's previous position (`compact`).
    Gaps(Store<u8>),
}

impl Positions {
    /// Bytes held.
    pub fn byte_len(&self) -> usize {
        match self {
            Positions::U16(v) => v.byte_len(),
            Positions::Gaps(v) => v.byte_len(),
        }
    }
}

/// A way to read an operator's entries, row by row.
pub(crate) trait Entries: Copy + Send + Sync {
    /// A row's decoding state.
    type Cursor: Copy;

    /// Makes in `buf` what the block's rows `rows` (whose Gaussians `list` holds) need
    /// decoding besides the stored entries ([`Block::alphas`]); nothing by default.
    #[inline(always)]
    fn prepare(&self, list: &[u32], rows: Range<usize>, row_ptr: &[u32], buf: &mut BlockBuf) {
        let _ = (list, rows, row_ptr, buf);
    }

    /// The state before the first entry of row `r` of block `blk`.
    fn start(&self, blk: &Block<'_, Self>, r: usize) -> Self::Cursor;

    /// Entry `k`'s position in its block's list and its weight. `cur` is the row's
    /// decoding state: [`Entries::start`] before the row's first entry, then as left
    /// by the entries before `k` in the same row (entries are read in order).
    ///
    /// # Safety
    /// `k` is an entry of the operator and the entries of its row before it were read
    /// with the same `cur`, started for that row and its block's list.
    unsafe fn get(&self, k: usize, cur: &mut Self::Cursor) -> (usize, f32);
}

/// u16 positions and weights of type `W`.
#[derive(Clone, Copy)]
pub(crate) struct Plain<'a, W> {
    pub(crate) local: &'a [u16],
    pub(crate) weights: &'a [W],
}

impl<W: Weight> Entries for Plain<'_, W> {
    type Cursor = ();

    #[inline(always)]
    fn start(&self, _blk: &Block<'_, Self>, _r: usize) {}

    #[inline(always)]
    unsafe fn get(&self, k: usize, _cur: &mut ()) -> (usize, f32) {
        // SAFETY: k is an entry (caller), so both arrays hold it.
        unsafe {
            (
                *self.local.get_unchecked(k) as usize,
                self.weights.get_unchecked(k).get(),
            )
        }
    }
}

/// Gap-coded positions and [`W16`] weights.
#[derive(Clone, Copy)]
pub(crate) struct Gaps<'a> {
    pub(crate) gaps: &'a [u8],
    pub(crate) weights: &'a [W16],
}

impl Entries for Gaps<'_> {
    type Cursor = usize;

    #[inline(always)]
    fn start(&self, _blk: &Block<'_, Self>, _r: usize) -> usize {
        0
    }

    #[inline(always)]
    unsafe fn get(&self, k: usize, cur: &mut usize) -> (usize, f32) {
        // SAFETY: k is an entry (caller), so both arrays hold it.
        unsafe {
            let j = *cur + *self.gaps.get_unchecked(k) as usize;
            *cur = j + 1;
            (j, self.weights.get_unchecked(k).get())
        }
    }
}

/// The gap byte of a `recompute` filler: it advances the position by this much and is
/// no entry.
pub(crate) const FILLER: u8 = 255;

/// A product task's buffers for preparing a block ([`Entries::prepare`]).
#[derive(Default)]
pub(crate) struct BlockBuf {
    /// Per entry of the block: its α (`recompute`).
    pub(crate) alphas: Vec<f32>,
    /// The block's listed splats, in list order (`recompute`).
    pub(crate) splats: Vec<RSplat>,
    /// Per entry of the block: its splat's opacity (`recompute`).
    pub(crate) opacity: Vec<f32>,
}

/// What a product needs of a visible Gaussian to recompute its weights: the walk's
/// splat (centre and conic in f64, opacity) re-projected for the operator's camera.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RSplat {
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) conic: [f64; 3],
    pub(crate) opacity: f32,
}

/// Gap-coded positions (`recompute`: fillers are [`FILLER`] bytes) and weights
/// recomputed from the re-projected splats.
#[derive(Clone, Copy)]
pub(crate) struct Recomputed<'a> {
    pub(crate) gaps: &'a [u8],
    /// Per row: its pixel, `x | y << 16`.
    pub(crate) pixels: &'a [u32],
    /// Per Gaussian (those listed by the operator's blocks filled in).
    pub(crate) splats: &'a [RSplat],
}

/// A row's state in [`Recomputed`]: the next position, the transmittance, and the α
/// of the next entry in the prepared block.
#[derive(Clone, Copy)]
pub(crate) struct Walk {
    pos: usize,
    t: f32,
    alpha: *const f32,
}

impl Entries for Recomputed<'_> {
    type Cursor = Walk;

    /// Every entry's α = min(0.99, o·e^{−σ}) at its row's pixel (0 for fillers).
    fn prepare(&self, list: &[u32], rows: Range<usize>, row_ptr: &[u32], buf: &mut BlockBuf) {
        crate::recompute::block_alphas(self, list, rows, row_ptr, buf);
    }

    #[inline(always)]
    fn start(&self, blk: &Block<'_, Self>, r: usize) -> Walk {
        let first = blk.row_ptr[blk.rows.start] as usize;
        let k = blk.row_ptr[r] as usize;
        assert!(
            blk.rows.contains(&r) && blk.alphas.len() == blk.row_ptr[blk.rows.end] as usize - first
        );
        Walk {
            pos: 0,
            t: 1.0,
            alpha: blk.alphas[k - first..].as_ptr(),
        }
    }

    #[inline(always)]
    unsafe fn get(&self, k: usize, cur: &mut Walk) -> (usize, f32) {
        // SAFETY: k is an entry (caller), so `gaps` holds it and the prepared block
        // holds its α (read in order from the row's first); `build` makes every
        // decoded position (a filler's too: a real entry follows it in the row)
        // smaller than the block's list.
        unsafe {
            let g = *self.gaps.get_unchecked(k);
            let a = *cur.alpha;
            cur.alpha = cur.alpha.add(1);
            let j = cur.pos + g as usize;
            cur.pos = j + (g != FILLER) as usize;
            // The walk's update; a filler's α is 0, so it leaves T as it is.
            let w = a * cur.t;
            cur.t *= 1.0 - a;
            (j, w)
        }
    }
}

/// Runs `$body` with `$e` bound to the operator's [`Entries`] (one monomorphised copy
/// per storage). `$table` is evaluated only for a `recompute` operator: it gives the
/// re-projected splats (anything that derefs to `[RSplat]`).
macro_rules! with_entries {
    ($op:expr, $table:expr, $e:ident => $body:expr) => {{
        use $crate::format::{Gaps, Plain, Positions, Recomputed, Weights};
        match ($op.entry_positions(), $op.entry_weights()) {
            (Positions::U16(l), Weights::F32(w)) => {
                let $e = Plain {
                    local: &l[..],
                    weights: &w[..],
                };
                $body
            }
            (Positions::U16(l), Weights::F16(w)) => {
                let $e = Plain {
                    local: &l[..],
                    weights: &w[..],
                };
                $body
            }
            (Positions::U16(l), Weights::Bf16(w)) => {
                let $e = Plain {
                    local: &l[..],
                    weights: &w[..],
                };
                $body
            }
            (Positions::Gaps(l), Weights::W16(w)) => {
                let $e = Gaps {
                    gaps: &l[..],
                    weights: &w[..],
                };
                $body
            }
            (Positions::Gaps(l), Weights::Recomputed) => {
                let table = $table;
                let $e = Recomputed {
                    gaps: &l[..],
                    pixels: &$op.row_pixels()[..],
                    splats: &table[..],
                };
                $body
            }
            _ => unreachable!("`build` pairs gap-coded positions with W16 or no weights only"),
        }
    }};
}
pub(crate) use with_entries;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every W16 widens exactly, and rounding any weight of the range the walk makes
    /// is the nearest W16 (within 2⁻¹² relative).
    #[test]
    fn w16_rounds_to_nearest_within_2_pow_minus_12() {
        for bits in 0..=u16::MAX {
            let w = W16(bits).get();
            assert!(w.is_finite() && (0.0..2.0).contains(&w), "{bits:#x}: {w}");
            if w >= f32::from_bits(1 << 23) * W16_SCALE {
                assert_eq!(W16::from_f32(w), W16(bits), "{bits:#x} does not round-trip");
            }
        }
        let mut w = 3.9e-7f32;
        while w < 0.99 {
            let q = W16::from_f32(w);
            let back = q.get();
            assert!(((back - w) / w).abs() <= 2f32.powi(-12), "{w} -> {back}");
            let (lo, hi) = (W16(q.0.saturating_sub(1)).get(), W16(q.0 + 1).get());
            assert!((back - w).abs() <= (lo - w).abs() && (back - w).abs() <= (hi - w).abs());
            w *= 1.0 + 1.7e-5;
        }
        assert_eq!(W16::from_f32(0.0), W16(0));
        assert_eq!(W16::from_f32(0.99).get(), 0.98999023);
    }

    #[test]
    fn gap_coded_positions_decode_in_order() {
        let gaps = [3u8, 0, 255, 0, 10];
        let weights = [W16::from_f32(0.5); 5];
        let e = Gaps {
            gaps: &gaps,
            weights: &weights,
        };
        let mut cur = 0;
        // SAFETY: every k is an entry of the arrays, read in order from cur = 0.
        let got: Vec<usize> = (0..5).map(|k| unsafe { e.get(k, &mut cur) }.0).collect();
        assert_eq!(got, vec![3, 4, 260, 261, 272]);
    }
}
