//! Lazy Adam over the logits (`lv2_catch_up`). A Gaussian that no batch camera sees
//! has a zero logit gradient, and its Adam step only decays m and v and keeps moving
//! the logits by momentum. [`super::AdamSelectOp`] skips such Gaussians; this op
//! replays their missed zero-gradient steps, one by one with each step's constants,
//! before a camera sees them again (and before the model is read). Each replayed step
//! is the dense step's arithmetic with `g = 0`, so the result is the dense Adam's bit
//! for bit, while a step reads and writes only the rows its cameras see.

use std::ops::RangeInclusive;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};

use super::adam::{CHUNK_ROWS, Chunked, StepConstants, adam_row, chunks_of};
use super::topk::select_row_hinted;
use super::{BLOCK, PLUGIN, all_below, arity, items_are, kernel, need};
use crate::{CODES, TOP_K};

/// Adam's hyper-parameters without the step (the replay derives each step's
/// constants with [`StepConstants::at`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    /// Learning rate.
    pub lr: f32,
    /// β₁.
    pub beta1: f32,
    /// β₂.
    pub beta2: f32,
    /// ε.
    pub eps: f32,
}

/// Replays Adam's `steps` (for a Gaussian last updated at step `last`, the steps
/// `last + 1 ..= target`) on one Gaussian with a zero gradient, then selects its
/// top-k from the updated logits. Returns whether anything was replayed (nothing
/// when `steps` is empty).
pub fn catch_up_row(
    logits: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    idx: &mut [u32],
    val: &mut [f32],
    steps: RangeInclusive<u32>,
    h: &Hyper,
) -> bool {
    if steps.is_empty() {
        return false;
    }
    let zero = [0.0f32; CODES];
    for t in steps {
        let k = StepConstants::at(h.lr, h.beta1, h.beta2, h.eps, t);
        adam_row(logits, m, v, &zero, &k);
    }
    let (si, sv) = select_row_hinted(&logits[..CODES], idx);
    idx[..TOP_K].copy_from_slice(&si);
    val[..TOP_K].copy_from_slice(&sv);
    true
}

/// [`catch_up_row`] for every Gaussian with `vis != 0`. Arguments: `[0]` logits,
/// `[1]` m, `[2]` v `[N·C]` (updated), `[3]` idx, `[4]` val `[N·K]` (updated where
/// replayed), `[5]` vis `[N]`, `[6]` last `[N]` (u32: set to `target` where
/// replayed), then `[7]` target (u32) and f32 scalars `[8]` lr, `[9]` β₁, `[10]` β₂,
/// `[11]` ε; items = N.
#[derive(Debug)]
pub struct CatchUpOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl CatchUpOp {
    /// The f32 scalar arguments.
    pub fn scalars(h: &Hyper) -> [f32; 4] {
        [h.lr, h.beta1, h.beta2, h.eps]
    }
}

impl DeviceOp for CatchUpOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_catch_up"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_catch_up", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 12)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        for (i, what) in ["logits", "m", "v"].into_iter().enumerate() {
            need(n, what, lens[i], items, CODES)?;
        }
        need(n, "idx", lens[3], items, TOP_K)?;
        need(n, "val", lens[4], items, TOP_K)?;
        need(n, "vis", lens[5], items, 1)?;
        need(n, "last", lens[6], items, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let n = self.name();
        let logits = a.f32_mut(0)?;
        let (m, v) = (a.f32_mut(1)?, a.f32_mut(2)?);
        let (idx, val) = (a.u32_mut(3)?, a.f32_mut(4)?);
        let (vis, last) = (a.f32(5)?, a.u32_mut(6)?);
        let target = a.scalar_u32(7)?;
        let h = Hyper {
            lr: a.scalar_f32(8)?,
            beta1: a.scalar_f32(9)?,
            beta2: a.scalar_f32(10)?,
            eps: a.scalar_f32(11)?,
        };
        let lens = [
            logits.len(),
            m.len(),
            v.len(),
            idx.len(),
            val.len(),
            vis.len(),
            last.len(),
        ];
        self.check(items, &[&lens[..], &[0; 5]].concat())?;
        all_below(n, "idx", &idx[..items * TOP_K], CODES)?;
        let (m, v) = (Chunked::new(m, CODES), Chunked::new(v, CODES));
        let (idx, val) = (Chunked::new(idx, TOP_K), Chunked::new(val, TOP_K));
        let last = Chunked::new(last, 1);
        pool.for_rows(items, &mut logits[..items * CODES], CODES, &|_, rows, p| {
            let base = rows.start;
            for (c, span) in chunks_of(rows) {
                let mut lc = last.lock(c);
                let lo = c * CHUNK_ROWS;
                // Most rows are either unseen or current: lock the rest only when needed.
                if span.clone().all(|g| vis[g] == 0.0 || lc[g - lo] >= target) {
                    continue;
                }
                let (mut mc, mut vc) = (m.lock(c), v.lock(c));
                let (mut ic, mut wc) = (idx.lock(c), val.lock(c));
                for g in span {
                    if vis[g] == 0.0 {
                        continue;
                    }
                    let (r, l) = (g - base, g - lo);
                    if catch_up_row(
                        &mut p[r * CODES..][..CODES],
                        &mut mc[l * CODES..][..CODES],
                        &mut vc[l * CODES..][..CODES],
                        &mut ic[l * TOP_K..][..TOP_K],
                        &mut wc[l * TOP_K..][..TOP_K],
                        lc[l] + 1..=target,
                        &h,
                    ) {
                        lc[l] = target;
                    }
                }
            }
            0.0
        });
        Ok(())
    }
}
