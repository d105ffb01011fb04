//! Lazy Adam over the logits (`lv2_catch_up`). A Gaussian that no batch camera sees
//! has a zero logit gradient, and its Adam step only decays m and v and keeps moving
//! the logits by momentum. [`super::AdamSelectOp`] skips such Gaussians; this op
//! replays their missed zero-gradient steps, one by one with each step's constants,
//! before a camera sees them again (and before the model is read). Each replayed step
//! is the dense step's arithmetic with `g = 0`, so the result is the dense Adam's bit
//! for bit, while a step reads and writes only the rows its cameras see.

use std::ops::RangeInclusive;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};
use multiversion::multiversion;

use super::adam::{StepConstants, adam_row, for_spans};
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

/// Steps whose constants [`Constants`] keeps at hand: a Gaussian out of sight for
/// fewer steps (most of them) replays from the table.
const RECENT: usize = 64;

/// Adam's per-step constants for a replay up to step `target`: those of the last
/// [`RECENT`] steps computed once, older ones on demand (the same values).
#[derive(Clone, Debug)]
pub struct Constants {
    h: Hyper,
    /// The first step held; `table[i]` is step `first + i`.
    first: u32,
    table: [(f32, f32); RECENT],
}

impl Constants {
    /// The constants of steps `target + 1 − RECENT ..= target` (those ≥ 1).
    pub fn new(h: Hyper, target: u32) -> Self {
        let first = target.saturating_sub(RECENT as u32 - 1).max(1);
        let mut table = [(0.0, 0.0); RECENT];
        for (t, e) in (first..=target).zip(table.iter_mut()) {
            let k = StepConstants::at(h.lr, h.beta1, h.beta2, h.eps, t);
            *e = (k.step_size, k.inv_sqrt_bc2);
        }
        Constants { h, first, table }
    }

    /// The constants of step `t` ≥ 1 ([`StepConstants::at`]).
    #[inline(always)]
    pub fn at(&self, t: u32) -> StepConstants {
        let h = &self.h;
        match t.checked_sub(self.first).map(|i| i as usize) {
            Some(i) if i < RECENT => StepConstants {
                step_size: self.table[i].0,
                inv_sqrt_bc2: self.table[i].1,
                beta1: h.beta1,
                beta2: h.beta2,
                eps: h.eps,
            },
            _ => StepConstants::at(h.lr, h.beta1, h.beta2, h.eps, t),
        }
    }
}

/// Replays Adam's `steps` (for a Gaussian last updated at step `last`, the steps
/// `last + 1 ..= target`) on one Gaussian with a zero gradient, then selects its
/// top-k from the updated logits. Returns whether anything was replayed (nothing
/// when `steps` is empty).
#[inline(always)]
pub fn catch_up_row(
    logits: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    idx: &mut [u32],
    val: &mut [f32],
    steps: RangeInclusive<u32>,
    consts: &Constants,
) -> bool {
    if steps.is_empty() {
        return false;
    }
    let zero = [0.0f32; CODES];
    for t in steps {
        adam_row(logits, m, v, &zero, &consts.at(t));
    }
    let (si, sv) = select_row_hinted(&logits[..CODES], idx);
    idx[..TOP_K].copy_from_slice(&si);
    val[..TOP_K].copy_from_slice(&sv);
    true
}

/// [`catch_up_row`] for consecutive Gaussians (`vis`'s length; every slice starts at
/// the first of them) with `vis != 0` and `last < target`; their `last` becomes
/// `target`. Compiled for the CPU's widest vector unit as well (the same operations,
/// so the same bits).
#[multiversion(targets("x86_64+avx2+fma"))]
fn catch_up_rows(
    p: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    idx: &mut [u32],
    val: &mut [f32],
    vis: &[f32],
    last: &mut [u32],
    target: u32,
    consts: &Constants,
) {
    for (g, &seen) in vis.iter().enumerate() {
        if seen != 0.0
            && catch_up_row(
                &mut p[g * CODES..][..CODES],
                &mut m[g * CODES..][..CODES],
                &mut v[g * CODES..][..CODES],
                &mut idx[g * TOP_K..][..TOP_K],
                &mut val[g * TOP_K..][..TOP_K],
                last[g] + 1..=target,
                consts,
            )
        {
            last[g] = target;
        }
    }
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
            0,
            0,
            0,
            0,
            0,
        ];
        self.check(items, &lens)?;
        all_below(n, "idx", &idx[..items * TOP_K], CODES)?;
        let consts = Constants::new(h, target);
        // Most spans are all unseen or all current: nothing to lock there.
        let wanted = |span: std::ops::Range<usize>, last: &[u32]| {
            vis[span]
                .iter()
                .zip(last)
                .any(|(&s, &l)| s != 0.0 && l < target)
        };
        for_spans(
            pool,
            items,
            logits,
            [m, v],
            idx,
            val,
            last,
            &wanted,
            &|span, r| {
                let vis = &vis[span];
                catch_up_rows(r.p, r.m, r.v, r.idx, r.val, vis, r.last, target, &consts);
            },
        );
        Ok(())
    }
}
