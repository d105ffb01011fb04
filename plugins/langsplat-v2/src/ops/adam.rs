//! The step over the logits in one pass per Gaussian (`lv2_adam_select`): the exact
//! top-k gradient of its logits from the gradient of its k weights, Adam on its
//! `CODES` logits, and the top-k selection of the updated logits that the next step
//! composites. Equal, bit for bit, to `lv2_topk_backward` + the engine's Adam +
//! `lv2_topk` over the same buffers, without the `[N, CODES]` gradient between them;
//! and [`GatherAddOp`], the weight gradient of a camera composited densely.

use std::ops::Range;
use std::sync::Mutex;

use lsplat_device::{
    AdamParams, Backend, DeviceOp, HostArgs, HostPool, OpArg, OpKernel, Result, Scalar,
};
use multiversion::multiversion;

use super::topk::select_row_hinted;
use super::{BLOCK, PLUGIN, all_below, arity, items_are, kernel, need};
use crate::{CODES, TOP_K};

/// Adam's per-step constants, as the engine's Adam derives them from [`AdamParams`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepConstants {
    /// lr / (1 − β₁ᵗ).
    pub step_size: f32,
    /// 1 / √(1 − β₂ᵗ).
    pub inv_sqrt_bc2: f32,
    /// β₁.
    pub beta1: f32,
    /// β₂.
    pub beta2: f32,
    /// ε.
    pub eps: f32,
}

impl StepConstants {
    /// The constants of step `hp.step` (PyTorch's bias corrections, in f64).
    pub fn new(hp: &AdamParams) -> Self {
        Self::at(hp.lr, hp.beta1, hp.beta2, hp.eps, hp.step.max(1))
    }

    /// The constants of step `t` ≥ 1 at learning rate `lr`, as [`Self::new`] and the
    /// kernels (`lv2_step_constants`) derive them: βᵗ by [`pow_int`], then
    /// `lr / (1 − β₁ᵗ)` and `1 / √(1 − β₂ᵗ)` in f64, rounded to f32.
    pub fn at(lr: f32, beta1: f32, beta2: f32, eps: f32, t: u32) -> Self {
        let bc1 = 1.0 - pow_int(f64::from(beta1), t);
        let bc2 = 1.0 - pow_int(f64::from(beta2), t);
        StepConstants {
            step_size: (f64::from(lr) / bc1) as f32,
            inv_sqrt_bc2: (1.0 / bc2.sqrt()) as f32,
            beta1,
            beta2,
            eps,
        }
    }
}

/// `xⁿ` by binary powering from the low bit, the order of `f64::powi`'s runtime
/// routine (so the engine's Adam, which uses `powi`, gets the same bits), written
/// out so that a kernel can repeat it exactly.
pub fn pow_int(mut x: f64, mut n: u32) -> f64 {
    let mut r = 1.0;
    loop {
        if n & 1 == 1 {
            r *= x;
        }
        n >>= 1;
        if n == 0 {
            return r;
        }
        x *= x;
    }
}

/// Adam on one row of [`CODES`] logits with gradient `g`: the engine's `ls_adam`
/// with grad_scale 1, operation for operation (`lv2_adam_row`).
#[inline(always)]
pub(super) fn adam_row(
    p: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    g: &[f32; CODES],
    k: &StepConstants,
) {
    let (p, m, v) = (&mut p[..CODES], &mut m[..CODES], &mut v[..CODES]);
    for c in 0..CODES {
        let gi = g[c];
        let mi = k.beta1 * m[c] + (1.0 - k.beta1) * gi;
        let vi = k.beta2 * v[c] + (1.0 - k.beta2) * gi * gi;
        m[c] = mi;
        v[c] = vi;
        p[c] -= k.step_size * mi / (vi.sqrt() * k.inv_sqrt_bc2 + k.eps);
    }
}

/// One Gaussian of [`AdamSelectOp`]: `idx`/`val` (its current selection, codes below
/// [`CODES`]) and `d_val` (the loss gradient of its weights) give the logit gradient
/// (zero off the selection); Adam updates `logits`, `m`, `v` (`[CODES]`); `idx`/`val`
/// become the selection of the updated logits. The kernel's operations in order (the
/// selection starts from the current one, [`select_row_hinted`]: the same result).
#[inline(always)]
pub fn adam_select_row(
    logits: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    idx: &mut [u32],
    val: &mut [f32],
    d_val: &[f32],
    k: &StepConstants,
) {
    let mut g = [0.0f32; CODES];
    let mut dot = 0.0f64;
    for (&w, &d) in val[..TOP_K].iter().zip(&d_val[..TOP_K]) {
        dot += f64::from(w) * f64::from(d);
    }
    for ((&c, &w), &d) in idx[..TOP_K].iter().zip(&val[..TOP_K]).zip(&d_val[..TOP_K]) {
        g[c as usize] += (f64::from(w) * (f64::from(d) - dot)) as f32;
    }
    adam_row(logits, m, v, &g, k);
    let (si, sv) = select_row_hinted(&logits[..CODES], idx);
    idx[..TOP_K].copy_from_slice(&si);
    val[..TOP_K].copy_from_slice(&sv);
}

/// [`adam_select_row`] for consecutive Gaussians (`vis`'s length; every slice starts
/// at the first of them), skipping those with `vis == 0`; `last` is set to `step`
/// where a row is updated. Compiled for the CPU's widest vector unit as well (the
/// same operations, so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn adam_rows(
    p: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    idx: &mut [u32],
    val: &mut [f32],
    d_val: &[f32],
    vis: &[f32],
    last: &mut [u32],
    step: u32,
    k: &StepConstants,
) {
    for (g, &seen) in vis.iter().enumerate() {
        if seen == 0.0 {
            continue;
        }
        adam_select_row(
            &mut p[g * CODES..][..CODES],
            &mut m[g * CODES..][..CODES],
            &mut v[g * CODES..][..CODES],
            &mut idx[g * TOP_K..][..TOP_K],
            &mut val[g * TOP_K..][..TOP_K],
            &d_val[g * TOP_K..][..TOP_K],
            k,
        );
        last[g] = step;
    }
}

/// Rows a worker locks at once in the buffers [`HostPool::for_rows`] does not split.
const CHUNK_ROWS: usize = 256;

/// A buffer of rows split into chunks of [`CHUNK_ROWS`] rows, each behind its own lock:
/// workers own disjoint row ranges, so a lock is contended at most at a range's ends.
struct Chunked<'a, T>(Vec<Mutex<&'a mut [T]>>);

impl<'a, T> Chunked<'a, T> {
    fn new(buf: &'a mut [T], row_len: usize) -> Self {
        Chunked(
            buf.chunks_mut(CHUNK_ROWS * row_len)
                .map(Mutex::new)
                .collect(),
        )
    }

    fn lock(&self, chunk: usize) -> std::sync::MutexGuard<'_, &'a mut [T]> {
        self.0[chunk].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The chunks a row range meets, each with its rows.
fn chunks_of(rows: Range<usize>) -> impl Iterator<Item = (usize, Range<usize>)> {
    let first = rows.start / CHUNK_ROWS;
    let last = rows.end.div_ceil(CHUNK_ROWS);
    (first..last).map(move |c| {
        let lo = rows.start.max(c * CHUNK_ROWS);
        let hi = rows.end.min((c + 1) * CHUNK_ROWS);
        (c, lo..hi)
    })
}

/// One span of consecutive Gaussians of a pass over the logits: every slice starts
/// at the span's first Gaussian.
pub(super) struct Rows<'s> {
    pub p: &'s mut [f32],
    pub m: &'s mut [f32],
    pub v: &'s mut [f32],
    pub idx: &'s mut [u32],
    pub val: &'s mut [f32],
    pub last: &'s mut [u32],
}

/// Runs `f` on the pool over spans of consecutive Gaussians (each within one
/// [`CHUNK_ROWS`] chunk) with their rows of the logits `[N·C]`, `m`, `v` `[N·C]`,
/// `idx`, `val` `[N·K]` and `last` `[N]`, for the spans where `wanted(span, last)`
/// holds (`last` is the span's, locked first: the other rows are locked only then).
pub(super) fn for_spans(
    pool: &dyn HostPool,
    items: usize,
    logits: &mut [f32],
    [m, v]: [&mut [f32]; 2],
    idx: &mut [u32],
    val: &mut [f32],
    last: &mut [u32],
    wanted: &(dyn Fn(Range<usize>, &[u32]) -> bool + Sync),
    f: &(dyn Fn(Range<usize>, Rows<'_>) + Sync),
) {
    let (m, v) = (Chunked::new(m, CODES), Chunked::new(v, CODES));
    let (idx, val) = (Chunked::new(idx, TOP_K), Chunked::new(val, TOP_K));
    let last = Chunked::new(last, 1);
    pool.for_rows(items, &mut logits[..items * CODES], CODES, &|_, rows, p| {
        let base = rows.start;
        for (c, span) in chunks_of(rows) {
            let (r, l, n) = (span.start - base, span.start - c * CHUNK_ROWS, span.len());
            let mut lc = last.lock(c);
            if !wanted(span.clone(), &lc[l..l + n]) {
                continue;
            }
            let (mut mc, mut vc) = (m.lock(c), v.lock(c));
            let (mut ic, mut wc) = (idx.lock(c), val.lock(c));
            f(
                span,
                Rows {
                    p: &mut p[r * CODES..(r + n) * CODES],
                    m: &mut mc[l * CODES..(l + n) * CODES],
                    v: &mut vc[l * CODES..(l + n) * CODES],
                    idx: &mut ic[l * TOP_K..(l + n) * TOP_K],
                    val: &mut wc[l * TOP_K..(l + n) * TOP_K],
                    last: &mut lc[l..l + n],
                },
            );
        }
        0.0
    });
}

/// Top-k backward + Adam + top-k selection per visible Gaussian. Arguments: `[0]`
/// logits `[N·C]` (updated), `[1]` m, `[2]` v `[N·C]` (updated), `[3]` idx `[N·K]`
/// (u32, read then written), `[4]` val `[N·K]` (read then written), `[5]` d_val
/// `[N·K]`, `[6]` vis `[N]` (a Gaussian with `vis == 0` is skipped: it has no
/// gradient, and [`super::CatchUpOp`] replays its zero-gradient steps before it is
/// next seen), `[7]` last `[N]` (u32: set to `step` where the row is updated), then
/// `[8]` step (u32, Adam's t), and f32 scalars `[9]` step_size, `[10]` inv_sqrt_bc2,
/// `[11]` β₁, `[12]` β₂, `[13]` ε ([`StepConstants`] of step t); items = N.
#[derive(Debug)]
pub struct AdamSelectOp {
    /// Gaussians N.
    pub gaussians: usize,
}

/// The buffers of an [`AdamSelectOp`] pass, in the op's argument order.
pub struct AdamSelectBufs<'a, B: Backend> {
    pub logits: &'a mut B::Buf<f32>,
    pub m: &'a mut B::Buf<f32>,
    pub v: &'a mut B::Buf<f32>,
    pub idx: &'a mut B::Buf<u32>,
    pub val: &'a mut B::Buf<f32>,
    pub d_val: &'a B::Buf<f32>,
    pub vis: &'a B::Buf<f32>,
    pub last: &'a mut B::Buf<u32>,
}

impl AdamSelectOp {
    /// The f32 scalar arguments of step `k`.
    pub fn scalars(k: &StepConstants) -> [f32; 5] {
        [k.step_size, k.inv_sqrt_bc2, k.beta1, k.beta2, k.eps]
    }

    /// One pass on `dev`: Adam step `step` (constants `k`) over the Gaussians with
    /// `vis != 0`, and their next selection.
    pub fn run<B: Backend>(
        &self,
        dev: &B,
        b: AdamSelectBufs<'_, B>,
        step: u32,
        k: &StepConstants,
    ) -> Result<()> {
        let [s0, s1, s2, s3, s4] = Self::scalars(k).map(|x| OpArg::Scalar(Scalar::F32(x)));
        let args = &mut [
            OpArg::F32Mut(b.logits),
            OpArg::F32Mut(b.m),
            OpArg::F32Mut(b.v),
            OpArg::U32Mut(b.idx),
            OpArg::F32Mut(b.val),
            OpArg::F32(b.d_val),
            OpArg::F32(b.vis),
            OpArg::U32Mut(b.last),
            OpArg::Scalar(Scalar::U32(step)),
            s0,
            s1,
            s2,
            s3,
            s4,
        ];
        dev.run_op(self, self.gaussians, args)
    }
}

impl DeviceOp for AdamSelectOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_adam_select"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_adam_select", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 14)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        for (i, what) in ["logits", "m", "v"].into_iter().enumerate() {
            need(n, what, lens[i], items, CODES)?;
        }
        for (i, what) in ["idx", "val", "d_val"].into_iter().enumerate() {
            need(n, what, lens[3 + i], items, TOP_K)?;
        }
        need(n, "vis", lens[6], items, 1)?;
        need(n, "last", lens[7], items, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let n = self.name();
        let logits = a.f32_mut(0)?;
        let (m, v) = (a.f32_mut(1)?, a.f32_mut(2)?);
        let idx = a.u32_mut(3)?;
        let (val, d_val) = (a.f32_mut(4)?, a.f32(5)?);
        let (vis, last) = (a.f32(6)?, a.u32_mut(7)?);
        let step = a.scalar_u32(8)?;
        let k = StepConstants {
            step_size: a.scalar_f32(9)?,
            inv_sqrt_bc2: a.scalar_f32(10)?,
            beta1: a.scalar_f32(11)?,
            beta2: a.scalar_f32(12)?,
            eps: a.scalar_f32(13)?,
        };
        let lens = [
            logits.len(),
            m.len(),
            v.len(),
            idx.len(),
            val.len(),
            d_val.len(),
            vis.len(),
            last.len(),
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        self.check(items, &lens)?;
        all_below(n, "idx", &idx[..items * TOP_K], CODES)?;
        for_spans(
            pool,
            items,
            logits,
            [m, v],
            idx,
            val,
            last,
            &|span, _| vis[span].iter().any(|&s| s != 0.0),
            &|span, r| {
                let d = &d_val[span.start * TOP_K..span.end * TOP_K];
                adam_rows(r.p, r.m, r.v, r.idx, r.val, d, &vis[span], r.last, step, &k);
            },
        );
        Ok(())
    }
}

/// `d_val[g·K + j] += d_dense[g·C + idx[g·K + j]]`: the weight gradient of a camera
/// composited through the dense `[N, C]` weights (a camera without an operator
/// cache). Arguments: `[0]` idx `[N·K]` (u32), `[1]` d_dense `[N·C]`, `[2]` d_val
/// `[N·K]` (added to); items = N.
#[derive(Debug)]
pub struct GatherAddOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl DeviceOp for GatherAddOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_gather_add"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_gather_add", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 3)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        need(n, "idx", lens[0], items, TOP_K)?;
        need(n, "d_dense", lens[1], items, CODES)?;
        need(n, "d_val", lens[2], items, TOP_K)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (idx, d_dense, d_val) = (a.u32(0)?, a.f32(1)?, a.f32_mut(2)?);
        self.check(items, &[idx.len(), d_dense.len(), d_val.len()])?;
        all_below(self.name(), "idx", &idx[..items * TOP_K], CODES)?;
        pool.for_rows(
            items,
            &mut d_val[..items * TOP_K],
            TOP_K,
            &|_, rows, out| {
                for g in rows.clone() {
                    let o = &mut out[(g - rows.start) * TOP_K..][..TOP_K];
                    for (d, &c) in o.iter_mut().zip(&idx[g * TOP_K..][..TOP_K]) {
                        *d += d_dense[g * CODES + c as usize];
                    }
                }
                0.0
            },
        );
        Ok(())
    }
}
