//! Training-free solvers for per-Gaussian features over frozen geometry.
//!
//! Geometry is frozen, so the features a camera renders are linear in the
//! per-Gaussian features: `F = W·x` with W the camera's blending weights `α·T`. This
//! crate fits x without gradient training, using only [`Backend`] ops (so it runs on
//! every backend):
//! - [`average`]: LUDVIG's rule, each Gaussian's weighted mean of the valid pixels'
//!   features, `x_g = Σ w_pg·f_p / (Σ w_pg + ε)` over the fitted cameras: one
//!   feature-only backward walk per camera (`Wᵀ·[m·f, m]`), no operator built.
//! - [`lsq`]: the minimiser of `Σ_cameras ‖M(W·x − f)‖² + λ‖x − x_avg‖²` by
//!   preconditioned conjugate gradient on the normal equations, with `spmm`/`spmm_t`
//!   over cached operators (rebuilt per pass for cameras that do not fit the budget).
//! - [`evaluate`]: masked L1 and mean cosine of rendered features on chosen cameras.
//!
//! Several LangSplat levels are solved together: each level is its own system
//! (own valid mask, own targets), but they share every pass over the cameras, as
//! `levels × C` channels over the union of the levels' valid pixels.
//!
//! [`Backend`]: lsplat_device::Backend

mod average;
mod eval;
mod lsq;
mod problem;

pub use average::{Average, average};
pub use eval::evaluate;
pub use lsq::{Lsq, LsqOptions, lsq};
pub use problem::{Problem, RenderParams, Targets, Visits};

use lsplat_device::DeviceError;

/// Errors of the solvers.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    /// A device op failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The problem is malformed (labels that do not match the cameras, no camera to
    /// fit, a feature dimension the backend cannot take).
    #[error("solver: {0}")]
    Problem(String),
}

/// Scales every `c`-value row of `x` to unit length (zero rows stay zero): LangSplat
/// V1's per-Gaussian normalisation applied to a solution, level by level.
pub fn unit_rows(x: &mut [f32], c: usize) {
    for row in x.chunks_exact_mut(c) {
        let n = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        if n > 0.0 {
            for v in row.iter_mut() {
                *v = (*v as f64 / n) as f32;
            }
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = SolveError> = std::result::Result<T, E>;
