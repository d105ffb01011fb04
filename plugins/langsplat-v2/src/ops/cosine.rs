//! Per-camera products (`lv2_prep`) and the per-pixel cosine loss (`lv2_cosine`).

use std::sync::Mutex;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};
use multiversion::multiversion;

use super::{BLOCK, PLUGIN, all_below, arity, dot64, items_are, kernel, need, scalar_is, sum_nz};
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
        let row = |r: usize| &table[r * dim..][..dim];
        let codes = &codebook[..CODES * dim];
        pool.for_rows(rows, &mut bg[..rows * CODES], CODES, &|_, rs, out| {
            for (r, o) in rs.zip(out.chunks_exact_mut(CODES)) {
                dot_rows(row(r), codes, dim, o);
            }
            0.0
        });
        // Upper triangle (dot products commute exactly), mirrored below.
        pool.for_rows(CODES, &mut gram[..CODES * CODES], CODES, &|_, rs, out| {
            for (i, o) in rs.zip(out.chunks_exact_mut(CODES)) {
                dot_rows(
                    &codes[i * dim..][..dim],
                    &codes[i * dim..],
                    dim,
                    &mut o[i..],
                );
            }
            0.0
        });
        for i in 0..CODES {
            for j in 0..i {
                gram[i * CODES + j] = gram[j * CODES + i];
            }
        }
        pool.for_rows(rows, &mut gnorm[..rows], 1, &|_, rs, out| {
            for (r, v) in rs.zip(out.iter_mut()) {
                *v = dot64(row(r), row(r)).sqrt() as f32;
            }
            0.0
        });
        Ok(())
    }
}

/// `out[j] = dot64(a, rows[j·dim..][..dim])` as f32, for each entry of `out`. Compiled
/// for the CPU's widest vector unit as well (the same operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn dot_rows(a: &[f32], rows: &[f32], dim: usize, out: &mut [f32]) {
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(dim)) {
        *o = dot64(a, r) as f32;
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

/// Entries of Gw (of each pixel of a group) summed together in registers, per pass
/// over the codes.
const LANES: usize = 8;
const _: () = assert!(CODES.is_multiple_of(LANES));

/// Pixels whose Gw are summed together, sharing each load of the Gram matrix.
const GROUP: usize = 4;

/// Gw = gram·w of `P` pixels (`w[p]` widened to f64): gw[p][m] = Σ_c w_pc·gram[c,m],
/// each term fused (`fma`), in code order, over the non-zero weights when `SKIP`. With
/// a finite Gram matrix a zero weight adds an exact zero, so both equal the kernel's
/// sum bit for bit.
#[inline(always)]
fn gram_times<const P: usize, const SKIP: bool>(
    w: &[[f64; CODES]; P],
    gram: &[f64],
    gw: &mut [[f64; CODES]; P],
) {
    let gram = &gram[..CODES * CODES];
    for lane0 in (0..CODES).step_by(LANES) {
        let mut acc = [[0.0f64; LANES]; P];
        for c in 0..CODES {
            let gv: &[f64; LANES] = gram[c * CODES + lane0..][..LANES].try_into().unwrap();
            for p in 0..P {
                let wc = w[p][c];
                if SKIP && wc == 0.0 {
                    continue;
                }
                for l in 0..LANES {
                    acc[p][l] = wc.mul_add(gv[l], acc[p][l]);
                }
            }
        }
        for p in 0..P {
            gw[p][lane0..lane0 + LANES].copy_from_slice(&acc[p]);
        }
    }
}

/// One pixel of [`CosineOp`] (the math of [`crate::cosine_pixels`], the kernel's
/// operations in order): `w`, `bg` (the pixel's row of bg) and `d_w` are `[C]`, `gram`
/// `[C·C]` (widened to f64), `gnorm` |g|. With a = w·bg, Gw = gram·w, q = w·Gw:
/// a pixel with q ≤ [`TINY_NORM_SQ`] or |g| = 0 gets ρ = 1 and zero gradient;
/// otherwise cos = a/(√q |g|) and d_w = c1·bg + c2·Gw. Sums run in f64 over the
/// non-zero weights: Gw's in code order, each term fused; a's and q's as
/// [`super::sum_nz`].
#[inline(always)]
pub fn cosine_pixel(
    w: &[f32],
    bg: &[f32],
    gram: &[f64],
    gnorm: f32,
    grad_scale: f32,
    d_w: &mut [f32],
) -> PixelCosine {
    let mut wide = [[0.0f64; CODES]; 1];
    for (o, &v) in wide[0].iter_mut().zip(&w[..CODES]) {
        *o = f64::from(v);
    }
    let mut gw = [[0.0f64; CODES]; 1];
    gram_times::<1, true>(&wide, gram, &mut gw);
    finish_pixel::<true>(&wide[0], bg, &gw[0], gnorm, grad_scale, d_w)
}

/// The rest of [`cosine_pixel`] once Gw is known; `SKIP` as [`super::sum_nz`] (false
/// only where bg and Gw are finite).
#[inline(always)]
fn finish_pixel<const SKIP: bool>(
    w: &[f64; CODES],
    bg: &[f32],
    gw: &[f64; CODES],
    gnorm: f32,
    grad_scale: f32,
    d_w: &mut [f32],
) -> PixelCosine {
    let (bg, d_w) = (&bg[..CODES], &mut d_w[..CODES]);
    let g = f64::from(gnorm);
    let mut bg64 = [0.0f64; CODES];
    for (o, &b) in bg64.iter_mut().zip(bg) {
        *o = f64::from(b);
    }
    let (a, q) = (sum_nz::<SKIP>(w, &bg64), sum_nz::<SKIP>(w, gw));
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
    for ((o, &b), &gv) in d_w.iter_mut().zip(bg).zip(gw) {
        *o = (c1 * f64::from(b) + c2 * gv) as f32;
    }
    PixelCosine {
        rho: (1.0 - a * inv) as f32,
        c1: c1 as f32,
        c2: c2 as f32,
    }
}

/// [`cosine_pixel`] for consecutive pixels (`mask`'s length), [`GROUP`] at a time
/// when bg and the Gram matrix are `finite` (else one at a time): `w`, `d_w` `[n·C]`, `rho`
/// `[n]`, `coef` `[2n]` start at the first of them. Compiled for the CPU's widest vector unit as well (the same operations, so the
/// same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn cosine_chunk(
    w: &[f32],
    mask: &[u32],
    bg: &[f32],
    gram: &[f64],
    gnorm: &[f32],
    grad_scale: f32,
    finite: bool,
    d_w: &mut [f32],
    rho: &mut [f32],
    coef: &mut [f32],
) {
    if !finite {
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
        return;
    }
    let mut wide = [[0.0f64; CODES]; GROUP];
    let mut gw = [[0.0f64; CODES]; GROUP];
    for (j0, rows) in (0..).step_by(GROUP).zip(mask.chunks(GROUP)) {
        for (p, o) in wide.iter_mut().enumerate() {
            // A short last group repeats its first pixel (computed, not stored).
            let src = &w[(j0 + if p < rows.len() { p } else { 0 }) * CODES..][..CODES];
            for (d, &v) in o.iter_mut().zip(src) {
                *d = f64::from(v);
            }
        }
        gram_times::<GROUP, false>(&wide, gram, &mut gw);
        for (p, &r) in rows.iter().enumerate() {
            let (j, r) = (j0 + p, r as usize);
            let px = finish_pixel::<false>(
                &wide[p],
                &bg[r * CODES..][..CODES],
                &gw[p],
                gnorm[r],
                grad_scale,
                &mut d_w[j * CODES..][..CODES],
            );
            rho[j] = px.rho;
            (coef[2 * j], coef[2 * j + 1]) = (px.c1, px.c2);
        }
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
        let finite = gram[..CODES * CODES]
            .iter()
            .chain(&bg[..self.rows * CODES])
            .all(|g| g.is_finite());
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
                    finite,
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

#[cfg(test)]
mod tests {
    use lsplat_core::Rng;
    use lsplat_device::op::SerialPool;
    use lsplat_device::{HostArg, HostArgs, Scalar};

    use super::*;

    const V: usize = 23;
    const ROWS: usize = 3;

    /// Runs [`CosineOp`] on the serial pool; returns d_w, rho and coef.
    fn run(w: &[f32], mask: &[u32], bg: &[f32], gram: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let gnorm = [1.5f32, 0.0, 2.0];
        let (mut d_w, mut rho, mut coef) = (vec![0.0; V * CODES], vec![0.0; V], vec![0.0; 2 * V]);
        let args = vec![
            HostArg::F32(w),
            HostArg::U32(mask),
            HostArg::F32(bg),
            HostArg::F32(gram),
            HostArg::F32(&gnorm),
            HostArg::F32Mut(&mut d_w),
            HostArg::F32Mut(&mut rho),
            HostArg::F32Mut(&mut coef),
            HostArg::Scalar(Scalar::F32(0.25)),
        ];
        let op = CosineOp {
            rows: ROWS,
            pixels: V,
        };
        op.run_cpu(V, &mut HostArgs::new(op.name(), args), &SerialPool)
            .unwrap();
        (d_w, rho, coef)
    }

    /// [`cosine_pixel`] (the kernel's loop: Gw over the non-zero weights) per pixel.
    fn per_pixel(w: &[f32], mask: &[u32], bg: &[f32], gram: &[f32]) -> Vec<u32> {
        let gnorm = [1.5f32, 0.0, 2.0];
        let gram64: Vec<f64> = gram.iter().map(|&g| f64::from(g)).collect();
        let mut bits = Vec::new();
        let mut d_w = vec![0.0; CODES];
        let mut tail = Vec::new();
        for (p, &r) in mask.iter().enumerate() {
            let r = r as usize;
            let px = cosine_pixel(
                &w[p * CODES..][..CODES],
                &bg[r * CODES..][..CODES],
                &gram64,
                gnorm[r],
                0.25,
                &mut d_w,
            );
            bits.extend(d_w.iter().map(|v| v.to_bits()));
            tail.extend([px.rho, px.c1, px.c2].map(f32::to_bits));
        }
        bits.extend(tail);
        bits
    }

    fn bits_of(out: &(Vec<f32>, Vec<f32>, Vec<f32>)) -> Vec<u32> {
        let rc = out.1.iter().zip(out.2.chunks_exact(2));
        let tail = rc.flat_map(|(&r, c)| [r, c[0], c[1]]);
        out.0
            .iter()
            .copied()
            .chain(tail)
            .map(f32::to_bits)
            .collect()
    }

    /// The grouped, branch-free CPU path (23 pixels: five groups of 4 and a short
    /// one; some pixels without weights, rows with |g| = 0) equals the per-pixel loop
    /// over the non-zero weights bit for bit; with a non-finite Gram matrix the op
    /// falls back to that loop.
    #[test]
    fn grouped_pixels_equal_the_kernels_per_pixel_loop() {
        let mut rng = Rng::new(41);
        let mut w = vec![0.0f32; V * CODES];
        for p in (0..V).filter(|p| p % 5 != 2) {
            for c in 0..CODES {
                if rng.f32() < 0.6 {
                    w[p * CODES + c] = rng.f32();
                }
            }
        }
        let mask: Vec<u32> = (0..V).map(|_| rng.below(ROWS as u64) as u32).collect();
        let bg: Vec<f32> = (0..ROWS * CODES).map(|_| rng.normal()).collect();
        let mut gram: Vec<f32> = (0..CODES * CODES).map(|_| rng.normal()).collect();
        for i in 0..CODES {
            gram[i * CODES + i] = 20.0 + rng.f32();
        }
        let out = run(&w, &mask, &bg, &gram);
        assert!(out.1.iter().any(|&r| r != 1.0) && out.1.contains(&1.0));
        assert_eq!(bits_of(&out), per_pixel(&w, &mask, &bg, &gram));
        gram[CODES + 7] = f32::INFINITY;
        let out = run(&w, &mask, &bg, &gram);
        assert!(
            out.0.iter().any(|v| v.is_nan()),
            "an infinite entry poisons pixels"
        );
        assert_eq!(bits_of(&out), per_pixel(&w, &mask, &bg, &gram));
    }
}
