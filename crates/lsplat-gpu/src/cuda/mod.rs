//! The `cuda` runtime: cudarc (the driver API, loaded at run time) and NVRTC, which
//! compiles every kernel to a CUBIN for the device's exact architecture (a CUBIN from
//! a newer NVRTC loads on an older driver of the same major version; PTX would not).
//! CUBINs are cached in memory per module and on disk ([`crate::kcache`]).

pub mod nvrtc;

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaStream, DriverError, result};
use lsplat_device::{DeviceError, MemoryInfo, Result};

use crate::runtime::{DevicePtr, LaunchDims, Runtime};

/// Options of the CUDA runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaOptions {
    /// Let NVRTC contract multiply-adds into FMAs (faster; results then differ from
    /// the CPU backend in the last bits). Off by default.
    pub fmad: bool,
}

/// One CUDA device with its stream.
pub struct Cuda {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    arch: String,
    fmad: bool,
}

/// A loaded CUBIN.
pub struct CudaModule {
    module: Arc<cudarc::driver::CudaModule>,
}

/// A kernel of a module.
#[derive(Clone)]
pub struct CudaFunction {
    f: cudarc::driver::CudaFunction,
    label: Arc<str>,
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "cuda",
        reason: reason.into(),
    }
}

fn drv(e: DriverError) -> DeviceError {
    match e.0 {
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => DeviceError::OutOfMemory { bytes: 0 },
        _ => DeviceError::Driver {
            backend: "cuda",
            message: format!("{e:?}"),
        },
    }
}

fn driver_present() -> Result<()> {
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
pub fn list_devices() -> Result<Vec<String>> {
    driver_present()?;
    let count = CudaContext::device_count()
        .map_err(|e| unavailable(format!("cuInit/cuDeviceGetCount failed: {e:?}")))?;
    (0..count)
        .map(|i| {
            result::device::get(i)
                .and_then(result::device::get_name)
                .map_err(drv)
        })
        .collect()
}

impl Cuda {
    /// Opens device `ordinal`.
    pub fn new(ordinal: usize, options: CudaOptions) -> Result<Cuda> {
        let devices = list_devices()?;
        if ordinal >= devices.len() {
            return Err(unavailable(format!(
                "no CUDA device {ordinal} ({} found)",
                devices.len()
            )));
        }
        nvrtc::nvrtc_version()?;
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| unavailable(format!("cannot open device {ordinal}: {e:?}")))?;
        // SAFETY: the runtime uses a single stream, so stream-ordered allocation and
        // frees need no cross-stream events.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(drv)?;
        let stream = ctx.default_stream();
        Ok(Cuda {
            ctx,
            stream,
            name: devices[ordinal].clone(),
            arch: format!("sm_{major}{minor}"),
            fmad: options.fmad,
        })
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(drv)
    }

    fn cubin(&self, label: &str, source: &str, defines: &[(String, String)]) -> Result<Vec<u8>> {
        let flags = nvrtc::flags(defines, &self.arch, self.fmad);
        let key = crate::kcache::key((source, &flags, nvrtc::nvrtc_version().ok()));
        let path = crate::kcache::dir("cuda").join(format!("{}-{key:016x}.cubin", self.arch));
        crate::kcache::bytes(&path, || {
            Ok(nvrtc::compile_source(label, label, source, &flags)?.cubin)
        })
    }
}

impl Runtime for Cuda {
    type Module = CudaModule;
    type Function = CudaFunction;
    const NAME: &'static str = "cuda";

    fn device_name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> String {
        self.arch.clone()
    }

    fn warp_size(&self) -> u32 {
        32
    }

    fn compile(
        &self,
        label: &str,
        source: &str,
        defines: &[(String, String)],
    ) -> Result<CudaModule> {
        let cubin = self.cubin(label, source, defines)?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
            .map_err(|e| DeviceError::Kernel {
                kernel: label.to_string(),
                message: format!("loading the {} CUBIN failed: {e:?}", self.arch),
            })?;
        Ok(CudaModule { module })
    }

    fn function(&self, module: &CudaModule, label: &str, name: &str) -> Result<CudaFunction> {
        let f = module
            .module
            .load_function(name)
            .map_err(|e| DeviceError::Kernel {
                kernel: format!("{label}::{name}"),
                message: format!("{e:?}"),
            })?;
        Ok(CudaFunction {
            f,
            label: format!("{label}::{name}").into(),
        })
    }

    unsafe fn launch(
        &self,
        f: &CudaFunction,
        dims: LaunchDims,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let [gx, gy, gz] = dims.grid;
        let [bx, by, bz] = dims.block;
        // SAFETY: the caller guarantees that `params` fits the kernel's signature and
        // that the buffers are large enough; the function belongs to this context.
        unsafe {
            result::launch_kernel(
                f.f.cu_function(),
                (gx, gy, gz),
                (bx, by, bz),
                dims.shared_bytes,
                self.stream.cu_stream(),
                params,
            )
        }
        .map_err(|e| DeviceError::Kernel {
            kernel: f.label.to_string(),
            message: format!("launch {dims:?} failed: {e:?}"),
        })
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        let bytes = bytes.max(1);
        // SAFETY: stream-ordered allocation on this runtime's only stream, zeroed on the
        // same stream before any use.
        unsafe {
            let p =
                result::malloc_async(self.stream.cu_stream(), bytes).map_err(|e| match drv(e) {
                    DeviceError::OutOfMemory { .. } => DeviceError::OutOfMemory { bytes },
                    other => other,
                })?;
            result::memset_d8_async(p, 0, bytes, self.stream.cu_stream()).map_err(drv)?;
            Ok(p)
        }
    }

    unsafe fn free(&self, ptr: DevicePtr, _bytes: usize) {
        if self.bind().is_ok() {
            // SAFETY: `ptr` came from `alloc` on this stream and is freed once (the
            // caller's contract); the free is ordered after queued work.
            let _ = unsafe { result::free_async(ptr, self.stream.cu_stream()) };
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: `dst` holds `src.len()` bytes (caller's contract); a copy from
        // pageable host memory is staged before the call returns, so `src` may be
        // reused afterwards.
        unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }.map_err(drv)
    }

    unsafe fn copy_to_host(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: `src` holds `dst.len()` bytes (caller's contract); the stream is
        // synchronised before `dst` is read.
        unsafe { result::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }.map_err(drv)?;
        self.stream.synchronize().map_err(drv)
    }

    fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv)
    }

    fn memory(&self) -> Option<MemoryInfo> {
        let (free, total) = self.ctx.mem_get_info().ok()?;
        Some(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }
}
