//! Training (LangSplat's autoencoder/train.py, workload.md §1): Adam, shuffled
//! mini-batches, loss `MSE + w·(1 − cos)` with the cosine taken along the batch axis
//! per feature dimension, and the best of the last epochs kept by the full-set loss.

use lsplat_core::Rng;

use crate::AeError;
use crate::layers::{BnCache, l2_normalize, l2_normalize_backward, relu, relu_backward};
use crate::model::{Autoencoder, DECODER_DIMS, ENCODER_DIMS};

/// PyTorch's `cosine_similarity` ε (each norm is clamped to at least this).
const COS_EPS: f64 = 1e-8;

/// Training settings (LangSplat's values are the defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOptions {
    /// Encoder widths, the last being the code dimension.
    pub encoder_dims: Vec<usize>,
    /// Decoder widths, the last being the feature dimension.
    pub decoder_dims: Vec<usize>,
    /// Adam learning rate (LangSplat's scripts: 7e-4).
    pub lr: f32,
    /// Adam β₁, β₂, ε (PyTorch's defaults).
    pub betas: (f32, f32),
    /// Adam ε.
    pub eps: f32,
    /// Rows per batch.
    pub batch_size: usize,
    /// Passes over the data.
    pub epochs: usize,
    /// The model kept is the best of this many last epochs by the full-set loss
    /// (LangSplat: epochs 96–99 of 100, i.e. 4).
    pub select_last: usize,
    /// Weight of `1 − cos` in the training loss.
    pub cos_weight: f32,
    /// Seed of the initial weights and the shuffles.
    pub seed: u64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            encoder_dims: ENCODER_DIMS.to_vec(),
            decoder_dims: DECODER_DIMS.to_vec(),
            lr: 7e-4,
            betas: (0.9, 0.999),
            eps: 1e-8,
            batch_size: 64,
            epochs: 100,
            select_last: 4,
            cos_weight: 1e-3,
            seed: 0,
        }
    }
}

/// Full-set loss in evaluation mode (running batch-norm statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalLoss {
    /// Mean squared error over every element.
    pub mse: f64,
    /// `1 −` the mean over feature dimensions of the cosine along the row axis.
    pub cos: f64,
    /// Mean over rows of the cosine between each row and its reconstruction.
    pub row_cosine: f64,
}

impl EvalLoss {
    /// The selection criterion: `mse + cos` (cosine weight 1, as LangSplat's eval).
    pub fn total(&self) -> f64 {
        self.mse + self.cos
    }
}

/// What training reports as it goes.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    /// A batch finished.
    Batch {
        /// Epoch (0-based).
        epoch: usize,
        /// Loss of the batch.
        loss: f32,
    },
    /// An epoch finished.
    Epoch {
        /// Epoch (0-based).
        epoch: usize,
        /// Mean batch loss.
        loss: f64,
        /// Full-set loss, for the epochs that are candidates.
        eval: Option<EvalLoss>,
    },
}

/// The result of training.
#[derive(Clone, Debug)]
pub struct Trained {
    /// The kept model.
    pub model: Autoencoder,
    /// Its epoch (0-based).
    pub epoch: usize,
    /// Its full-set loss.
    pub eval: EvalLoss,
    /// Mean batch loss of every epoch.
    pub epoch_losses: Vec<f64>,
    /// Batches run.
    pub batches: u64,
}

/// Activations of one training batch and what the backward needs.
#[derive(Default)]
pub(crate) struct Work {
    pub(crate) x: Vec<f32>,
    /// Encoder: `[0]` the first layer's output, `[k + 1]` stage k's output; stage
    /// buffers hold ReLU(BN(·)) after the stage's normalisation (the next layer's input).
    enc: Vec<Vec<f32>>,
    bn: Vec<BnCache>,
    code_norms: Vec<f32>,
    /// Decoder: `[0]` the first layer's output, `[k + 1]` layer k's output (ReLU
    /// applied in place to every buffer but the last, which is normalised).
    pub(crate) dec: Vec<Vec<f32>>,
    out_norms: Vec<f32>,
    pub(crate) d: Vec<f32>,
    dx: Vec<f32>,
}

impl Autoencoder {
    /// Training-mode forward of `work.x` (`batch` rows); the output is
    /// `work.dec.last()`.
    pub(crate) fn forward_train(&mut self, work: &mut Work, batch: usize) {
        let s = self.enc.len();
        work.enc.resize_with(s + 1, Vec::new);
        work.bn.resize_with(s, BnCache::default);
        work.dec.resize_with(self.dec.len() + 1, Vec::new);
        self.enc_first.forward(&work.x, batch, &mut work.enc[0]);
        for (k, (bn, lin)) in self.enc.iter_mut().enumerate() {
            let (done, rest) = work.enc.split_at_mut(k + 1);
            bn.forward_train(&mut done[k], batch, &mut work.bn[k]);
            relu(&mut done[k]);
            lin.forward(&done[k], batch, &mut rest[0]);
        }
        let code = self.code_dim();
        l2_normalize(&mut work.enc[s], code, &mut work.code_norms);
        self.dec_first
            .forward(&work.enc[s], batch, &mut work.dec[0]);
        for (k, lin) in self.dec.iter().enumerate() {
            let (done, rest) = work.dec.split_at_mut(k + 1);
            relu(&mut done[k]);
            lin.forward(&done[k], batch, &mut rest[0]);
        }
        let d = self.input_dim();
        let last = work.dec.len() - 1;
        l2_normalize(&mut work.dec[last], d, &mut work.out_norms);
    }

    /// Backward from `work.d` (∂L/∂output) into `grad`.
    pub(crate) fn backward(&self, work: &mut Work, batch: usize, grad: &mut Autoencoder) {
        let (d, code) = (self.input_dim(), self.code_dim());
        let last = work.dec.len() - 1;
        l2_normalize_backward(&work.dec[last], &work.out_norms, d, &mut work.d);
        for k in (0..self.dec.len()).rev() {
            self.dec[k].backward(
                &work.dec[k],
                &work.d,
                batch,
                &mut grad.dec[k],
                Some(&mut work.dx),
            );
            relu_backward(&work.dec[k], &mut work.dx);
            std::mem::swap(&mut work.d, &mut work.dx);
        }
        let s = self.enc.len();
        self.dec_first.backward(
            &work.enc[s],
            &work.d,
            batch,
            &mut grad.dec_first,
            Some(&mut work.dx),
        );
        std::mem::swap(&mut work.d, &mut work.dx);
        l2_normalize_backward(&work.enc[s], &work.code_norms, code, &mut work.d);
        for k in (0..s).rev() {
            let (bn, lin) = &self.enc[k];
            let (gbn, glin) = &mut grad.enc[k];
            lin.backward(&work.enc[k], &work.d, batch, glin, Some(&mut work.dx));
            relu_backward(&work.enc[k], &mut work.dx);
            bn.backward(&mut work.dx, batch, &work.bn[k], gbn);
            std::mem::swap(&mut work.d, &mut work.dx);
        }
        self.enc_first
            .backward(&work.x, &work.d, batch, &mut grad.enc_first, None);
    }
}

/// The training loss of a batch, `mse + w·(1 − mean_j cos_j)` with `cos_j` the cosine
/// between column j of `out` and of `x` (the batch axis, as LangSplat's
/// `cosine_similarity(…, dim=0)`); writes ∂L/∂out into `d`.
pub fn batch_loss(out: &[f32], x: &[f32], dim: usize, cos_weight: f32, d: &mut Vec<f32>) -> f64 {
    let n = out.len();
    let rows = n / dim;
    d.clear();
    d.resize(n, 0.0);
    let mut sq = 0f64;
    let scale = 2.0 / n as f32;
    for ((g, o), t) in d.iter_mut().zip(out).zip(x) {
        let e = o - t;
        sq += (e as f64) * (e as f64);
        *g = scale * e;
    }
    let (mut dot, mut na, mut nx) = (vec![0f64; dim], vec![0f64; dim], vec![0f64; dim]);
    for r in 0..rows {
        for j in 0..dim {
            let (o, t) = (out[r * dim + j] as f64, x[r * dim + j] as f64);
            dot[j] += o * t;
            na[j] += o * o;
            nx[j] += t * t;
        }
    }
    let mut cos_sum = 0f64;
    let mut ga = vec![(0f32, 0f32); dim];
    for j in 0..dim {
        let (a, b) = (na[j].sqrt(), nx[j].sqrt());
        let (ca, cb) = (a.max(COS_EPS), b.max(COS_EPS));
        let c = dot[j] / (ca * cb);
        cos_sum += c;
        // ∂cos/∂out[r, j] = x/(|a||x|) − cos·out/|a|² (the clamp's branch has no
        // gradient through |a|).
        let k = -(cos_weight as f64) / dim as f64;
        let g_x = k / (ca * cb);
        let g_o = if a > COS_EPS { -k * c / (a * a) } else { 0.0 };
        ga[j] = (g_x as f32, g_o as f32);
    }
    for r in 0..rows {
        for j in 0..dim {
            let (gx, go) = ga[j];
            d[r * dim + j] += gx * x[r * dim + j] + go * out[r * dim + j];
        }
    }
    let mse = sq / n as f64;
    mse + cos_weight as f64 * (1.0 - cos_sum / dim as f64)
}

/// Full-set loss of `model` on `[rows, D]` data in evaluation mode.
pub fn evaluate(model: &Autoencoder, data: &[f32]) -> Result<EvalLoss, AeError> {
    let dim = model.input_dim();
    let rows = data.len() / dim.max(1);
    let (mut sq, mut row_cos) = (0f64, 0f64);
    let (mut dot, mut na, mut nx) = (vec![0f64; dim], vec![0f64; dim], vec![0f64; dim]);
    for chunk in data.chunks(8192 * dim) {
        let out = model.decode(&model.encode(chunk)?, 1)?;
        for (o, t) in out.chunks_exact(dim).zip(chunk.chunks_exact(dim)) {
            let (mut rd, mut ro, mut rt) = (0f64, 0f64, 0f64);
            for j in 0..dim {
                let (a, b) = (o[j] as f64, t[j] as f64);
                sq += (a - b) * (a - b);
                dot[j] += a * b;
                na[j] += a * a;
                nx[j] += b * b;
                rd += a * b;
                ro += a * a;
                rt += b * b;
            }
            row_cos += rd / (ro.sqrt().max(COS_EPS) * rt.sqrt().max(COS_EPS));
        }
    }
    let cos: f64 = (0..dim)
        .map(|j| dot[j] / (na[j].sqrt().max(COS_EPS) * nx[j].sqrt().max(COS_EPS)))
        .sum::<f64>()
        / dim as f64;
    Ok(EvalLoss {
        mse: sq / (rows * dim).max(1) as f64,
        cos: 1.0 - cos,
        row_cosine: row_cos / rows.max(1) as f64,
    })
}

/// Adam state (PyTorch's formulation, no weight decay).
struct Adam {
    m: Autoencoder,
    v: Autoencoder,
    step: i32,
}

impl Adam {
    fn step(&mut self, params: &mut Autoencoder, grad: &mut Autoencoder, o: &TrainOptions) {
        self.step += 1;
        let (b1, b2) = o.betas;
        let c1 = 1.0 - b1.powi(self.step);
        let c2 = 1.0 - b2.powi(self.step);
        let step_size = o.lr / c1;
        let c2s = c2.sqrt();
        let (ps, gs) = (params.params_mut(), grad.params_mut());
        let (ms, vs) = (self.m.params_mut(), self.v.params_mut());
        for (((p, g), m), v) in ps.into_iter().zip(gs).zip(ms).zip(vs) {
            for (((p, g), m), v) in p.iter_mut().zip(g.iter_mut()).zip(m.iter_mut()).zip(v) {
                *m = b1 * *m + (1.0 - b1) * *g;
                *v = b2 * *v + (1.0 - b2) * *g * *g;
                *p -= step_size * *m / (v.sqrt() / c2s + o.eps);
                *g = 0.0;
            }
        }
    }
}

/// Trains an autoencoder on `[rows, dim]` features. Each epoch visits the rows in a
/// fresh seeded shuffle in batches of `batch_size`; a last batch of a single row is
/// skipped (batch norm needs two rows to train; PyTorch raises there). After each of
/// the last `select_last` epochs the full-set loss is computed in evaluation mode and
/// the best model so far is kept. Same data, options and seed → the same model, bit
/// for bit.
pub fn train(
    data: &[f32],
    dim: usize,
    opts: &TrainOptions,
    mut progress: impl FnMut(Progress),
) -> Result<Trained, AeError> {
    if opts.batch_size < 2
        || opts.epochs == 0
        || opts.select_last == 0
        || !opts.lr.is_finite()
        || opts.lr <= 0.0
    {
        return Err(AeError::Config(format!(
            "batch size {} (needs ≥ 2), epochs {} (≥ 1), epochs to choose from {} (≥ 1), lr {} (> 0)",
            opts.batch_size, opts.epochs, opts.select_last, opts.lr
        )));
    }
    if dim == 0 || !data.len().is_multiple_of(dim) {
        return Err(AeError::Data(format!(
            "{} values are not rows of {dim}",
            data.len()
        )));
    }
    let rows = data.len() / dim;
    if rows < 2 {
        return Err(AeError::Data(format!("{rows} rows; at least 2 are needed")));
    }
    if let Some(v) = data.iter().find(|v| !v.is_finite()) {
        return Err(AeError::Data(format!("a value is not finite ({v})")));
    }
    let mut model = Autoencoder::new(dim, &opts.encoder_dims, &opts.decoder_dims, opts.seed)?;
    let mut grad = model.zeros_like();
    let mut adam = Adam {
        m: model.zeros_like(),
        v: model.zeros_like(),
        step: 0,
    };
    let mut rng = Rng::new(opts.seed ^ 0x5eed_ae00);
    let mut order: Vec<usize> = (0..rows).collect();
    let mut work = Work::default();
    let mut best: Option<(Autoencoder, usize, EvalLoss)> = None;
    let mut epoch_losses = Vec::with_capacity(opts.epochs);
    let mut batches = 0u64;
    let first_candidate = opts.epochs.saturating_sub(opts.select_last);
    for epoch in 0..opts.epochs {
        rng.shuffle(&mut order);
        let (mut sum, mut count) = (0f64, 0usize);
        for idx in order.chunks(opts.batch_size) {
            if idx.len() < 2 {
                continue;
            }
            let b = idx.len();
            work.x.clear();
            for &r in idx {
                work.x.extend_from_slice(&data[r * dim..(r + 1) * dim]);
            }
            model.forward_train(&mut work, b);
            let out = work.dec.last().map(Vec::as_slice).unwrap_or_default();
            let loss = batch_loss(out, &work.x, dim, opts.cos_weight, &mut work.d);
            model.backward(&mut work, b, &mut grad);
            adam.step(&mut model, &mut grad, opts);
            sum += loss;
            count += 1;
            batches += 1;
            progress(Progress::Batch {
                epoch,
                loss: loss as f32,
            });
        }
        let mean = sum / count.max(1) as f64;
        epoch_losses.push(mean);
        let eval = if epoch >= first_candidate {
            let e = evaluate(&model, data)?;
            if best.as_ref().is_none_or(|b| e.total() < b.2.total()) {
                best = Some((model.clone(), epoch, e));
            }
            Some(e)
        } else {
            None
        };
        progress(Progress::Epoch {
            epoch,
            loss: mean,
            eval,
        });
    }
    let (model, epoch, eval) = best.ok_or_else(|| AeError::Config("no epoch ran".into()))?;
    Ok(Trained {
        model,
        epoch,
        eval,
        epoch_losses,
        batches,
    })
}
