//! Per-camera products (`lv2_prep`) and the per-pixel cosine loss (`lv2_cosine`).

use std::sync::Mutex;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};
use multiversion::multiversion;

use super::{BLOCK, PLUGIN, all_below, arity, dot64, items_are, kernel, need, scalar_is};
use crate::{CODES, TINY_NORM_SQ};

/// `table·codebookᵀ`, `codebook·codebookᵀ` and the table rows' norms (as
/// [`crate::prepare`]; dot products summed in f64, stored as f32). Arguments:
/// `[0]` codebook `[C·dim]`, `[1]` table `[rows·dim]`, `[2]` bg `[rows·C]` (written),
/// `[3]` gram `[C·C]` (written), `[4]` gnorm `[rows]` (written), `[5]` dim (u32
/// scalar, = `self.dim`); items = rows·C + C² + rows.
#[derive(Debug)]
pub struct PrepOp {
    /// Rows of the ground-truth table.
    pub rows: usize,
    /// Feature dimension.
    pub dim: usize,
}

impl PrepOp {
    /// The op's `items`: rows·C + C² + rows.
    pub fn items(&self) -> usize {
        self.rows * CODES + CODES * CODES + self.rows
    }
}

impl DeviceOp for PrepOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_prep"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_prep", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 6)?;
        items_are(n, items, self.items(), "rows·C + C² + rows")?;
        need(n, "codebook", lens[0], CODES, self.dim)?;
        need(n, "table", lens[1], self.rows, self.dim)?;
        need(n, "bg", lens[2], self.rows, CODES)?;
        need(n, "gram", lens[3], CODES, CODES)?;
        need(n, "gnorm", lens[4], self.rows, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (codebook, table) = (a.f32(0)?, a.f32(1)?);
        let bg = a.f32_mut(2)?;
        let gram = a.f32_mut(3)?;
        let gnorm = a.f32_mut(4)?;
        let lens = [
            codebook.len(),
            table.len(),
            bg.len(),
            gram.len(),
            gnorm.len(),
            0,
        ];
        self.check(items, &lens)?;
        scalar_is(self.name(), "dim", a.scalar_u32(5)?, self.dim)?;
        let (rows, dim) = (self.rows, self.dim);
        let code = |c: usize| &codebook[c * dim..][..dim];
        let row = |r: usize| &table[r * dim..][..dim];
        pool.for_rows(rows, &mut bg[..rows * CODES], CODES, &|_, rs, out| {
            for (r, o) in rs.zip(out.chunks_exact_mut(CODES)) {
                for (c, v) in o.iter_mut().enumerate() {
                    *v = dot64(row(r), code(c)) as f32;
                }
            }
            0.0
        });
        pool.for_rows(CODES, &mut gram[..CODES * CODES], CODES, &|_, rs, out| {
            for (i, o) in rs.zip(out.chunks_exact_mut(CODES)) {
                for (j, v) in o.iter_mut().enumerate() {
                    *v = dot64(code(i), code(j)) as f32;
                }
            }
            0.0
        });
        pool.for_rows(rows, &mut gnorm[..rows], 1, &|_, rs, out| {
            for (r, v) in rs.zip(out.iter_mut()) {
                *v = dot64(row(r), row(r)).sqrt() as f32;
            }
            0.0
        });
        Ok(())
    }
}

/// What [`cosine_pixel`] returns besides the gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PixelCosine {
    /// 1 − cos(F, g), unscaled (1 for a degenerate pixel).
    pub rho: f32,
    /// Codebook-gradient coefficient of g: −grad_scale/(|F| |g|).
    pub c1: f32,
    /// Codebook-gradient coefficient of F: grad_scale·a/(|F|³ |g|).
    pub c2: f32,
}

/// Entries of Gw summed together, in registers, per pass over a pixel's non-zero
/// weights.
const LANES: usize = 16;
const _: () = assert!(CODES.is_multiple_of(LANES));

/// One pixel of [`CosineOp`] (the math of [`crate::cosine_pixels`], the kernel's
/// operations in order): `w`, `bg` (the pixel's row of bg) and `d_w` are `[C]`, `gram`
/// `[C·C]` (widened to f64), `gnorm` |g|. With a = w·bg, Gw = gram·w, q = w·Gw: a
/// pixel with q ≤ [`TINY_NORM_SQ`] or |g| = 0 gets ρ = 1 and zero gradient; otherwise
/// cos = a/(√q |g|) and d_w = c1·bg + c2·Gw. Sums run in f64 over the non-zero
/// weights in code order.
#[inline(always)]
pub fn cosine_pixel(
    w: &[f32],
    bg: &[f32],
    gram: &[f64],
    gnorm: f32,
    grad_scale: f32,
    d_w: &mut [f32],
) -> PixelCosine {
    let (w, bg, d_w) = (&w[..CODES], &bg[..CODES], &mut d_w[..CODES]);
    let gram = &gram[..CODES * CODES];
    let g = f64::from(gnorm);
    let mut nz = [(0usize, 0.0f64); CODES];
    let mut n = 0;
    let mut a = 0.0f64;
    for (c, &wc) in w.iter().enumerate() {
        if wc != 0.0 {
            let wc = f64::from(wc);
            a += wc * f64::from(bg[c]);
            nz[n] = (c, wc);
            n += 1;
        }
    }
    let nz = &nz[..n];
    let mut gw = [0.0f64; CODES];
    for (lane0, out) in (0..).step_by(LANES).zip(gw.chunks_exact_mut(LANES)) {
        let mut acc = [0.0f64; LANES];
        for &(c, wc) in nz {
            for (o, &gv) in acc.iter_mut().zip(&gram[c * CODES + lane0..][..LANES]) {
                *o += wc * gv;
            }
        }
        out.copy_from_slice(&acc);
    }
    let mut q = 0.0f64;
    for &(c, wc) in nz {
        q += wc * gw[c];
    }
    if q <= TINY_NORM_SQ || g == 0.0 {
        d_w.fill(0.0);
        return PixelCosine {
            rho: 1.0,
            c1: 0.0,
            c2: 0.0,
        };
    }
    let inv = 1.0 / (q.sqrt() * g);
    let scale = f64::from(grad_scale);
    let c1 = -scale * inv;
    let c2 = scale * a * inv / q;
    for ((o, &b), &gv) in d_w.iter_mut().zip(bg).zip(&gw) {
        *o = (c1 * f64::from(b) + c2 * gv) as f32;
    }
    PixelCosine {
        rho: (1.0 - a * inv) as f32,
        c1: c1 as f32,
        c2: c2 as f32,
    }
}

/// [`cosine_pixel`] for consecutive pixels (`mask`'s length): `w`, `d_w` `[n·C]`,
/// `rho` `[n]`, `coef` `[2n]` start at the first of them. Compiled for the CPU's
/// widest vector unit as well (the same operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn cosine_chunk(
    w: &[f32],
    mask: &[u32],
    bg: &[f32],
    gram: &[f64],
    gnorm: &[f32],
    grad_scale: f32,
    d_w: &mut [f32],
    rho: &mut [f32],
    coef: &mut [f32],
) {
    for (j, &r) in mask.iter().enumerate() {
        let r = r as usize;
        let px = cosine_pixel(
            &w[j * CODES..][..CODES],
            &bg[r * CODES..][..CODES],
            gram,
            gnorm[r],
            grad_scale,
            &mut d_w[j * CODES..][..CODES],
        );
        rho[j] = px.rho;
        (coef[2 * j], coef[2 * j + 1]) = (px.c1, px.c2);
    }
}

/// Rows copied at once from a block's stack buffer into `rho` and `coef`.
const CHUNK: usize = 64;

/// The cosine loss per valid pixel. Arguments: `[0]` w `[V·C]`, `[1]` mask `[V]` (u32,
/// each < rows), `[2]` bg `[rows·C]`, `[3]` gram `[C·C]`, `[4]` gnorm `[rows]`,
/// `[5]` d_w `[V·C]` (overwritten), `[6]` rho `[V]` (written), `[7]` coef `[2V]`
/// (written: c1 at 2p, c2 at 2p + 1), `[8]` grad_scale (f32 scalar, weight/(H·W));
/// items = V. See [`cosine_pixel`].
#[derive(Debug)]
pub struct CosineOp {
    /// Rows of the ground-truth table.
    pub rows: usize,
    /// Valid pixels V.
    pub pixels: usize,
}

impl DeviceOp for CosineOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_cosine"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_cosine", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 9)?;
        items_are(n, items, self.pixels, "pixels")?;
        need(n, "w", lens[0], items, CODES)?;
        need(n, "mask", lens[1], items, 1)?;
        need(n, "bg", lens[2], self.rows, CODES)?;
        need(n, "gram", lens[3], CODES, CODES)?;
        need(n, "gnorm", lens[4], self.rows, 1)?;
        need(n, "d_w", lens[5], items, CODES)?;
        need(n, "rho", lens[6], items, 1)?;
        need(n, "coef", lens[7], items, 2)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (w, mask) = (a.f32(0)?, a.u32(1)?);
        let (bg, gram, gnorm) = (a.f32(2)?, a.f32(3)?, a.f32(4)?);
        let d_w = a.f32_mut(5)?;
        let rho = a.f32_mut(6)?;
        let coef = a.f32_mut(7)?;
        let grad_scale = a.scalar_f32(8)?;
        let lens = [
            w.len(),
            mask.len(),
            bg.len(),
            gram.len(),
            gnorm.len(),
            d_w.len(),
            rho.len(),
            coef.len(),
            0,
        ];
        self.check(items, &lens)?;
        all_below(self.name(), "mask", &mask[..items], self.rows)?;
        let outs = Mutex::new((&mut rho[..items], &mut coef[..2 * items]));
        pool.for_rows(items, &mut d_w[..items * CODES], CODES, &|_, rows, d| {
            let (mut lr, mut lc) = ([0.0f32; CHUNK], [0.0f32; 2 * CHUNK]);
            let mut gram64 = [0.0f64; CODES * CODES];
            for (o, &g) in gram64.iter_mut().zip(&gram[..CODES * CODES]) {
                *o = f64::from(g);
            }
            for start in rows.clone().step_by(CHUNK) {
                let end = (start + CHUNK).min(rows.end);
                let used = end - start;
                let k = start - rows.start;
                cosine_chunk(
                    &w[start * CODES..end * CODES],
                    &mask[start..end],
                    bg,
                    &gram64,
                    gnorm,
                    grad_scale,
                    &mut d[k * CODES..(k + used) * CODES],
                    &mut lr[..used],
                    &mut lc[..2 * used],
                );
                let mut o = outs.lock().unwrap_or_else(|e| e.into_inner());
                o.0[start..end].copy_from_slice(&lr[..used]);
                o.1[2 * start..2 * end].copy_from_slice(&lc[..2 * used]);
            }
            0.0
        });
        Ok(())
    }
}
