//! Pure host-side math of LangSplatV2 training, as plain functions over slices.
//!
//! - [`topk`]: the sparse coefficients (top-k softmax, renormalised) and their exact
//!   gradient.
//! - [`decode`]: the codebook decode `F = Bᵀw` fused with the cosine loss over valid
//!   pixels, never materialising `[pixels, dim]`, plus the codebook gradient.
//! - [`codebook`]: the codebook gradient assembled from per-pixel pieces.
//! - [`l1`]: the optional L1 loss (fvdb normalisation).
//! - [`kmeans`]: mini-batch k-means used to initialise the codebook.
//! - [`ops`]: the device ops (kernel + CPU implementation) of the training step.
//! - [`model`]: the engine model (`train.model = "langsplat_v2"`) and [`outputs`].
//!
//! The math needs no engine, no ECS and no device (only [`ops`], [`model`] and
//! [`outputs`] use the device and engine APIs). Every public function checks its slice lengths and returns [`Error`] instead
//! of panicking.

mod check;
mod checkpoint;
pub mod codebook;
pub mod decode;
pub mod error;
pub mod evaluate;
pub mod kmeans;
mod kmeans_pp;
pub mod l1;
pub mod model;
pub mod ops;
pub mod outputs;
mod sparse;
pub mod systems;
pub mod topk;

#[cfg(test)]
mod reference;

/// Codebook size C of LangSplatV2 (`codebook_size`).
pub const CODES: usize = 64;
/// Number of nonzero coefficients K kept per Gaussian (`topk` in train.sh).
pub const TOP_K: usize = 4;
/// Dimension of the CLIP features the codebook decodes to.
pub const CLIP_DIM: usize = 512;

pub use decode::{
    CodebookAcc, CosinePrep, TINY_NORM_SQ, codebook_gradient, cosine_pixels, prepare,
};
pub use error::{Error, Result};
pub use kmeans::{KMeansOptions, minibatch_kmeans};
pub use l1::l1_pixels;
pub use topk::{gather_sparse, scatter_dense, topk_backward, topk_forward};
