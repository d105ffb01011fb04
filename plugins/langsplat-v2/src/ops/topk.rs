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
    (si, softmax_top(&sv))
}

/// The softmax of a selection's logits (`sv`, descending), in f64 with each
/// exponential taken once ([`exp_le0`]).
#[inline(always)]
fn softmax_top(sv: &[f32; TOP_K]) -> [f32; TOP_K] {
    let m = f64::from(sv[0]);
    let mut e = [0.0f64; TOP_K];
    for (e, &l) in e.iter_mut().zip(sv) {
        *e = exp_le0(f64::from(l) - m);
    }
    let mut sum = 0.0f64;
    for &e in &e {
        sum += e;
    }
    let mut val = [0.0f32; TOP_K];
    for (v, &e) in val.iter_mut().zip(&e) {
        *v = (e / sum) as f32;
    }
    val
}

/// Below this, [`exp_le0`] returns 0 (e^-708 ≈ 3e-308 is still a normal f64).
pub const EXP_MIN: f64 = -708.0;
/// log₂e, and ln 2 split in a high part (its low bits zero) and the rest.
pub const LOG2E: f64 = std::f64::consts::LOG2_E;
pub const LN2_HI: f64 = 0.693_147_180_369_123_8;
pub const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// Degree of [`exp_le0`]'s Taylor polynomial: on |r| ≤ ln2/2 its remainder is below
/// 2⁻⁵⁷ relative.
pub const EXP_DEGREE: usize = 13;
/// 1/k! for k = 0..=[`EXP_DEGREE`], each a correctly rounded quotient (as the kernel's
/// defines carry them).
pub const EXP_COEFS: [f64; EXP_DEGREE + 1] = {
    let mut c = [1.0f64; EXP_DEGREE + 1];
    let mut k = 1;
    let mut fact = 1.0f64;
    while k <= EXP_DEGREE {
        fact *= k as f64;
        c[k] = 1.0 / fact;
        k += 1;
    }
    c
};

/// e^x for the softmax of a descending selection (x = l − max ≤ 0), identical on
/// every device (`lv2_exp`: the same operations, each product-sum fused): n =
/// ⌊x·log₂e + ½⌋, r = x − n·ln2 (two fused steps), a degree-13 Taylor polynomial in r
/// by Horner's rule, times 2ⁿ. Within a few ulp of the correctly rounded e^x; 0 below
/// [`EXP_MIN`]; NaN stays NaN. Branch-free, so the four exponentials of a selection
/// run as one vector.
#[inline(always)]
pub fn exp_le0(x: f64) -> f64 {
    let n = x.mul_add(LOG2E, 0.5).floor();
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    let mut p = EXP_COEFS[EXP_DEGREE];
    for k in (0..EXP_DEGREE).rev() {
        p = p.mul_add(r, EXP_COEFS[k]);
    }
    // n ∈ [−1022, 1023] wherever the result is used (x ≥ EXP_MIN).
    let scale = f64::from_bits(((n.clamp(-1022.0, 1023.0) as i64 + 1023) as u64) << 52);
    let e = p * scale;
    if x.is_nan() {
        x
    } else if x < EXP_MIN {
        0.0
    } else {
        e
    }
}

// The hinted selection keeps its codes in a u64 mask.
const _: () = assert!(CODES <= 64);

/// Whether logit `a` of code `ca` comes before logit `b` of code `cb` in the order
/// [`select_row`] selects by: descending, NaN last, ties in code order.
#[inline(always)]
fn before(a: f32, ca: u32, b: f32, cb: u32) -> bool {
    above(a, b) || (!above(b, a) && ca < cb)
}

/// [`select_row`] of `logits` when their selection is likely `hint` (the codes chosen
/// before the logits last moved): the same result for every input, since both take
/// the first [`TOP_K`] codes of one total order. The hinted codes (distinct, below
/// [`CODES`], else the full selection runs) are ordered and start the selection; one
/// branch-free pass over the row finds the codes at or above the least of them (when
/// none is NaN), and only those, in code order, are tried for insertion; usually
/// there are none or one.
#[inline(always)]
pub fn select_row_hinted(logits: &[f32], hint: &[u32]) -> ([u32; TOP_K], [f32; TOP_K]) {
    const LAST: usize = TOP_K - 1;
    let row = &logits[..CODES];
    let mut si = [0u32; TOP_K];
    let mut sv = [0.0f32; TOP_K];
    let mut members = 0u64;
    for (j, &c) in hint[..TOP_K].iter().enumerate() {
        if c as usize >= CODES || members >> c & 1 != 0 {
            return select_row(row);
        }
        members |= 1 << c;
        si[j] = c;
        sv[j] = row[c as usize];
    }
    for i in 1..TOP_K {
        let mut j = i;
        while j > 0 && before(sv[j], si[j], sv[j - 1], si[j - 1]) {
            si.swap(j, j - 1);
            sv.swap(j, j - 1);
            j -= 1;
        }
    }
    // The codes that may enter: at or above the least hinted logit (all when it is
    // NaN), found without branches; often there are none (a count tells).
    let least = sv[LAST];
    let mut enter = if least.is_nan() {
        !members
    } else {
        let count: u32 = row.iter().map(|&l| u32::from(l >= least)).sum();
        if count == TOP_K as u32 {
            return (si, softmax_top(&sv));
        }
        let at_least = (0..CODES).fold(0u64, |m, c| m | u64::from(row[c] >= least) << c);
        at_least & !members
    };
    while enter != 0 {
        let c = enter.trailing_zeros();
        enter &= enter - 1;
        let l = row[c as usize];
        if !before(l, c, sv[LAST], si[LAST]) {
            continue;
        }
        // The code it displaces need not be considered again: TOP_K codes precede it.
        let mut pos = LAST;
        while pos > 0 && before(l, c, sv[pos - 1], si[pos - 1]) {
            si[pos] = si[pos - 1];
            sv[pos] = sv[pos - 1];
            pos -= 1;
        }
        si[pos] = c;
        sv[pos] = l;
    }
    (si, softmax_top(&sv))
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

#[cfg(test)]
mod tests {
    use lsplat_core::Rng;

    use super::*;

    /// Distance in units in the last place between two positive finite doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// [`exp_le0`] against the platform's correctly rounded `exp` over [EXP_MIN, 0]
    /// (random points, the ends, integers and multiples of ln 2): within 2 ulp; 0
    /// below EXP_MIN and at −∞; NaN kept; e^0 = 1 exactly.
    #[test]
    fn exp_is_within_two_ulp_of_the_platform_exp() {
        let mut rng = Rng::new(3);
        let mut xs: Vec<f64> = (0..200_000)
            .map(|_| EXP_MIN * f64::from(rng.f32()).powi(3))
            .collect();
        xs.extend((0..=708).map(|k| -f64::from(k)));
        xs.extend((0..=1021).map(|k| -f64::from(k) * std::f64::consts::LN_2));
        xs.extend([EXP_MIN, -1e-300, -5e-324, -0.0, -0.34657359027997264, -1e-9]);
        let worst = xs.iter().map(|&x| ulps(exp_le0(x), x.exp())).max().unwrap();
        eprintln!("exp_le0: worst {worst} ulp over {} points", xs.len());
        assert!(worst <= 2, "{worst} ulp");
        // n·LN2_HI is exact for |n| < 2¹¹: its low 21 bits are zero.
        assert_eq!(LN2_HI.to_bits() & 0x1f_ffff, 0);
        assert_eq!(LN2_HI + LN2_LO, std::f64::consts::LN_2);
        assert_eq!(exp_le0(0.0).to_bits(), 1.0f64.to_bits());
        assert_eq!(exp_le0(-0.0).to_bits(), 1.0f64.to_bits());
        for x in [EXP_MIN - 1e-9, -745.2, -1e10, f64::NEG_INFINITY] {
            assert_eq!(exp_le0(x), 0.0, "{x}");
        }
        assert!(exp_le0(f64::NAN).is_nan());
    }

    /// A row of logits: distinct, tied (few levels), or with NaNs and infinities.
    fn row(rng: &mut Rng, kind: u64) -> Vec<f32> {
        (0..CODES)
            .map(|_| match kind {
                0 => rng.f32() * 4.0 - 2.0,
                1 => (rng.below(5) as f32) * 0.5 - 1.0,
                _ => match rng.below(10) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    _ => rng.f32() - 0.5,
                },
            })
            .collect()
    }

    #[test]
    fn hinted_selection_equals_the_full_selection() {
        let mut rng = Rng::new(11);
        for case in 0..3000u64 {
            let mut l = row(&mut rng, case % 3);
            let (truth, _) = select_row(&l);
            // The hint: the selection itself (shuffled), after a small move of the
            // logits (the training case), or arbitrary, repeated or invalid codes.
            let mut hint = truth;
            match (case / 3) % 5 {
                0 => hint.reverse(),
                4 => hint[rng.below(TOP_K as u64) as usize] = rng.below(CODES as u64) as u32,
                1 => {
                    for x in &mut l {
                        *x += (rng.f32() - 0.5) * 0.05;
                    }
                }
                2 => hint = [0, 1, 2, 3].map(|_| rng.below(CODES as u64) as u32),
                _ => {
                    hint[rng.below(TOP_K as u64) as usize] =
                        [hint[0], 64, u32::MAX][case as usize % 3]
                }
            }
            let (ei, ev) = select_row(&l);
            let (gi, gv) = select_row_hinted(&l, &hint);
            assert_eq!(gi, ei, "case {case}: {l:?} hint {hint:?}");
            assert_eq!(gv.map(f32::to_bits), ev.map(f32::to_bits), "case {case}");
        }
    }
}
