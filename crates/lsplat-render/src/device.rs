//! The closed set of devices.

use lsplat_core::config::{BackendKind, DeviceConfig, SimtConfig, SimtSchedule};
use lsplat_device::{Backend, DeviceError};
use lsplat_gpu::simt::{Schedule, Simt, SimtOptions};

use crate::{CpuBackend, CudaBackend, HipBackend, SimtBackend};

/// An opened device.
pub enum Device {
    /// The CPU.
    Cpu(CpuBackend),
    /// The GPU backend on the CPU (kernels run as fibers).
    Simt(SimtBackend),
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

/// The simt runtime options of a configuration.
pub fn simt_options(device: &DeviceConfig, simt: &SimtConfig) -> SimtOptions {
    SimtOptions {
        warp: simt.warp,
        schedule: match simt.schedule {
            SimtSchedule::InOrder => Schedule::InOrder,
            SimtSchedule::Reverse => Schedule::Reverse,
            SimtSchedule::Random => Schedule::Random,
        },
        seed: simt.seed,
        threads: device.threads as usize,
    }
}

impl Device {
    /// Opens the configured backend (`simt` holds the simt runtime's options).
    pub fn open(cfg: &DeviceConfig, simt: &SimtConfig) -> Result<Device, DeviceError> {
        match cfg.backend {
            BackendKind::Cpu => Ok(Device::Cpu(CpuBackend::new(cfg.threads as usize))),
            BackendKind::Simt => Ok(Device::Simt(SimtBackend::new(Simt::new(simt_options(
                cfg, simt,
            ))?))),
            BackendKind::Cuda => open_cuda(cfg.ordinal as usize).map(Device::Cuda),
            BackendKind::Hip => open_hip(cfg.ordinal as usize).map(Device::Hip),
        }
    }

    /// Runs `v` with the concrete backend.
    pub fn visit<V: BackendVisitor>(self, v: V) -> V::Output {
        match self {
            Device::Cpu(b) => v.visit(b),
            Device::Simt(b) => v.visit(b),
            Device::Cuda(b) => v.visit(b),
            Device::Hip(b) => v.visit(b),
        }
    }

    /// Backends compiled into this binary.
    pub fn compiled() -> Vec<&'static str> {
        let mut v = vec!["cpu", "simt"];
        if cfg!(feature = "cuda") {
            v.push("cuda");
        }
        if cfg!(feature = "hip") {
            v.push("hip");
        }
        v
    }

    /// Devices found per backend (`(backend, descriptions)`), or the reason none can
    /// be listed.
    pub fn list() -> Vec<(&'static str, Result<Vec<String>, DeviceError>)> {
        let simt = Simt::new(SimtOptions::default()).map(|s| {
            let c = s.compiler();
            vec![format!(
                "CPU ({} threads), {} ({}), warp 32 or 64 (simt.warp), kernel cache {}",
                s.threads(),
                c.program,
                c.version,
                lsplat_gpu::simt::compile::cache_dir().display()
            )]
        });
        vec![
            ("cpu", Ok(vec![CpuBackend::new(0).describe()])),
            ("simt", simt),
            ("cuda", list_cuda()),
            ("hip", list_hip()),
        ]
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<CudaBackend, DeviceError> {
    let rt = lsplat_gpu::cuda::Cuda::new(ordinal, Default::default())?;
    Ok(CudaBackend::new(rt))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_ordinal: usize) -> Result<CudaBackend, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "cuda" })
}

#[cfg(feature = "cuda")]
fn list_cuda() -> Result<Vec<String>, DeviceError> {
    lsplat_gpu::cuda::list_devices()
}

#[cfg(not(feature = "cuda"))]
fn list_cuda() -> Result<Vec<String>, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "cuda" })
}

#[cfg(feature = "hip")]
fn open_hip(ordinal: usize) -> Result<HipBackend, DeviceError> {
    Ok(HipBackend::new(lsplat_gpu::hip::Hip::new(ordinal)?))
}

#[cfg(not(feature = "hip"))]
fn open_hip(_ordinal: usize) -> Result<HipBackend, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "hip" })
}

#[cfg(feature = "hip")]
fn list_hip() -> Result<Vec<String>, DeviceError> {
    lsplat_gpu::hip::list_devices()
}

#[cfg(not(feature = "hip"))]
fn list_hip() -> Result<Vec<String>, DeviceError> {
    Err(DeviceError::NotCompiled { backend: "hip" })
}
