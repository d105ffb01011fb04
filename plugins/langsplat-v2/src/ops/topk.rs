//! Top-k sparse coefficients: forward (`lv2_topk`) and backward (`lv2_topk_backward`).

use std::sync::Mutex;

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};

use super::{BLOCK, PLUGIN, all_below, arity, items_are, kernel, need};
use crate::{CODES, TOP_K};

/// Whether logit `a` ranks strictly above `b` (NaN ranks lowest).
fn above(a: f32, b: f32) -> bool {
    !a.is_nan() && (b.is_nan() || a > b)
}

/// The top [`TOP_K`] of one Gaussian's `logits` (`[CODES]`): their codes in descending
/// logit order (ties to the lower index) and the softmax over just those logits. The
/// kernel's operations in order (`lv2_select`).
pub fn select_row(logits: &[f32]) -> ([u32; TOP_K], [f32; TOP_K]) {
    let mut si = [0u32; TOP_K];
    let mut sv = [0.0f32; TOP_K];
    let mut n = 0;
    for (c, &l) in (0u32..).zip(&logits[..CODES]) {
        if n == TOP_K && !above(l, sv[TOP_K - 1]) {
            continue;
        }
        // The kept logits are in descending order: `l` goes after the last one it
        // does not rank above (ties stay in index order); shift the rest down by one
        // (element by element: a `copy_within` here costs a memmove call per insert).
        let mut pos = n;
        while pos > 0 && above(l, sv[pos - 1]) {
            pos -= 1;
        }
        let mut j = n.min(TOP_K - 1);
        while j > pos {
            si[j] = si[j - 1];
            sv[j] = sv[j - 1];
            j -= 1;
        }
        si[pos] = c;
        sv[pos] = l;
        n = (n + 1).min(TOP_K);
    }
    let m = f64::from(sv[0]);
    let mut sum = 0.0f64;
    for &l in &sv {
        sum += (f64::from(l) - m).exp();
    }
    let mut val = [0.0f32; TOP_K];
    for (v, &l) in val.iter_mut().zip(&sv) {
        *v = ((f64::from(l) - m).exp() / sum) as f32;
    }
    (si, val)
}

/// One Gaussian of [`TopKOp`]: `logits` (`[CODES]`) → `idx`, `val` (`[TOP_K]`, as
/// [`select_row`]) and `dense` (`[CODES]`, zero except those values).
pub fn topk_row(logits: &[f32], idx: &mut [u32], val: &mut [f32], dense: &mut [f32]) {
    let (si, sv) = select_row(logits);
    let dense = &mut dense[..CODES];
    dense.fill(0.0);
    for ((oi, ov), (&c, &v)) in idx.iter_mut().zip(val.iter_mut()).zip(si.iter().zip(&sv)) {
        *oi = c;
        *ov = v;
        dense[c as usize] += v;
    }
}

/// One Gaussian of [`TopKBackwardOp`]: overwrites `d_logits` (`[CODES]`) with zeros
/// except dl_i = w_i (d_i − Σ_j w_j d_j) at the codes `idx` (all below [`CODES`]),
/// d_i = `d_dense[idx_i]`. The kernel's operations in order.
pub fn topk_backward_row(idx: &[u32], val: &[f32], d_dense: &[f32], d_logits: &mut [f32]) {
    let out = &mut d_logits[..CODES];
    out.fill(0.0);
    let mut dot = 0.0f64;
    for (&c, &w) in idx[..TOP_K].iter().zip(val) {
        dot += f64::from(w) * f64::from(d_dense[c as usize]);
    }
    for (&c, &w) in idx[..TOP_K].iter().zip(val) {
        let d = f64::from(d_dense[c as usize]);
        out[c as usize] += (f64::from(w) * (d - dot)) as f32;
    }
}

/// Rows copied at once from a block's stack buffer into the shared sparse outputs.
const CHUNK: usize = 64;

/// Top-k softmax per Gaussian (as `topk_forward` + `scatter_dense`). Arguments:
/// `[0]` logits `[N·C]`, `[1]` idx `[N·K]` (written, u32), `[2]` val `[N·K]`
/// (written), `[3]` dense `[N·C]` (written); items = N.
#[derive(Debug)]
pub struct TopKOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl DeviceOp for TopKOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_topk"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_topk", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 4)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        need(n, "logits", lens[0], items, CODES)?;
        need(n, "idx", lens[1], items, TOP_K)?;
        need(n, "val", lens[2], items, TOP_K)?;
        need(n, "dense", lens[3], items, CODES)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let logits = a.f32(0)?;
        let idx = a.u32_mut(1)?;
        let val = a.f32_mut(2)?;
        let dense = a.f32_mut(3)?;
        self.check(items, &[logits.len(), idx.len(), val.len(), dense.len()])?;
        let sparse = Mutex::new((&mut idx[..items * TOP_K], &mut val[..items * TOP_K]));
        pool.for_rows(items, &mut dense[..items * CODES], CODES, &|_, rows, d| {
            let (mut li, mut lv) = ([0u32; CHUNK * TOP_K], [0.0f32; CHUNK * TOP_K]);
            for start in rows.clone().step_by(CHUNK) {
                let end = (start + CHUNK).min(rows.end);
                for g in start..end {
                    let (j, k) = (g - start, g - rows.start);
                    topk_row(
                        &logits[g * CODES..][..CODES],
                        &mut li[j * TOP_K..][..TOP_K],
                        &mut lv[j * TOP_K..][..TOP_K],
                        &mut d[k * CODES..][..CODES],
                    );
                }
                let span = start * TOP_K..end * TOP_K;
                let used = span.len();
                let mut s = sparse.lock().unwrap_or_else(|e| e.into_inner());
                s.0[span.clone()].copy_from_slice(&li[..used]);
                s.1[span].copy_from_slice(&lv[..used]);
            }
            0.0
        });
        Ok(())
    }
}

/// The exact gradient of [`TopKOp`] (as `gather_sparse` + `topk_backward`).
/// Arguments: `[0]` idx `[N·K]` (u32), `[1]` val `[N·K]`, `[2]` d_dense `[N·C]`,
/// `[3]` d_logits `[N·C]` (overwritten); items = N.
#[derive(Debug)]
pub struct TopKBackwardOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl DeviceOp for TopKBackwardOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_topk_backward"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_topk_backward", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 4)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        need(n, "idx", lens[0], items, TOP_K)?;
        need(n, "val", lens[1], items, TOP_K)?;
        need(n, "d_dense", lens[2], items, CODES)?;
        need(n, "d_logits", lens[3], items, CODES)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (idx, val, d_dense) = (a.u32(0)?, a.f32(1)?, a.f32(2)?);
        let d_logits = a.f32_mut(3)?;
        let n = self.name();
        self.check(
            items,
            &[idx.len(), val.len(), d_dense.len(), d_logits.len()],
        )?;
        all_below(n, "idx", &idx[..items * TOP_K], CODES)?;
        pool.for_rows(
            items,
            &mut d_logits[..items * CODES],
            CODES,
            &|_, rows, out| {
                for g in rows.clone() {
                    let k = g - rows.start;
                    topk_backward_row(
                        &idx[g * TOP_K..][..TOP_K],
                        &val[g * TOP_K..][..TOP_K],
                        &d_dense[g * CODES..][..CODES],
                        &mut out[k * CODES..][..CODES],
                    );
                }
                0.0
            },
        );
        Ok(())
    }
}
