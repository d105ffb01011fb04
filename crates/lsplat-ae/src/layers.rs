//! The building blocks, batch-major (`[batch, features]`, row-major), each with a
//! hand-written backward checked against finite differences (`tests.rs`).

use lsplat_core::Rng;
use lsplat_cpu::gemm::{MatRef, gemm};

/// PyTorch's BatchNorm1d defaults.
pub const BN_EPS: f32 = 1e-5;
/// Weight of the new batch statistics in the running statistics (PyTorch's momentum).
pub const BN_MOMENTUM: f32 = 0.1;

/// A fully connected layer `y = x·Wᵀ + b` (`W`: `[out, in]`, PyTorch's layout).
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// Input width.
    pub inputs: usize,
    /// Output width.
    pub outputs: usize,
    /// Weights `[outputs, inputs]`.
    pub weight: Vec<f32>,
    /// Bias `[outputs]`.
    pub bias: Vec<f32>,
}

impl Linear {
    /// PyTorch's default initialisation: weight and bias uniform in ±1/√inputs.
    pub fn init(inputs: usize, outputs: usize, rng: &mut Rng) -> Self {
        let bound = 1.0 / (inputs as f32).sqrt();
        let mut u = |n: usize| (0..n).map(|_| rng.range(-bound, bound)).collect();
        let weight = u(inputs * outputs);
        let bias = u(outputs);
        Linear {
            inputs,
            outputs,
            weight,
            bias,
        }
    }

    /// A zero layer of the same shape (gradients, optimiser moments).
    pub fn zeros_like(&self) -> Self {
        Linear {
            inputs: self.inputs,
            outputs: self.outputs,
            weight: vec![0.0; self.weight.len()],
            bias: vec![0.0; self.bias.len()],
        }
    }

    /// `y[b, out] = x[b, in]·Wᵀ + bias`.
    pub fn forward(&self, x: &[f32], batch: usize, y: &mut Vec<f32>) {
        y.clear();
        for _ in 0..batch {
            y.extend_from_slice(&self.bias);
        }
        let w = MatRef::new(&self.weight, self.outputs, self.inputs);
        gemm(1.0, MatRef::new(x, batch, self.inputs), w.t(), 1.0, y);
    }

    /// Accumulates `∂W += dyᵀ·x`, `∂b += Σ dy` into `grad` and writes `dx = dy·W`
    /// (when asked).
    pub fn backward(
        &self,
        x: &[f32],
        dy: &[f32],
        batch: usize,
        grad: &mut Linear,
        dx: Option<&mut Vec<f32>>,
    ) {
        let dym = MatRef::new(dy, batch, self.outputs);
        gemm(
            1.0,
            dym.t(),
            MatRef::new(x, batch, self.inputs),
            1.0,
            &mut grad.weight,
        );
        for row in dy.chunks_exact(self.outputs) {
            for (g, d) in grad.bias.iter_mut().zip(row) {
                *g += d;
            }
        }
        if let Some(dx) = dx {
            dx.clear();
            dx.resize(batch * self.inputs, 0.0);
            let w = MatRef::new(&self.weight, self.outputs, self.inputs);
            gemm(1.0, dym, w, 0.0, dx);
        }
    }
}

/// Batch normalisation over the batch axis, as PyTorch's `BatchNorm1d` (affine,
/// tracking running statistics): in training, batch mean and biased variance
/// normalise, and the running mean and *unbiased* variance move by
/// [`BN_MOMENTUM`]; in evaluation, the running statistics normalise.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    /// Features.
    pub dim: usize,
    /// Scale γ (init 1).
    pub weight: Vec<f32>,
    /// Shift β (init 0).
    pub bias: Vec<f32>,
    /// Running mean (init 0).
    pub running_mean: Vec<f32>,
    /// Running variance (init 1).
    pub running_var: Vec<f32>,
    /// Training batches seen (PyTorch's `num_batches_tracked`).
    pub batches_tracked: i64,
}

/// What the backward of a training-mode batch norm needs.
#[derive(Clone, Debug, Default)]
pub struct BnCache {
    /// Normalised input `x̂`, `[batch, dim]`.
    pub xhat: Vec<f32>,
    /// `1/√(σ² + ε)` per feature.
    pub inv_std: Vec<f32>,
}

impl BatchNorm {
    /// γ = 1, β = 0, running mean 0, running variance 1.
    pub fn new(dim: usize) -> Self {
        BatchNorm {
            dim,
            weight: vec![1.0; dim],
            bias: vec![0.0; dim],
            running_mean: vec![0.0; dim],
            running_var: vec![1.0; dim],
            batches_tracked: 0,
        }
    }

    /// A zero copy (gradients, optimiser moments; only γ and β are used).
    pub fn zeros_like(&self) -> Self {
        BatchNorm {
            dim: self.dim,
            weight: vec![0.0; self.dim],
            bias: vec![0.0; self.dim],
            running_mean: vec![0.0; self.dim],
            running_var: vec![0.0; self.dim],
            batches_tracked: 0,
        }
    }

    /// Training mode: normalises `x` in place with the batch statistics, keeps what the
    /// backward needs, and updates the running statistics. Needs `batch ≥ 2`.
    pub fn forward_train(&mut self, x: &mut [f32], batch: usize, cache: &mut BnCache) {
        let d = self.dim;
        let n = batch as f64;
        let mut mean = vec![0f64; d];
        for row in x.chunks_exact(d) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += *v as f64;
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        let mut var = vec![0f64; d];
        for row in x.chunks_exact(d) {
            for ((s, v), m) in var.iter_mut().zip(row).zip(&mean) {
                let e = *v as f64 - m;
                *s += e * e;
            }
        }
        cache.inv_std.clear();
        for (j, s) in var.iter().enumerate() {
            let biased = s / n;
            cache
                .inv_std
                .push((1.0 / (biased + BN_EPS as f64).sqrt()) as f32);
            let unbiased = s / (n - 1.0).max(1.0);
            let m = BN_MOMENTUM as f64;
            self.running_mean[j] = ((1.0 - m) * self.running_mean[j] as f64 + m * mean[j]) as f32;
            self.running_var[j] = ((1.0 - m) * self.running_var[j] as f64 + m * unbiased) as f32;
        }
        self.batches_tracked += 1;
        cache.xhat.clear();
        cache.xhat.reserve(x.len());
        for row in x.chunks_exact_mut(d) {
            for j in 0..d {
                let h = ((row[j] as f64 - mean[j]) as f32) * cache.inv_std[j];
                cache.xhat.push(h);
                row[j] = self.weight[j] * h + self.bias[j];
            }
        }
    }

    /// Evaluation mode: normalises with the running statistics, in place.
    pub fn forward_eval(&self, x: &mut [f32]) {
        let d = self.dim;
        let scale: Vec<f32> = (0..d)
            .map(|j| self.weight[j] / (self.running_var[j] + BN_EPS).sqrt())
            .collect();
        for row in x.chunks_exact_mut(d) {
            for j in 0..d {
                row[j] = (row[j] - self.running_mean[j]) * scale[j] + self.bias[j];
            }
        }
    }

    /// Backward of [`BatchNorm::forward_train`]: accumulates ∂γ, ∂β into `grad` and
    /// turns `dy` into `dx` in place.
    pub fn backward(&self, dy: &mut [f32], batch: usize, cache: &BnCache, grad: &mut BatchNorm) {
        let d = self.dim;
        let mut sum_dy = vec![0f64; d];
        let mut sum_dy_xhat = vec![0f64; d];
        for (row, xh) in dy.chunks_exact(d).zip(cache.xhat.chunks_exact(d)) {
            for j in 0..d {
                sum_dy[j] += row[j] as f64;
                sum_dy_xhat[j] += (row[j] * xh[j]) as f64;
            }
        }
        for j in 0..d {
            grad.weight[j] += sum_dy_xhat[j] as f32;
            grad.bias[j] += sum_dy[j] as f32;
        }
        let n = batch as f32;
        let k: Vec<f32> = (0..d)
            .map(|j| self.weight[j] * cache.inv_std[j] / n)
            .collect();
        let (s_dy, s_dyx): (Vec<f32>, Vec<f32>) = (
            sum_dy.iter().map(|v| *v as f32).collect(),
            sum_dy_xhat.iter().map(|v| *v as f32).collect(),
        );
        for (row, xh) in dy.chunks_exact_mut(d).zip(cache.xhat.chunks_exact(d)) {
            for j in 0..d {
                row[j] = k[j] * (n * row[j] - s_dy[j] - xh[j] * s_dyx[j]);
            }
        }
    }
}

/// ReLU in place.
pub fn relu(x: &mut [f32]) {
    for v in x {
        *v = v.max(0.0);
    }
}

/// ReLU backward: zeroes `dy` where the ReLU's output `y` is 0.
pub fn relu_backward(y: &[f32], dy: &mut [f32]) {
    for (d, v) in dy.iter_mut().zip(y) {
        if *v <= 0.0 {
            *d = 0.0;
        }
    }
}

/// Row-wise L2 normalisation `y = x/‖x‖` (a zero row stays zero); returns the norms.
pub fn l2_normalize(x: &mut [f32], dim: usize, norms: &mut Vec<f32>) {
    norms.clear();
    for row in x.chunks_exact_mut(dim) {
        let n = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        norms.push(n);
        if n > 0.0 {
            row.iter_mut().for_each(|v| *v /= n);
        }
    }
}

/// Backward of [`l2_normalize`]: `dx = (dy − y·(y·dy))/‖x‖`, in place.
pub fn l2_normalize_backward(y: &[f32], norms: &[f32], dim: usize, dy: &mut [f32]) {
    for ((row, yr), n) in dy.chunks_exact_mut(dim).zip(y.chunks_exact(dim)).zip(norms) {
        if *n <= 0.0 {
            row.iter_mut().for_each(|v| *v = 0.0);
            continue;
        }
        let dot: f32 = row.iter().zip(yr).map(|(a, b)| a * b).sum();
        for (d, v) in row.iter_mut().zip(yr) {
            *d = (*d - v * dot) / n;
        }
    }
}
