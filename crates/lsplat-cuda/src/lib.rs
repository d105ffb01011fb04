//! The CUDA backend of lsplat-engine.
//!
//! cudarc with dynamic loading: nothing CUDA is needed to build this crate, and
//! [`CudaBackend::new`] reports [`DeviceError::Unavailable`] when libcuda, libnvrtc
//! or a device is missing. Kernels come from `kernels/` (crate `lsplat-kernels`) and
//! are compiled at run time by the machine's NVRTC to a CUBIN for the device's
//! architecture, cached per (kernel, defines, arch) in memory and optionally on disk
//! (`LSPLAT_KERNEL_CACHE=<dir>`).
//!
//! All ops are queued on one stream and never wait for the device, except
//! [`Backend::download`] and [`Backend::synchronize`] — and one 4-byte read-back of
//! an element count in `bin_and_sort` and `build_operator` (cache-warming ops), which
//! must size their outputs. Ground truth, projections, bins and operators stay
//! resident on the device.

mod algo;
mod backend;
mod buf;
mod cache;
mod geometry;
mod gpu;
pub mod nvrtc;
mod operator;
mod ops;
mod raster;

pub use buf::CudaBuf;
pub use geometry::{CudaBins, CudaGeometry, CudaProjection};
pub use operator::CudaOperator;
pub use raster::MAX_CHANNELS;

use cudarc::driver::CudaContext;
use lsplat_device::DeviceError;

use crate::gpu::Gpu;

/// Options of a [`CudaBackend`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaOptions {
    /// Let NVRTC contract multiply-adds into FMAs (faster; results then differ from
    /// the CPU backend in the last bits). Off by default.
    pub fmad: bool,
}

/// One CUDA device.
pub struct CudaBackend {
    gpu: Gpu,
    name: String,
    ordinal: usize,
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "cuda",
        reason: reason.into(),
    }
}

/// Fails with [`DeviceError::Unavailable`] unless libcuda can be loaded.
fn driver_present() -> Result<(), DeviceError> {
    // SAFETY: only tries to dlopen the driver library names and drops the handle.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(unavailable(
            "libcuda could not be loaded (no NVIDIA driver on this machine)",
        ))
    }
}

/// Names of the CUDA devices, by ordinal.
pub fn list_devices() -> Result<Vec<String>, DeviceError> {
    driver_present()?;
    let count = CudaContext::device_count()
        .map_err(|e| unavailable(format!("cuInit/cuDeviceGetCount failed: {e:?}")))?;
    (0..count)
        .map(|i| {
            cudarc::driver::result::device::get(i)
                .and_then(cudarc::driver::result::device::get_name)
                .map_err(gpu::drv)
        })
        .collect()
}

impl CudaBackend {
    /// Opens device `ordinal` with default options.
    pub fn new(ordinal: usize) -> Result<Self, DeviceError> {
        Self::with_options(ordinal, CudaOptions::default())
    }

    /// Opens device `ordinal`.
    pub fn with_options(ordinal: usize, options: CudaOptions) -> Result<Self, DeviceError> {
        let devices = list_devices()?;
        if ordinal >= devices.len() {
            return Err(unavailable(format!(
                "no CUDA device {ordinal} ({} found)",
                devices.len()
            )));
        }
        Gpu::check_nvrtc()?;
        let gpu = Gpu::open(ordinal, options.fmad)?;
        Ok(CudaBackend {
            gpu,
            name: devices[ordinal].clone(),
            ordinal,
        })
    }

    /// The device's architecture (`sm_XY`).
    pub fn arch(&self) -> &str {
        &self.gpu.arch
    }

    pub(crate) fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}
