//! Regularised least squares by preconditioned conjugate gradient.
//!
//! For each level the solver minimises `Σ_cameras ‖M(W·x − f)‖² + λ‖x − x_avg‖²`,
//! i.e. solves the normal equations `(Σ WᵀMW + λI)·x = Σ WᵀM·f + λ·x_avg`. `Σ WᵀM·f`
//! is the numerator of the weighted average, so one pass over the cameras builds their
//! operators and yields both the right-hand side and the warm start `x_avg`. Each
//! iteration then applies `A` with one `spmm` and one `spmm_t` per camera (plus the
//! per-level masks when several levels share the union of their valid pixels).
//!
//! The preconditioner is `diag(Σ w·m + λ)`: `W·1 = 1 − T_final ≤ 1`, so `Σ w·m` bounds
//! the row sums of `WᵀMW`, and the averaging step `x_avg = D⁻¹·WᵀM·f` is exactly this
//! preconditioner applied to the right-hand side. Each channel of each level is its own
//! system with its own step lengths. Vectors live on the host in f32 with f64 dot
//! products; products run on the device.

use lsplat_device::Backend;
use lsplat_render::Scratch;
use lsplat_render::placement::{Placement, Placer, SpillTarget, recompute_hint};

use crate::average::{Average, columns, set_columns};
use crate::{Problem, Result, Visits};

/// Settings of [`lsq`].
#[derive(Clone, Debug, PartialEq)]
pub struct LsqOptions {
    /// Stop when every level's relative residual `‖b − A·x‖ / ‖b‖` is at most this.
    pub tol: f64,
    /// Most iterations.
    pub max_iters: u32,
    /// λ, the pull towards the average.
    pub lambda: f32,
    /// ε of the average.
    pub eps: f32,
    /// Bytes the cached operators may hold in memory; cameras past it are spilled
    /// to `spill` or rebuilt every pass, whichever is cheaper (see
    /// [`lsplat_render::placement`]).
    pub budget: u64,
    /// Where operators past the budget may be spilled (`None`: always rebuilt).
    pub spill: Option<SpillTarget>,
}

/// The least-squares solution and how it was reached.
pub struct Lsq<B: Backend> {
    /// `[N, L·C]`.
    pub x: Vec<f32>,
    /// The warm start (and its per-level counts of unweighted Gaussians).
    pub average: Average,
    /// Iterations run.
    pub iterations: u32,
    /// Relative residual of each level after each iteration (entry 0: the warm start).
    pub residuals: Vec<Vec<f64>>,
    /// Every level reached the tolerance.
    pub converged: bool,
    /// Fitted cameras whose operator stayed cached (in memory or spilled to disk).
    pub cached: usize,
    /// Fitted cameras whose operator was rebuilt for every pass (over the budget).
    pub streamed: usize,
    /// Bytes of the operators cached in memory.
    pub operator_bytes: u64,
    /// The placement planned from the first operator (announced at start) and the
    /// one reached (`None` without a fitted camera with valid pixels).
    pub placement: Option<(Placement, Placement)>,
    operators: Vec<Option<B::Operator>>,
}

impl<B: Backend> Lsq<B> {
    /// The cached operator of camera `cam` (its rows: the union of the levels' valid
    /// pixels, as [`crate::evaluate`] expects).
    pub fn operator(&self, cam: usize) -> Option<&B::Operator> {
        self.operators.get(cam).and_then(Option::as_ref)
    }

    /// The cached operators, indexed like the cameras.
    pub fn into_operators(self) -> Vec<Option<B::Operator>> {
        self.operators
    }
}

/// The normal-equations operator `A = Σ WᵀMW + λI` over the fitted cameras.
struct Normal<'p, 'a, B: Backend> {
    p: &'p Problem<'a, B>,
    ops: Vec<Option<B::Operator>>,
    /// Per camera, per level chunk: the valid mask of each level (several levels).
    keep: Vec<Vec<B::Buf<u8>>>,
    rows: Vec<usize>,
    chunks: Vec<std::ops::Range<usize>>,
    lambda: f32,
    /// Per chunk: x, A·x and per-pixel work buffers.
    xs: Vec<B::Buf<f32>>,
    ys: Vec<B::Buf<f32>>,
    work: Vec<B::Buf<f32>>,
    scratch: Scratch<B>,
}

impl<B: Backend> Normal<'_, '_, B> {
    /// `out = A·v` (`[N, L·C]`).
    fn apply(&mut self, dev: &B, v: &[f32], visits: &mut Visits) -> Result<Vec<f32>> {
        let p = self.p;
        let (c, levels) = (p.channels(), p.level_count());
        let width = levels * c;
        for (ls, xb) in self.chunks.iter().zip(&mut self.xs) {
            *xb = dev.upload(&columns(v, width, ls.start * c..ls.end * c))?;
        }
        for y in &mut self.ys {
            dev.fill(y, 0.0)?;
        }
        for &cam in &p.fit {
            if self.rows[cam] == 0 {
                continue;
            }
            let rebuilt;
            let op = match &self.ops[cam] {
                Some(op) => op,
                None => {
                    let Some((_, set)) = p.prepare(dev, cam, &mut self.scratch)? else {
                        continue;
                    };
                    let s = &self.scratch;
                    rebuilt = dev.build_operator(
                        &s.projection,
                        &s.bins,
                        &set,
                        p.gaussians,
                        p.render.precision,
                    )?;
                    visits.builds[cam] += 1;
                    &rebuilt
                }
            };
            for (k, ls) in self.chunks.iter().enumerate() {
                let ch = ls.len() * c;
                dev.spmm(op, &self.xs[k], ch, &mut self.work[k])?;
                if levels > 1 {
                    let rows = self.rows[cam];
                    dev.mask_groups(&mut self.work[k], &self.keep[cam][k], rows, ls.len(), c)?;
                }
                dev.spmm_t(op, &self.work[k], ch, &mut self.ys[k])?;
                visits.products[cam] += 2;
            }
        }
        let mut out = vec![0f32; v.len()];
        for (ls, y) in self.chunks.iter().zip(&self.ys) {
            set_columns(&mut out, width, ls.start * c..ls.end * c, &dev.download(y)?);
        }
        for (o, x) in out.iter_mut().zip(v) {
            *o += self.lambda * x;
        }
        Ok(out)
    }
}

/// Per column of `[rows, width]` matrices: `Σ a·b` in f64.
fn dots(a: &[f32], b: &[f32], width: usize) -> Vec<f64> {
    let mut out = vec![0f64; width];
    for (ra, rb) in a.chunks_exact(width).zip(b.chunks_exact(width)) {
        for ((o, x), y) in out.iter_mut().zip(ra).zip(rb) {
            *o += *x as f64 * *y as f64;
        }
    }
    out
}

/// Per level: `sqrt(Σ_level rr) / sqrt(Σ_level bb)` (0 where `b` is 0).
fn level_residuals(rr: &[f64], bb: &[f64], c: usize) -> Vec<f64> {
    rr.chunks(c)
        .zip(bb.chunks(c))
        .map(|(r, b)| {
            let (r, b) = (r.iter().sum::<f64>(), b.iter().sum::<f64>());
            if b > 0.0 { (r / b).sqrt() } else { 0.0 }
        })
        .collect()
}

/// Solves every level's regularised least-squares problem over the fitted cameras;
/// `on_iter(iteration, residuals)` sees each level's relative residual (iteration 0:
/// the warm start).
pub fn lsq<B: Backend>(
    dev: &B,
    p: &Problem<'_, B>,
    opts: &LsqOptions,
    visits: &mut Visits,
    mut on_iter: impl FnMut(u32, &[f64]),
) -> Result<Lsq<B>> {
    p.validate()?;
    let (n, c, levels) = (p.gaussians, p.channels(), p.level_count());
    let width = levels * c;
    let avg_chunks = p.level_chunks(dev, c + 1)?;
    let chunks = p.level_chunks(dev, c)?;
    let cams = p.cameras.len();

    // One pass: build each fitted camera's operator, accumulate the average's sums
    // through it, keep it while the budget allows.
    let mut sums: Vec<B::Buf<f32>> = avg_chunks
        .iter()
        .map(|ls| dev.alloc::<f32>(n * ls.len() * (c + 1)))
        .collect::<Result<_, _>>()?;
    let mut ops: Vec<Option<B::Operator>> = (0..cams).map(|_| None).collect();
    let mut keep: Vec<Vec<B::Buf<u8>>> = (0..cams).map(|_| Vec::new()).collect();
    let mut rows = vec![0usize; cams];
    let mut placer: Option<Placer> = None;
    let mut scratch = Scratch::<B>::default();
    for (done, &cam) in p.fit.iter().enumerate() {
        p.camera_done(done);
        let t0 = std::time::Instant::now();
        let Some((targets, set)) = p.prepare(dev, cam, &mut scratch)? else {
            continue;
        };
        let op = dev.build_operator(
            &scratch.projection,
            &scratch.bins,
            &set,
            n,
            p.render.precision,
        )?;
        visits.builds[cam] += 1;
        let labels: Vec<_> = p.levels.iter().map(|l| l[cam]).collect();
        for (ls, acc) in avg_chunks.iter().zip(&mut sums) {
            let d = dev.upload(&targets.masked_targets_with_mask(&labels, ls.clone()))?;
            dev.spmm_t(&op, &d, ls.len() * (c + 1), acc)?;
            visits.products[cam] += 1;
        }
        if levels > 1 {
            keep[cam] = chunks
                .iter()
                .map(|ls| dev.upload(&targets.keep(ls.clone())))
                .collect::<Result<_, _>>()?;
        }
        rows[cam] = targets.len();
        let placer = match &mut placer {
            Some(pl) => pl,
            None => {
                // The rebuild cost: projection, binning and the build of this first
                // operator (the products above are not part of it).
                let build = t0.elapsed();
                let pl = Placer::new(
                    dev,
                    opts.spill.clone(),
                    p.fit.len(),
                    opts.budget,
                    &op,
                    build,
                )?;
                tracing::info!(
                    "{} (memory budget {:.2} GB)",
                    pl.plan(),
                    opts.budget as f64 / 1e9
                );
                if let Some(hint) = recompute_hint(pl.plan(), p.render.precision) {
                    tracing::info!("{hint}");
                }
                placer.insert(pl)
            }
        };
        ops[cam] = placer.place(dev, op, &format!("lsq-camera-{cam}"))?;
    }
    p.camera_done(p.fit.len());
    let placement = placer.as_ref().map(|pl| (*pl.plan(), pl.placed));
    let (held, streamed) = placer
        .as_ref()
        .map_or((0, 0), |pl| (pl.held(), pl.placed.rebuilt));
    let mut all = vec![0f32; n * levels * (c + 1)];
    for (ls, acc) in avg_chunks.iter().zip(&sums) {
        let cols = ls.start * (c + 1)..ls.end * (c + 1);
        set_columns(&mut all, levels * (c + 1), cols, &dev.download(acc)?);
    }
    drop(sums);
    let average = Average::from_sums(&all, n, levels, c, opts.eps);
    // b = Σ WᵀM·f + λ·x_avg; M⁻¹ = 1 / (Σ w·m + λ).
    let lambda = opts.lambda;
    let mut b = vec![0f32; n * width];
    let mut minv = vec![0f32; n * levels];
    for g in 0..n {
        for l in 0..levels {
            let s = &all[(g * levels + l) * (c + 1)..(g * levels + l + 1) * (c + 1)];
            let i = g * width + l * c;
            for ((bv, sv), xv) in b[i..i + c]
                .iter_mut()
                .zip(&s[..c])
                .zip(&average.x[i..i + c])
            {
                *bv = sv + lambda * xv;
            }
            let d = s[c] + lambda;
            minv[g * levels + l] = if d > 0.0 { 1.0 / d } else { 0.0 };
        }
    }
    drop(all);
    let max_rows = rows.iter().copied().max().unwrap_or(0).max(1);
    let mut a = Normal {
        p,
        ops,
        keep,
        rows,
        lambda,
        xs: chunks
            .iter()
            .map(|_| dev.alloc::<f32>(1))
            .collect::<Result<_, _>>()?,
        ys: chunks
            .iter()
            .map(|ls| dev.alloc::<f32>(n * ls.len() * c))
            .collect::<Result<_, _>>()?,
        work: chunks
            .iter()
            .map(|ls| dev.alloc::<f32>(max_rows * ls.len() * c))
            .collect::<Result<_, _>>()?,
        chunks,
        scratch,
    };

    let precondition = |r: &[f32]| -> Vec<f32> {
        let mut z = vec![0f32; r.len()];
        for (g, (zr, rr)) in z
            .chunks_exact_mut(width)
            .zip(r.chunks_exact(width))
            .enumerate()
        {
            for (j, (zv, rv)) in zr.iter_mut().zip(rr).enumerate() {
                *zv = rv * minv[g * levels + j / c];
            }
        }
        z
    };
    let bb = dots(&b, &b, width);
    let mut x = average.x.clone();
    let ax = a.apply(dev, &x, visits)?;
    let mut r: Vec<f32> = b.iter().zip(&ax).map(|(bv, av)| bv - av).collect();
    drop(ax);
    let mut residuals = vec![level_residuals(&dots(&r, &r, width), &bb, c)];
    on_iter(0, &residuals[0]);
    let done = |res: &[f64]| res.iter().all(|&v| v <= opts.tol);
    let mut converged = done(&residuals[0]);
    let mut iterations = 0;
    if !converged {
        let mut z = precondition(&r);
        let mut dir = z.clone();
        let mut rz = dots(&r, &z, width);
        while iterations < opts.max_iters {
            iterations += 1;
            let q = a.apply(dev, &dir, visits)?;
            let pq = dots(&dir, &q, width);
            let alpha: Vec<f32> = rz
                .iter()
                .zip(&pq)
                .map(|(&n, &d)| if d > 0.0 { (n / d) as f32 } else { 0.0 })
                .collect();
            for ((xr, rr), (pr, qr)) in x
                .chunks_exact_mut(width)
                .zip(r.chunks_exact_mut(width))
                .zip(dir.chunks_exact(width).zip(q.chunks_exact(width)))
            {
                for j in 0..width {
                    xr[j] += alpha[j] * pr[j];
                    rr[j] -= alpha[j] * qr[j];
                }
            }
            let res = level_residuals(&dots(&r, &r, width), &bb, c);
            on_iter(iterations, &res);
            converged = done(&res);
            residuals.push(res);
            if converged {
                break;
            }
            z = precondition(&r);
            let rz_new = dots(&r, &z, width);
            let beta: Vec<f32> = rz_new
                .iter()
                .zip(&rz)
                .map(|(&n, &d)| if d > 0.0 { (n / d) as f32 } else { 0.0 })
                .collect();
            for (dr, zr) in dir.chunks_exact_mut(width).zip(z.chunks_exact(width)) {
                for j in 0..width {
                    dr[j] = zr[j] + beta[j] * dr[j];
                }
            }
            rz = rz_new;
        }
    }
    let cached = a.ops.iter().filter(|o| o.is_some()).count();
    Ok(Lsq {
        x,
        average,
        iterations,
        residuals,
        converged,
        cached,
        streamed,
        operator_bytes: held,
        placement,
        operators: a.ops,
    })
}
