//! The closed set of devices.

use lsplat_core::config::{BackendKind, DeviceConfig};
use lsplat_device::{Backend, DeviceError};

use crate::{CpuBackend, CudaBackend, HipBackend};

/// An opened device.
pub enum Device {
    /// The CPU.
    Cpu(CpuBackend),
    /// An NVIDIA GPU.
    Cuda(CudaBackend),
    /// An AMD GPU.
    Hip(HipBackend),
}

/// Generic code to run on whichever backend a [`Device`] holds.
pub trait BackendVisitor {
    /// The result.
    type Output;
    /// Runs with the concrete backend.
    fn visit<B: Backend>(self, backend: B) -> Self::Output;
}

impl Device {
    /// Opens the configured backend.
    pub fn open(cfg: &DeviceConfig) -> Result<Device, DeviceError> {
        match cfg.backend {
            BackendKind::Cpu => Ok(Device::Cpu(CpuBackend::new(cfg.threads as usize))),
            BackendKind::Cuda => open_cuda(cfg.ordinal as usize).map(Device::Cuda),
            BackendKind::Hip => Err(DeviceError::NotCompiled { backend: "hip" }),
        }
    }

    /// Runs `v` with the concrete backend.
    pub fn visit<V: BackendVisitor>(self, v: V) -> V::Output {
        match self {
            Device::Cpu(b) => v.visit(b),
            Device::Cuda(b) => v.visit(b),
            Device::Hip(b) => v.visit(b),
        }
    }

    /// Backends compiled into this binary.
    pub fn compiled() -> Vec<&'static str> {
        let mut v = vec!["cpu"];
        if cfg!(feature = "cuda") {
            v.push("cuda");
        }
        v
    }

    /// Devices found per compiled backend (`(backend, description)`), or the reason
    /// none can be listed.
    pub fn list() -> Vec<(&'static str, Result<Vec<String>, DeviceError>)> {
        let mut out = vec![("cpu", Ok(vec![CpuBackend::new(0).describe()]))];
        out.push(("cuda", list_cuda()));
        out.push(("hip", Err(DeviceError::NotCompiled { backend: "hip" })));
        out
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<CudaBackend, DeviceError> {
    CudaBackend::new(ordinal)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_ordinal: usize) -> Result<CudaBackend, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "cuda" })
}

#[cfg(feature = "cuda")]
fn list_cuda() -> Result<Vec<String>, DeviceError> {
    lsplat_cuda::list_devices()
}

#[cfg(not(feature = "cuda"))]
fn list_cuda() -> Result<Vec<String>, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "cuda" })
}
