//! Render orchestration: the [`Device`] facade over the backends, per-camera raster
//! caches at three levels, and the forward/backward of one camera through whatever
//! is cached.
//!
//! The `Device` enum lives here rather than in `lsplat-device` because it must name
//! the backend crates, which depend on `lsplat-device`; this crate is the one place
//! where `#[cfg(feature = ...)]` selects real backends or stubs.

pub mod cache;
pub mod colour;
pub mod csr;
pub mod device;
pub mod eval;
pub mod placement;
mod stub;
pub mod views;

pub use cache::{CacheLevel, RasterCache, Scratch};
pub use device::{BackendVisitor, Device};
pub use eval::{EvalReport, EvalSum};
pub use lsplat_cpu::CpuBackend;
pub use stub::StubBackend;
pub use views::{Band, Views};

#[cfg(feature = "cuda")]
pub use lsplat_gpu::CudaBackend;
/// The GPU backend on the CPU SIMT runtime (always built).
pub use lsplat_gpu::SimtBackend;
/// The CUDA backend (not compiled in: every use reports so).
#[cfg(not(feature = "cuda"))]
pub type CudaBackend = StubBackend;
#[cfg(feature = "hip")]
pub use lsplat_gpu::HipBackend;
/// The HIP backend (not compiled in: every use reports so).
#[cfg(not(feature = "hip"))]
pub type HipBackend = StubBackend;
