//! The GPU backend of lsplat-engine: one host implementation of the op set, generic
//! over a small [`Runtime`] trait, and the runtimes that execute it.
//!
//! - [`simt`] (always built): the CPU runs the same `kernels/*.cu`, compiled at run
//!   time by the system C++ compiler with `kernels/simt.h`; each block's threads are
//!   fibers, so barriers, shuffles and ballots are exact and schedules can be fuzzed.
//!   It is how every kernel and all of this crate's host code are tested without a GPU.
//! - `cuda` (feature `cuda`): cudarc with dynamic loading, NVRTC → CUBIN for the
//!   device's architecture.
//! - `hip` (feature `hip`): the HIP runtime and hiprtc, loaded at run time; code
//!   objects for the device's `gfxNNN` and wavefront size.
//!
//! All ops are queued on one stream and never wait for the device, except downloads,
//! [`Backend::synchronize`](lsplat_device::Backend::synchronize), and one read-back of
//! an element count in `bin_and_sort` and `build_operator` (cache-warming ops), which
//! must size their outputs. Vendor APIs appear only in their runtime module.

mod algo;
mod backend;
mod buf;
mod geometry;
mod gpu;
pub mod kcache;
mod operator;
mod ops;
mod profile;
mod raster;
pub mod runtime;
pub mod simt;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "hip")]
pub mod hip;

pub use buf::GpuBuf;
pub use geometry::{GpuBins, GpuGeometry, GpuProjection};
pub use gpu::Gpu;
pub use operator::GpuOperator;
pub use raster::MAX_CHANNELS;
pub use runtime::{DevicePtr, KernelArgs, LaunchDims, Runtime};

/// The GPU backend over runtime `R`.
pub struct GpuBackend<R: Runtime> {
    pub(crate) gpu: Gpu<R>,
}

impl<R: Runtime> GpuBackend<R> {
    /// A backend over an opened runtime.
    pub fn new(runtime: R) -> Self {
        GpuBackend {
            gpu: Gpu::new(runtime),
        }
    }

    /// The runtime and its kernel caches.
    pub fn gpu(&self) -> &Gpu<R> {
        &self.gpu
    }

    /// The runtime.
    pub fn runtime(&self) -> &R {
        self.gpu.runtime()
    }

    /// Makes SpMM sum rows of at most 4 channels with a group of 32 lanes (`true`,
    /// the default on CUDA and HIP) or with a thread per (row, channel) (`false`, the
    /// default on simt, where every shuffle is a round of fiber switches). Both give
    /// the same products up to the order of the sums; the parity tests run simt with
    /// the GPUs' shape.
    pub fn set_grouped_spmm(&self, grouped: bool) {
        self.gpu
            .grouped_spmm
            .store(grouped, std::sync::atomic::Ordering::Relaxed);
    }

    /// In the grouped SpMM, rows (in practice the CSC columns of Gaussians that cover
    /// many pixels) with more than `entries` entries are summed by a block of 256
    /// threads each instead of 32 lanes (default 2048). Applies to operators built
    /// afterwards; tests lower it to cover that path on small scenes.
    pub fn set_spmm_long_min(&self, entries: u32) {
        self.gpu
            .spmm_long_min
            .store(entries, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The GPU backend on the CPU SIMT runtime.
pub type SimtBackend = GpuBackend<simt::Simt>;
/// The GPU backend on CUDA.
#[cfg(feature = "cuda")]
pub type CudaBackend = GpuBackend<cuda::Cuda>;
/// The GPU backend on HIP.
#[cfg(feature = "hip")]
pub type HipBackend = GpuBackend<hip::Hip>;
