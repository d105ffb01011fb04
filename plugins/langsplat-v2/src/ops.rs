//! Device ops of LangSplatV2 training: each a CUDA C kernel (`kernels/v2.cu`) plus a
//! native CPU implementation, run by `Backend::run_op` on any backend.
//!
//! | op | items | arguments |
//! |---|---|---|
//! | [`TopKOp`] | N | logits, idx (w), val (w), dense (w) |
//! | [`TopKBackwardOp`] | N | idx, val, d_dense, d_logits (w) |
//! | [`AdamSelectOp`] | N | logits (rw), m (rw), v (rw), idx (rw), val (rw), d_val, vis, last (w), Adam's `step`, `step_size`, `inv_sqrt_bc2`, `beta1`, `beta2`, `eps` |
//! | [`CatchUpOp`] | N | logits (rw), m (rw), v (rw), idx (rw), val (rw), vis, last (rw), `target`, `lr`, `beta1`, `beta2`, `eps` |
//! | [`GatherAddOp`] | N | idx, d_dense, d_val (+=) |
//! | [`PrepOp`] | rows·C + C² + rows | codebook, table, bg (w), gram (w), gnorm (w), `dim` |
//! | [`CosineOp`] | V | w, mask, bg, gram, gnorm, d_w (w), rho (w), coef (w), `grad_scale` |
//! | [`AccOp`] | [`ACC_BLOCKS`]·[`ACC_THREADS`] | w, mask, coef, u (w), s (w), part (scratch), count (rw), `pixels`, `rows` |
//! | [`CodebookGradOp`] | C·dim | u, s, table, codebook, d_codebook (+=), `rows` |
//! | [`VisBitsOp`] | ⌈N/32⌉ | probe, bits (w), `N` |
//! | [`VisOrOp`] | N | bits, vis (rw) |
//! | [`SumOp`] | [`SUM_THREADS`] | rho, loss (w), `n`, `slot`, `scale`, `accumulate` |
//!
//! C = [`CODES`], K = [`TOP_K`]; (w) marks written buffers, `name` a scalar. A
//! kernel trusts index data (mask rows, code indices) and size scalars; the CPU
//! implementations check them and fail instead. Every op is deterministic; the CPU
//! and simt results agree bit for bit except [`AccOp`] (blocked sums on the CPU).

mod acc;
mod adam;
mod cosine;
mod lazy;
mod topk;
mod vis;

pub use acc::{ACC_BLOCKS, ACC_THREADS, AccOp, CodebookGradOp};
pub use adam::{
    AdamSelectBufs, AdamSelectOp, GatherAddOp, StepConstants, adam_select_row, pow_int,
};
pub use cosine::{CosineOp, PixelCosine, PrepOp, cosine_pixel};
pub use lazy::{CatchUpOp, Constants, Hyper, catch_up_row};
pub use topk::{
    TopKBackwardOp, TopKOp, select_row, select_row_hinted, topk_backward_row, topk_row,
};
pub use vis::{VIS_WORD, VisBitsOp, VisOrOp, vis_words};

use lsplat_device::{DeviceError, DeviceOp, HostArgs, HostPool, OpKernel, Result};

use crate::{CODES, TINY_NORM_SQ, TOP_K};

const _: () = assert!(CODES.is_multiple_of(DOT_LANES));

/// The plugin's name (its ops' `plugin`).
pub const PLUGIN: &str = "langsplat-v2";

/// Every op of the plugin (sizes are placeholders: for compiling their kernels).
pub fn all() -> Vec<Box<dyn lsplat_device::DeviceOp>> {
    vec![
        Box::new(TopKOp { gaussians: 0 }),
        Box::new(TopKBackwardOp { gaussians: 0 }),
        Box::new(AdamSelectOp { gaussians: 0 }),
        Box::new(GatherAddOp { gaussians: 0 }),
        Box::new(CatchUpOp { gaussians: 0 }),
        Box::new(PrepOp { rows: 0, dim: 0 }),
        Box::new(CosineOp { rows: 0, pixels: 0 }),
        Box::new(AccOp { rows: 0, pixels: 0 }),
        Box::new(CodebookGradOp { rows: 0, dim: 0 }),
        Box::new(VisBitsOp { gaussians: 0 }),
        Box::new(VisOrOp { gaussians: 0 }),
        Box::new(SumOp),
    ]
}

/// Threads of the single block that sums the per-pixel losses (`LV2_SUM_THREADS`).
pub const SUM_THREADS: usize = 256;

const SOURCE: &str = include_str!("../kernels/v2.cu");

/// The kernel `entry` of `kernels/v2.cu`, with the plugin's constants as defines.
fn kernel(entry: &'static str, block: u32) -> OpKernel {
    OpKernel {
        source: SOURCE,
        entry,
        block,
        defines: vec![
            ("LV2_CODES".into(), format!("{CODES}u")),
            ("LV2_K".into(), format!("{TOP_K}u")),
            ("LV2_SUM_THREADS".into(), format!("{SUM_THREADS}u")),
            ("LV2_ACC_THREADS".into(), format!("{ACC_THREADS}u")),
            ("LV2_DOT_LANES".into(), format!("{DOT_LANES}u")),
            ("LV2_VIS_WORD".into(), format!("{VIS_WORD}u")),
            ("LV2_EXP_MIN".into(), format!("{:e}", topk::EXP_MIN)),
            ("LV2_LOG2E".into(), format!("{:e}", topk::LOG2E)),
            ("LV2_LN2_HI".into(), format!("{:e}", topk::LN2_HI)),
            ("LV2_LN2_LO".into(), format!("{:e}", topk::LN2_LO)),
            ("LV2_EXP_DEGREE".into(), format!("{}u", topk::EXP_DEGREE)),
            ("LV2_EXP_COEFS".into(), exp_coefs()),
            ("LV2_TINY_NORM_SQ".into(), format!("{TINY_NORM_SQ:e}")),
        ],
    }
}

/// [`topk::EXP_COEFS`] as a C initializer, each written so that it parses back to the
/// same double.
fn exp_coefs() -> String {
    let c: Vec<String> = topk::EXP_COEFS.iter().map(|c| format!("{c:e}")).collect();
    format!("{{{}}}", c.join(", "))
}

/// Threads per block of the per-item kernels.
const BLOCK: u32 = 256;

/// `lens` must have `count` entries.
fn arity(op: &'static str, lens: &[usize], count: usize) -> Result<()> {
    if lens.len() == count {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{} arguments, {count} expected", lens.len()),
        ))
    }
}

/// `items` must be `expected` (what the op's sizes imply).
fn items_are(op: &'static str, items: usize, expected: usize, what: &str) -> Result<()> {
    if items == expected {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("items = {items}, the op was made for {expected} ({what})"),
        ))
    }
}

/// Buffer `what` must hold at least `a·b` elements.
fn need(op: &'static str, what: &str, got: usize, a: usize, b: usize) -> Result<()> {
    lsplat_device::check::at_least(op, what, got, a.saturating_mul(b))
}

/// A size scalar must equal the op's field.
fn scalar_is(op: &'static str, what: &str, got: u32, want: usize) -> Result<()> {
    if got as usize == want {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{what} = {got}, the op was made for {want}"),
        ))
    }
}

/// Every entry of `data` must be below `bound`.
fn all_below(op: &'static str, what: &str, data: &[u32], bound: usize) -> Result<()> {
    match data.iter().position(|&v| v as usize >= bound) {
        None => Ok(()),
        Some(p) => Err(DeviceError::shape(
            op,
            format!("{what}[{p}] = {} is not below {bound}", data[p]),
        )),
    }
}

/// Partial sums of [`dot64`] (`LV2_DOT_LANES`): element j goes to partial j mod 8.
pub const DOT_LANES: usize = 8;

/// f64 dot product as `lv2_dot` sums it: [`DOT_LANES`] partial sums, element j into
/// partial j mod [`DOT_LANES`] in index order, then the partials added pairwise
/// ((0+1)+(2+3))+((4+5)+(6+7)). The partials are independent, so the CPU evaluates
/// them as vector lanes with the kernel's bits.
#[inline(always)]
fn dot64(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (ca, cb) = (
        a[..n].chunks_exact(DOT_LANES),
        b[..n].chunks_exact(DOT_LANES),
    );
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut acc = [0.0f64; DOT_LANES];
    for (x, y) in ca.zip(cb) {
        for l in 0..DOT_LANES {
            acc[l] += f64::from(x[l]) * f64::from(y[l]);
        }
    }
    for ((o, &x), &y) in acc.iter_mut().zip(ra).zip(rb) {
        *o += f64::from(x) * f64::from(y);
    }
    pairwise(acc)
}

/// The partial sums of [`dot64`] added pairwise: ((0+1)+(2+3))+((4+5)+(6+7))
/// (`lv2_pairwise`).
#[inline(always)]
fn pairwise(mut acc: [f64; DOT_LANES]) -> f64 {
    let mut step = 1;
    while step < DOT_LANES {
        for i in (0..DOT_LANES).step_by(2 * step) {
            acc[i] += acc[i + step];
        }
        step *= 2;
    }
    acc[0]
}

/// Σ_c w_c·x_c over the codes with w_c ≠ 0 (the kernels' sums), in [`dot64`]'s order:
/// term c into partial c mod [`DOT_LANES`], then [`pairwise`]. Unless `SKIP`, the
/// terms with w_c = 0 are added too: for finite x they are exact zeros, which leave a
/// partial's bits unchanged (a partial that starts at +0 never becomes −0), and the
/// loop has no branch.
#[inline(always)]
fn sum_nz<const SKIP: bool>(w: &[f64; CODES], x: &[f64; CODES]) -> f64 {
    let mut acc = [0.0f64; DOT_LANES];
    for c0 in (0..CODES).step_by(DOT_LANES) {
        for l in 0..DOT_LANES {
            let (wc, xc) = (w[c0 + l], x[c0 + l]);
            if !SKIP || wc != 0.0 {
                acc[l] += wc * xc;
            }
        }
    }
    pairwise(acc)
}

/// `loss[slot] (+)= scale · Σ rho[..n]` in the kernel's fixed order. Arguments:
/// `[0]` rho, `[1]` loss (written), `[2]` n, `[3]` slot, `[4]` scale (f32),
/// `[5]` accumulate (0/1); items = [`SUM_THREADS`].
#[derive(Debug)]
pub struct SumOp;

impl DeviceOp for SumOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_sum"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_sum", SUM_THREADS as u32)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        if items != SUM_THREADS || lens.len() != 6 {
            return Err(DeviceError::shape(
                self.name(),
                format!("runs as one block of {SUM_THREADS} items with 6 arguments"),
            ));
        }
        Ok(())
    }
    fn run_cpu(&self, _items: usize, a: &mut HostArgs<'_>, _pool: &dyn HostPool) -> Result<()> {
        let n = self.name();
        let rho = a.f32(0)?;
        let loss = a.f32_mut(1)?;
        let (count, slot) = (a.scalar_u32(2)? as usize, a.scalar_u32(3)? as usize);
        let (scale, accumulate) = (a.scalar_f32(4)?, a.scalar_u32(5)? != 0);
        need(n, "rho", rho.len(), count, 1)?;
        need(n, "loss", loss.len(), slot + 1, 1)?;
        let mut part = [0.0f64; SUM_THREADS];
        for (t, p) in part.iter_mut().enumerate() {
            *p = rho[..count]
                .iter()
                .skip(t)
                .step_by(SUM_THREADS)
                .fold(0.0, |a, &v| a + f64::from(v));
        }
        let mut w = SUM_THREADS / 2;
        while w > 0 {
            for t in 0..w {
                part[t] += part[t + w];
            }
            w /= 2;
        }
        let v = (part[0] * f64::from(scale)) as f32;
        loss[slot] = if accumulate { loss[slot] + v } else { v };
        Ok(())
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_adam;
#[cfg(test)]
mod tests_checks;
#[cfg(test)]
mod tests_lazy;
#[cfg(test)]
mod tests_run;
