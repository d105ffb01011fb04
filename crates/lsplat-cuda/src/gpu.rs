//! The device context: stream, architecture, and the kernel module cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, LaunchConfig,
};
use cudarc::nvrtc::Ptx;
use lsplat_device::DeviceError;
use lsplat_kernels::Kernel;

use crate::nvrtc;

/// Maps a driver error to a [`DeviceError`].
pub(crate) fn drv(e: DriverError) -> DeviceError {
    use cudarc::driver::sys::CUresult;
    match e.0 {
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => DeviceError::OutOfMemory { bytes: 0 },
        _ => DeviceError::Driver {
            backend: "cuda",
            message: format!("{e:?}"),
        },
    }
}

/// A 1-D grid-stride launch over `n` items with `threads` per block.
pub(crate) fn grid(n: u64, threads: u32) -> LaunchConfig {
    let blocks = n.div_ceil(threads as u64).clamp(1, 1 << 20) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

type ModuleKey = (Kernel, u32, u32);

/// One CUDA device with its stream and compiled kernels.
pub(crate) struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// `sm_XY` of the device.
    pub arch: String,
    /// FMA contraction in kernels (off = bitwise parity with the CPU backend).
    pub fmad: bool,
    modules: Mutex<HashMap<ModuleKey, Arc<CudaModule>>>,
    functions: Mutex<HashMap<(ModuleKey, &'static str), CudaFunction>>,
}

impl Gpu {
    /// Opens device `ordinal` (a primary context and its default stream).
    pub fn open(ordinal: usize, fmad: bool) -> Result<Self, DeviceError> {
        let ctx = CudaContext::new(ordinal).map_err(|e| DeviceError::Unavailable {
            backend: "cuda",
            reason: format!("cannot open device {ordinal}: {e:?}"),
        })?;
        // SAFETY: the backend uses a single stream, so stream-ordered allocation and
        // frees need no cross-stream events.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(drv)?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            arch: format!("sm_{major}{minor}"),
            fmad,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// Kernel `name` of `kernel` compiled for `(tile_size, channels)` (ignored where the
    /// family does not depend on them); compiled and loaded on first use.
    pub fn function(
        &self,
        kernel: Kernel,
        tile_size: u32,
        channels: u32,
        name: &'static str,
    ) -> Result<CudaFunction, DeviceError> {
        let key: ModuleKey = (
            kernel,
            if kernel.uses_tile_size() {
                tile_size
            } else {
                16
            },
            if kernel.uses_channels() { channels } else { 1 },
        );
        if let Some(f) = lock(&self.functions).get(&(key, name)) {
            return Ok(f.clone());
        }
        let module = self.module(key)?;
        let f = module
            .load_function(name)
            .map_err(|e| DeviceError::Kernel {
                kernel: format!("{}::{name}", kernel.file_name()),
                message: format!("{e:?}"),
            })?;
        lock(&self.functions).insert((key, name), f.clone());
        Ok(f)
    }

    fn module(&self, key: ModuleKey) -> Result<Arc<CudaModule>, DeviceError> {
        if let Some(m) = lock(&self.modules).get(&key) {
            return Ok(m.clone());
        }
        let (kernel, tile, channels) = key;
        let cubin = crate::cache::cubin(kernel, tile, channels, &self.arch, self.fmad)?;
        let module =
            self.ctx
                .load_module(Ptx::from_binary(cubin))
                .map_err(|e| DeviceError::Kernel {
                    kernel: kernel.file_name().to_string(),
                    message: format!("loading the {} CUBIN failed: {e:?}", self.arch),
                })?;
        lock(&self.modules).insert(key, module.clone());
        Ok(module)
    }

    /// Makes sure NVRTC is usable before the first op needs it.
    pub fn check_nvrtc() -> Result<(i32, i32), DeviceError> {
        nvrtc::nvrtc_version()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
