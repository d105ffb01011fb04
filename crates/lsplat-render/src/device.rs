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

/// Why a GPU runtime could not be opened, in a few words.
fn reason(e: &DeviceError) -> String {
    match e {
        DeviceError::Unavailable { reason, .. } => reason.clone(),
        DeviceError::NotCompiled { backend } => format!("{backend} is not compiled in"),
        other => other.to_string(),
    }
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
    /// Opens the configured backend (`simt` holds the simt runtime's options);
    /// `auto` opens the first usable of CUDA, HIP and the CPU.
    pub fn open(cfg: &DeviceConfig, simt: &SimtConfig) -> Result<Device, DeviceError> {
        Ok(Device::open_reporting(cfg, simt)?.0)
    }

    /// [`Device::open`], with the backend opened and, for `auto`, why it was chosen
    /// (`"CUDA device 0: NVIDIA H200"`, or why neither GPU runtime was usable).
    pub fn open_reporting(
        cfg: &DeviceConfig,
        simt: &SimtConfig,
    ) -> Result<(Device, BackendKind, Option<String>), DeviceError> {
        if cfg.backend != BackendKind::Auto {
            return Ok((Device::open_kind(cfg, simt)?, cfg.backend, None));
        }
        let ordinal = cfg.ordinal as usize;
        let cuda = match open_cuda(ordinal) {
            Ok(b) => {
                let why = format!("CUDA device {ordinal}: {}", b.describe());
                return Ok((Device::Cuda(b), BackendKind::Cuda, Some(why)));
            }
            Err(e) => e,
        };
        let hip = match open_hip(ordinal) {
            Ok(b) => {
                let why = format!(
                    "no usable NVIDIA GPU ({}); HIP device {ordinal}: {}",
                    reason(&cuda),
                    b.describe()
                );
                return Ok((Device::Hip(b), BackendKind::Hip, Some(why)));
            }
            Err(e) => e,
        };
        let why = format!(
            "no usable GPU: NVIDIA: {}; AMD: {}",
            reason(&cuda),
            reason(&hip)
        );
        let cpu = DeviceConfig {
            backend: BackendKind::Cpu,
            ..cfg.clone()
        };
        Ok((Device::open_kind(&cpu, simt)?, BackendKind::Cpu, Some(why)))
    }

    fn open_kind(cfg: &DeviceConfig, simt: &SimtConfig) -> Result<Device, DeviceError> {
        match cfg.backend {
            BackendKind::Auto => Ok(Device::open_reporting(cfg, simt)?.0),
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
