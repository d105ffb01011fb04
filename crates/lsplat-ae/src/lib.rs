//! LangSplat's feature autoencoder (workload.md §1), written out by hand.
//!
//! - [`Autoencoder`]: encoder `512 → 256 → 128 → 64 → 32 → 3` with
//!   `[BatchNorm1d, ReLU, Linear]` stages and a unit-norm code; decoder
//!   `3 → 16 → 32 → 64 → 128 → 256 → 256 → 512` with ReLUs and a unit-norm output.
//! - [`train`]: Adam (lr 7e-4), shuffled batches of 64, 100 epochs, loss
//!   `MSE + 0.001·(1 − cos)` with LangSplat's cosine along the batch axis, and the best
//!   of the last four epochs kept by the full-set loss.
//! - [`file`]: safetensors model files with LangSplat's PyTorch tensor names.
//!
//! Batch norm follows PyTorch's `BatchNorm1d` exactly: training normalises with the
//! batch mean and biased variance and moves the running mean and unbiased variance by
//! momentum 0.1; encoding and decoding (evaluation) use the running statistics.
//! Layers are plain loops around one dense product (`lsplat_cpu::gemm`, over
//! `matrixmultiply`'s sgemm); every backward is checked against finite differences.
//! Everything is seeded and single-threaded in training, so the same data, options
//! and seed give the same model bit for bit.

pub mod error;
pub mod file;
pub mod layers;
pub mod model;
pub mod train;

#[cfg(test)]
mod tests;

pub use error::AeError;
pub use file::{ModelFile, load_model, model_bytes, parse_model};
pub use model::{Autoencoder, DECODER_DIMS, ENCODER_DIMS};
pub use train::{EvalLoss, Progress, TrainOptions, Trained, evaluate, train};
