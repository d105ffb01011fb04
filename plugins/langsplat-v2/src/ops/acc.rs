//! The codebook gradient: per-pixel pieces summed (`lv2_acc`), then formed
//! (`lv2_codebook_grad`).

use std::sync::Mutex;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};
use multiversion::multiversion;

use super::{BLOCK, PLUGIN, all_below, arity, items_are, kernel, need, scalar_is};
use crate::CODES;

/// Pixels whose s-terms are summed together, sharing each load and store of s.
const GROUP: usize = 8;
/// Rows × columns of s summed in registers at once.
const TILE_ROWS: usize = 4;
const TILE_COLS: usize = 8;
const _: () = assert!(CODES.is_multiple_of(TILE_ROWS) && CODES.is_multiple_of(TILE_COLS));

/// `s[k,m] += Σ_p t[p][k]·w[p][m]` over the [`GROUP`] pixels in order (each term
/// fused), for the tiles that hold an entry with m ≥ k; `t[p][k] = c2_p·w_pk`. A pixel
/// slot left at zero adds exact zeros. Entries below the diagonal inside a tile are
/// summed too, and never read.
#[inline(always)]
fn add_s_group(t: &[[f64; CODES]; GROUP], w: &[[f64; CODES]; GROUP], pss: &mut [f64]) {
    let pss = &mut pss[..CODES * CODES];
    for k0 in (0..CODES).step_by(TILE_ROWS) {
        for m0 in (k0 / TILE_COLS * TILE_COLS..CODES).step_by(TILE_COLS) {
            let mut acc = [[0.0f64; TILE_COLS]; TILE_ROWS];
            for (r, a) in acc.iter_mut().enumerate() {
                a.copy_from_slice(&pss[(k0 + r) * CODES + m0..][..TILE_COLS]);
            }
            for p in 0..GROUP {
                let wm: &[f64; TILE_COLS] = w[p][m0..m0 + TILE_COLS].try_into().unwrap();
                for (r, a) in acc.iter_mut().enumerate() {
                    let tk = t[p][k0 + r];
                    for l in 0..TILE_COLS {
                        a[l] = tk.mul_add(wm[l], a[l]);
                    }
                }
            }
            for (r, a) in acc.iter().enumerate() {
                pss[(k0 + r) * CODES + m0..][..TILE_COLS].copy_from_slice(a);
            }
        }
    }
}

/// Adds pixels `ps`' terms to the pieces `u` `[rows·C]` and `s` `[C·C]` (upper
/// triangle), in pixel order; s [`GROUP`] pixels at a time. Pixels with c2 = 0 add
/// nothing to s, nor pixels with c1 = 0 to u. Compiled for the CPU's widest vector
/// unit as well (the same operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn acc_pixels(
    w: &[f32],
    mask: &[u32],
    coef: &[f32],
    ps: std::ops::Range<usize>,
    pu: &mut [f64],
    pss: &mut [f64],
) {
    let mut wd = [[0.0f64; CODES]; GROUP];
    let mut t = [[0.0f64; CODES]; GROUP];
    let mut n = 0;
    for p in ps {
        let (c1, c2) = (f64::from(coef[2 * p]), f64::from(coef[2 * p + 1]));
        if c1 == 0.0 && c2 == 0.0 {
            continue;
        }
        let wp = &w[p * CODES..][..CODES];
        if c1 != 0.0 {
            let ur = &mut pu[mask[p] as usize * CODES..][..CODES];
            for (o, &wk) in ur.iter_mut().zip(wp) {
                *o += c1 * f64::from(wk);
            }
        }
        if c2 != 0.0 {
            for ((d, e), &v) in wd[n].iter_mut().zip(t[n].iter_mut()).zip(wp) {
                *d = f64::from(v);
                *e = c2 * *d;
            }
            n += 1;
            if n == GROUP {
                add_s_group(&t, &wd, pss);
                n = 0;
            }
        }
    }
    if n > 0 {
        for (d, e) in wd[n..].iter_mut().zip(t[n..].iter_mut()) {
            d.fill(0.0);
            e.fill(0.0);
        }
        add_s_group(&t, &wd, pss);
    }
}

/// Blocks of `lv2_acc` (`LV2_ACC_BLOCKS`): the pixels are split into this many
/// chunks, each summed by one block into its own slice of the scratch buffer.
pub const ACC_BLOCKS: usize = 128;
/// Threads per block of `lv2_acc` (`LV2_ACC_THREADS`): four per code.
pub const ACC_THREADS: usize = 4 * CODES;

/// The pieces of the codebook gradient ([`crate::CodebookAcc`]) from [`super::CosineOp`]'s
/// coefficients: `u[r,k] = Σ_{p: mask_p = r} c1_p w_pk`, `s[k,m] = Σ_p c2_p w_pk w_pm`.
/// Arguments: `[0]` w `[V·C]`, `[1]` mask `[V]` (u32, each < rows), `[2]` coef
/// `[2V]`, `[3]` u `[rows·C]` (overwritten), `[4]` s `[C·C]` (overwritten), `[5]`
/// part (scratch of [`AccOp::part_len`] floats), `[6]` count (u32 `[1]`, 0 before and
/// after), `[7]` pixels (u32 scalar, = `self.pixels`), `[8]` rows (u32 scalar, =
/// `self.rows`); items = [`AccOp::items`].
///
/// The kernel sums [`ACC_BLOCKS`] chunks of pixels in pixel order, each block into its
/// own slice of `part`, and the last block to finish adds the slices in block order;
/// the CPU sums blocks of pixels in parallel and adds the blocks in order, sums s's
/// upper triangle only, and fuses s's terms. Both are in f64 and deterministic; they
/// differ in rounding only. The CPU does not use `part` or `count`.
#[derive(Debug)]
pub struct AccOp {
    /// Rows of the ground-truth table.
    pub rows: usize,
    /// Valid pixels V.
    pub pixels: usize,
}

impl AccOp {
    /// The op's `items`: [`ACC_BLOCKS`] blocks of [`ACC_THREADS`].
    pub fn items(&self) -> usize {
        ACC_BLOCKS * ACC_THREADS
    }

    /// Output entries: rows·C + C².
    fn entries(&self) -> usize {
        self.rows * CODES + CODES * CODES
    }

    /// Floats of the scratch buffer for up to `rows` table rows: one f64 slice of
    /// rows·C + C² entries per block.
    pub fn part_len(rows: usize) -> usize {
        2 * ACC_BLOCKS * (rows * CODES + CODES * CODES)
    }
}

impl DeviceOp for AccOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_acc"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_acc", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 9)?;
        items_are(n, items, self.items(), "ACC_BLOCKS·ACC_THREADS")?;
        need(n, "w", lens[0], self.pixels, CODES)?;
        need(n, "mask", lens[1], self.pixels, 1)?;
        need(n, "coef", lens[2], self.pixels, 2)?;
        need(n, "u", lens[3], self.rows, CODES)?;
        need(n, "s", lens[4], CODES, CODES)?;
        need(n, "part", lens[5], Self::part_len(self.rows), 1)?;
        need(n, "count", lens[6], 1, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (w, mask, coef) = (a.f32(0)?, a.u32(1)?, a.f32(2)?);
        let (part, count) = (a.f32_mut(5)?.len(), a.u32_mut(6)?.len());
        let u = a.f32_mut(3)?;
        let s = a.f32_mut(4)?;
        self.check(
            items,
            &[
                w.len(),
                mask.len(),
                coef.len(),
                u.len(),
                s.len(),
                part,
                count,
                0,
                0,
            ],
        )?;
        let n = self.name();
        scalar_is(n, "pixels", a.scalar_u32(7)?, self.pixels)?;
        scalar_is(n, "rows", a.scalar_u32(8)?, self.rows)?;
        let (pixels, nu) = (self.pixels, self.rows * CODES);
        all_below(n, "mask", &mask[..pixels], self.rows)?;
        let parts: Vec<Mutex<Vec<f64>>> = (0..pool.blocks(pixels))
            .map(|_| Mutex::new(Vec::new()))
            .collect();
        pool.for_rows(pixels, &mut [], 0, &|b, ps, _| {
            let mut part = vec![0.0f64; self.entries()];
            let (pu, pss) = part.split_at_mut(nu);
            acc_pixels(w, mask, coef, ps, pu, pss);
            *parts[b].lock().unwrap_or_else(|e| e.into_inner()) = part;
            0.0
        });
        let parts: Vec<Vec<f64>> = parts
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        // Entry e of the outputs sums entry `from(e)` of the parts: s's lower triangle
        // is its upper one.
        let from = |e: usize| match e.checked_sub(nu) {
            Some(km) if km % CODES < km / CODES => nu + (km % CODES) * CODES + km / CODES,
            _ => e,
        };
        let out = u[..nu].iter_mut().chain(s[..CODES * CODES].iter_mut());
        for (e, o) in out.enumerate() {
            let mut sum = 0.0f64;
            for part in &parts {
                sum += part[from(e)];
            }
            *o = sum as f32;
        }
        Ok(())
    }
}

/// Adds the codebook gradient `uᵀ·table + s·codebook` (as [`crate::codebook_gradient`],
/// bit for bit). Arguments: `[0]` u `[rows·C]`, `[1]` s `[C·C]`, `[2]` table
/// `[rows·dim]`, `[3]` codebook `[C·dim]`, `[4]` d_codebook `[C·dim]` (added to),
/// `[5]` rows (u32 scalar, = `self.rows`); items = C·dim.
#[derive(Debug)]
pub struct CodebookGradOp {
    /// Rows of the ground-truth table.
    pub rows: usize,
    /// Feature dimension.
    pub dim: usize,
}

impl DeviceOp for CodebookGradOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_codebook_grad"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_codebook_grad", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 6)?;
        items_are(n, items, CODES * self.dim, "C·dim")?;
        need(n, "u", lens[0], self.rows, CODES)?;
        need(n, "s", lens[1], CODES, CODES)?;
        need(n, "table", lens[2], self.rows, self.dim)?;
        need(n, "codebook", lens[3], CODES, self.dim)?;
        need(n, "d_codebook", lens[4], CODES, self.dim)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (u, s, table, codebook) = (a.f32(0)?, a.f32(1)?, a.f32(2)?, a.f32(3)?);
        let d = a.f32_mut(4)?;
        let lens = [u.len(), s.len(), table.len(), codebook.len(), d.len(), 0];
        self.check(items, &lens)?;
        scalar_is(self.name(), "rows", a.scalar_u32(5)?, self.rows)?;
        let (rows, dim) = (self.rows, self.dim);
        if dim == 0 {
            return Ok(());
        }
        pool.for_rows(CODES, &mut d[..CODES * dim], dim, &|_, ks, out| {
            let mut tmp = vec![0.0f64; dim];
            for (k, o) in ks.zip(out.chunks_exact_mut(dim)) {
                tmp.fill(0.0);
                let u_col = (0..rows).map(|r| (u[r * CODES + k], &table[r * dim..][..dim]));
                let s_row = (0..CODES).map(|m| (s[k * CODES + m], &codebook[m * dim..][..dim]));
                for (cf, src) in u_col.chain(s_row) {
                    if cf != 0.0 {
                        let cf = f64::from(cf);
                        for (t, &x) in tmp.iter_mut().zip(src) {
                            *t += cf * f64::from(x);
                        }
                    }
                }
                for (v, t) in o.iter_mut().zip(&tmp) {
                    *v = (f64::from(*v) + t) as f32;
                }
            }
            0.0
        });
        Ok(())
    }
}
